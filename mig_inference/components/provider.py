"""The components this package serves to every Pulumi language, and the provider that serves them.

The schema is inferred by the Python SDK's component provider from the components' type hints and
docstrings (`provider/` holds the plugin that runs `serve`)."""

import inspect
import json
import sys
from typing import Any

import pulumi
from pulumi.provider import main
from pulumi.provider.experimental.component import ComponentProvider

from mig_inference.clouds import Cloud
from mig_inference.release import installed_version, semver

from .clouds.eks import EksCluster, EksGpuNodeGroup
from .clouds.eks_autoscaler import EksClusterAutoscaler
from .clouds.existing import ExistingNodePool, ExistingNodeTaints
from .clouds.gke import GkeCluster, GkeGpuPool
from .clouds.oke import OkeCluster, OkeGpuPool
from .clouds.oke_autoscaler import OkeClusterAutoscaler
from .field_docs import FIELDS_HEADING
from .stack import MigInference
from .workloads.gpu_operator import GpuOperator
from .workloads.inference import InferenceService
from .workloads.mig_gate import MigReadyGate
from .workloads.monitoring import Keda, Monitoring
from .workloads.profiling import ProfilingJobs
from .workloads.repartition import InPlaceRepartition
from .workloads.startup_taints import StartupTaintAgent

PACKAGE = "mig-inference"
"""The Pulumi package name: every component's type token is `mig-inference:index:<Class>`."""

COMPONENTS: list[type[pulumi.ComponentResource]] = [
    MigInference,
    GkeCluster,
    GkeGpuPool,
    EksCluster,
    EksGpuNodeGroup,
    EksClusterAutoscaler,
    OkeCluster,
    OkeGpuPool,
    OkeClusterAutoscaler,
    ExistingNodePool,
    ExistingNodeTaints,
    GpuOperator,
    InPlaceRepartition,
    MigReadyGate,
    StartupTaintAgent,
    InferenceService,
    ProfilingJobs,
    Monitoring,
    Keda,
]


def package_version() -> str:
    """The installed distribution's version as SemVer, which the engine reads the schema's and
    the generated SDKs' version as (`0.4.0.dev0` is `0.4.0-dev.0`)."""
    return semver(installed_version())


def _dedented(value: Any) -> Any:
    if isinstance(value, dict):
        return {
            key: inspect.cleandoc(item.split(FIELDS_HEADING)[0])
            if key == "description"
            else _dedented(item)
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [_dedented(item) for item in value]
    return value


SECRET_PROPERTIES = ("kubeconfig", "secrets")
"""Properties that hold credentials: a created cluster's kubeconfig, and the secret values a
stack names. The SDK's analyzer has no way to mark a property secret, so the schema is told
here (the values themselves are Pulumi secrets either way)."""
CLOUD_TYPE = f"{PACKAGE}:index:Cloud"


def _secrets_and_enums(schema: dict[str, Any]) -> dict[str, Any]:
    """`schema` with credential properties marked secret and `cloud` an enum of the clouds."""
    schema["types"][CLOUD_TYPE] = {
        "type": "string",
        "description": "Where the cluster runs.",
        "enum": [{"value": cloud.value, "name": cloud.name.title()} for cloud in Cloud],
    }
    holders = [
        *[(r, "inputProperties") for r in schema["resources"].values()],
        *[(r, "properties") for r in schema["resources"].values()],
        *[(t, "properties") for t in schema["types"].values()],
    ]
    for holder, section in holders:
        properties = holder.get(section) or {}
        for name in SECRET_PROPERTIES:
            if name in properties:
                properties[name]["secret"] = True
        cloud = properties.get("cloud")
        if cloud is not None and cloud.get("type") == "string":
            properties["cloud"] = {
                key: value for key, value in cloud.items() if key not in ("type",)
            } | {"$ref": f"#/types/{CLOUD_TYPE}"}
    return schema


class MigInferenceProvider(ComponentProvider):
    """The SDK's component provider for `COMPONENTS`, with every description dedented: Python
    3.11 keeps a docstring's indentation, which Markdown would show as code."""

    def __init__(self) -> None:
        super().__init__(COMPONENTS, PACKAGE, None, package_version())
        assert self.schema is not None
        self.schema = json.dumps(_secrets_and_enums(_dedented(json.loads(self.schema))))


def serve() -> None:
    """Run as the package's provider plugin (the Pulumi engine starts it with its address)."""
    main(MigInferenceProvider(), sys.argv[1:])
