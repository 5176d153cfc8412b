"""The components this package serves to every Pulumi language, and the provider that serves them.

The schema is inferred by Pulumi's component-provider host from the components' type hints and
docstrings (`provider/` holds the plugin that runs `serve`)."""

from importlib.metadata import PackageNotFoundError, version

import pulumi
from pulumi.provider.experimental import component_provider_host

from .cluster_autoscaler import EksClusterAutoscaler, OkeClusterAutoscaler
from .eks import EksCluster, EksGpuNodeGroup
from .existing import ExistingNodePool
from .gke import GkeCluster, GkeGpuPool
from .gpu_operator import GpuOperator
from .inference import InferenceService
from .mig_gate import MigReadyGate
from .monitoring import Keda, Monitoring
from .oke import OkeCluster, OkeGpuPool
from .repartition import InPlaceRepartition
from .stack import MigInference

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
    GpuOperator,
    InPlaceRepartition,
    MigReadyGate,
    InferenceService,
    Monitoring,
    Keda,
]


def package_version() -> str:
    """The installed distribution's version (the schema and generated SDKs carry it)."""
    try:
        return version(PACKAGE)
    except PackageNotFoundError:
        return "0.0.0"


def serve() -> None:
    """Run as the package's provider plugin (the Pulumi engine starts it)."""
    component_provider_host(COMPONENTS, name=PACKAGE, version=package_version())
