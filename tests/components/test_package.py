"""The multi-language package: the schema Pulumi's component-provider host infers from the
components, and construct() of every component with dict inputs as the engine sends them."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

import pulumi
import pytest
import yaml
from pulumi.provider.server import ComponentInitError

from mig_inference.components.provider import COMPONENTS, PACKAGE, MigInferenceProvider
from mig_inference.components.stack import MigInference
from mig_inference.components.stack_args import Cluster, Stack
from mig_inference.render import run_program
from mig_inference.rendering import Rendering
from mig_inference.spec.cluster import ACCESS_KEYS, CLUSTER_KEYS
from mig_inference.spec.dra import DRA_KEYS
from mig_inference.spec.files import stack_path
from mig_inference.spec.gateway import GATEWAY_KEYS, PICKER_KEYS
from mig_inference.spec.model_cache import MODEL_CACHE_KEYS
from mig_inference.spec.monitoring import MONITORING_KEYS
from mig_inference.spec.operator import OPERATOR_KEYS
from mig_inference.spec.pools import POOL_KEYS
from mig_inference.spec.services import SERVICE_KEYS
from mig_inference.spec.stack import TOP_KEYS
from mig_inference.spec.verify import EPHEMERAL_KEYS, SERVICE_VERIFY_KEYS, VERIFY_KEYS
from tests.mocked import render_config, stack_rendering

INDEX = f"{PACKAGE}:index:"
ROOT = Path(__file__).resolve().parent.parent.parent


@cache
def provider() -> MigInferenceProvider:
    return MigInferenceProvider()


@cache
def schema() -> dict[str, Any]:
    text = provider().schema
    assert text is not None
    return json.loads(text)  # type: ignore[no-any-return]


def stack_keys(type_name: str) -> set[str]:
    """A schema type's property names."""
    return set(schema()["types"][INDEX + type_name]["properties"])


def test_schema_has_every_component_with_descriptions() -> None:
    resources = schema()["resources"]
    assert set(resources) == {INDEX + component.__name__ for component in COMPONENTS}
    for token, resource in resources.items():
        assert resource["isComponent"] is True, token
        assert resource.get("description"), token
        for kind in ("inputProperties", "properties"):
            for name, prop in resource.get(kind, {}).items():
                assert prop.get("description"), f"{token} {kind} {name}"
        assert "id" not in resource.get("properties", {}), token
        assert resource.get("inputProperties"), f"{token} takes no inputs"


def descriptions(value: Any) -> list[str]:
    if isinstance(value, dict):
        own = [value["description"]] if isinstance(value.get("description"), str) else []
        return own + [text for item in value.values() for text in descriptions(item)]
    if isinstance(value, list):
        return [text for item in value for text in descriptions(item)]
    return []


def test_descriptions_are_dedented_markdown() -> None:
    found = descriptions(schema())
    assert len(found) > 150
    assert not [text for text in found if "\n " in text or text != text.strip()]


def test_provider_plugin_serves_the_schema_over_grpc() -> None:
    """`provider/__main__.py` as the engine starts it: it prints its port, then answers."""
    import grpc
    from pulumi.runtime.proto import provider_pb2, provider_pb2_grpc

    plugin = subprocess.Popen(
        [sys.executable, str(ROOT / "provider" / "__main__.py"), "127.0.0.1:1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert plugin.stdout is not None
        port = int(plugin.stdout.readline())
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = provider_pb2_grpc.ResourceProviderStub(channel)
            served = stub.GetSchema(provider_pb2.GetSchemaRequest(version=0), timeout=60)
        assert json.loads(served.schema) == schema()
    finally:
        plugin.kill()
        plugin.communicate()  # waits, and closes its pipes


def test_schema_types_are_the_stack_file_sections_and_documented() -> None:
    types = schema()["types"]
    assert set(types) == {
        INDEX + name
        for name in (
            "Stack", "Cluster", "Pool", "Taint", "Sharing", "SharingMode",
            "GpuOperatorSettings", "MonitoringSettings", "Service",
            "NetworkClient", "QueueAutoscaling", "AutoscaledPool", "ThroughputPoint",
            "Profiling", "ModelCache", "VerifySettings", "ServiceVerifySettings", "EphemeralSettings",
            "ReplanSettings",
            "DraSettings", "GatewaySettings", "GatewayTls", "GatewayCertManager", "EndpointPicker",
            "Cloud",
        )
    }  # fmt: skip
    for token, typ in types.items():
        assert typ.get("description"), token
        for name, prop in typ.get("properties", {}).items():
            assert prop.get("description"), f"{token}.{name}"


def test_schema_marks_credentials_secret_and_cloud_an_enum() -> None:
    found = schema()
    stack = found["resources"][INDEX + "MigInference"]
    assert stack["inputProperties"]["secrets"]["secret"] is True
    assert found["types"][INDEX + "Stack"]["properties"]["secrets"]["secret"] is True
    for component in ("MigInference", "GkeCluster", "EksCluster", "OkeCluster"):
        assert found["resources"][INDEX + component]["properties"]["kubeconfig"]["secret"] is True
    cloud = found["types"][INDEX + "Cloud"]
    assert [v["value"] for v in cloud["enum"]] == ["gke", "eks", "oke", "existing"]
    for holder in (stack["inputProperties"], found["types"][INDEX + "Stack"]["properties"]):
        assert holder["cloud"]["$ref"] == f"#/types/{INDEX}Cloud"


def test_typed_args_mirror_every_stack_file_key() -> None:
    """A key the stack file takes and the typed inputs lack (or the reverse) fails here."""
    every_cloud = {key for keys in CLUSTER_KEYS.values() for key in keys}
    assert stack_keys("Cluster") == {"name", "create", "protect", *ACCESS_KEYS, *every_cloud}
    assert stack_keys("Pool") == set(POOL_KEYS)
    assert stack_keys("Service") == set(SERVICE_KEYS)
    assert stack_keys("GpuOperatorSettings") == set(OPERATOR_KEYS)
    assert stack_keys("MonitoringSettings") == set(MONITORING_KEYS)
    assert stack_keys("ModelCache") == set(MODEL_CACHE_KEYS)
    assert stack_keys("VerifySettings") == set(VERIFY_KEYS)
    assert stack_keys("ServiceVerifySettings") == set(SERVICE_VERIFY_KEYS)
    assert stack_keys("EphemeralSettings") == set(EPHEMERAL_KEYS)
    assert stack_keys("DraSettings") == set(DRA_KEYS)
    assert stack_keys("GatewaySettings") == set(GATEWAY_KEYS)
    assert stack_keys("EndpointPicker") == set(PICKER_KEYS)
    assert stack_keys("Stack") == {*TOP_KEYS, "secrets", "stackName"}


def test_plan_deciding_inputs_are_plain_and_references_take_outputs() -> None:
    """Layouts, counts and names are decided at preview: plain. Secrets and cloud references
    (cluster names, OCIDs, subnets) may be Outputs of other resources."""
    pool = schema()["types"][INDEX + "Pool"]["properties"]
    assert pool["mig"]["plain"] is True and pool["nodes"]["plain"] is True
    secrets = schema()["resources"][INDEX + "MigInference"]["inputProperties"]["secrets"]
    assert "plain" not in secrets["additionalProperties"]
    gke_pool = schema()["resources"][INDEX + "GkeGpuPool"]["inputProperties"]
    assert "plain" not in gke_pool["cluster"] and gke_pool["pool"]["plain"] is True
    oke = schema()["resources"][INDEX + "OkeCluster"]["inputProperties"]
    assert "plain" not in oke["compartmentId"] and "plain" not in oke["podSubnetIds"]["items"]


def wire(value: Any) -> Any:
    """A value as the engine hands it to a provider: every number a float."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return float(value)
    if isinstance(value, dict):
        return {key: wire(item) for key, item in value.items()}
    if isinstance(value, list):
        return [wire(item) for item in value]
    return value


def stack_inputs(stack: str) -> dict[str, Any]:
    """A stack file's `mig-inference:` keys: the MigInference inputs in schema spelling."""
    config = yaml.safe_load(Path(stack_path(stack)).read_text())["config"]
    inputs = {
        key.split(":", 1)[1]: value
        for key, value in config.items()
        if key.startswith("mig-inference:") and key.split(":", 1)[1] in TOP_KEYS
    }
    secret_names = {
        service[field]
        for service in inputs.get("services") or []
        for field in ("hfTokenSecret", "apiKeySecret")
        if field in service
    }
    if isinstance(inputs.get("cluster"), dict) and inputs["cluster"].get("kubeconfig"):
        secret_names.add(inputs["cluster"]["kubeconfig"])
    return {
        **wire(inputs),
        "secrets": {name: f"{name}-value" for name in secret_names},
        "stackName": stack,
    }


def construct(
    tmp_path: Path,
    name: str,
    component: str,
    inputs: dict[str, Any] | Callable[[], dict[str, Any]],
) -> Rendering:
    """Construct `component` through the package's provider under mocks; `inputs` may be made
    inside the program (Outputs need its event loop)."""
    empty = tmp_path / "Pulumi.test.yaml"
    empty.write_text("config: {}\n")

    def program() -> None:
        given = inputs() if callable(inputs) else inputs
        result = provider().construct(name, INDEX + component, given, pulumi.ResourceOptions())
        # The state the provider returns holds every output the schema declares.
        declared = schema()["resources"][INDEX + component].get("properties", {})
        assert set(result.state) == set(declared), component

    rendering = run_program("test", empty, program=program)
    assert rendering.error is None, rendering.error
    return rendering


def created(rendering: Rendering) -> dict[tuple[str, str], dict[str, Any]]:
    return {(r.type, r.name): r.inputs for r in rendering.resources}


STACKS = sorted(p.name.split(".")[1] for p in Path("stacks").glob("Pulumi.*.yaml"))


@pytest.mark.parametrize("stack", STACKS)
def test_mig_inference_constructed_from_dict_inputs_creates_what_the_program_does(
    tmp_path: Path, stack: str
) -> None:
    through_provider = created(construct(tmp_path, "gpus", "MigInference", stack_inputs(stack)))
    # Every resource of the component is named after it (`gpus-`): two instances never collide.
    program = {(kind, f"gpus-{name}"): inputs for (kind, name), inputs in created(
        stack_rendering(stack)).items()}  # fmt: skip
    assert set(through_provider) == set(program)
    for key, inputs in program.items():
        if key[0] == "kubernetes:core/v1:Secret":
            # The stack files hold ciphertext, the test plain values; both stay secret.
            assert set(through_provider[key]["stringData"]) == set(inputs["stringData"])
        else:
            # Besides names, only what derives from them differs: the mocks' ids of the
            # component's resources and the IAM roles' descriptions.
            unprefixed = json.loads(json.dumps(through_provider[key]).replace("gpus-", ""))
            assert unprefixed == inputs, key


def pool_inputs(stack: str) -> tuple[dict[str, Any], str]:
    inputs = stack_inputs(stack)
    return inputs, str(inputs["pools"][0]["name"])


@pytest.mark.parametrize(
    ("stack", "component", "refs", "resource_type"),
    [
        ("gke-h100", "GkeGpuPool", {"cluster": "c"}, "gcp:container/nodePool:NodePool"),
        ("eks-p4d", "EksGpuNodeGroup", {"clusterName": "c"}, "aws:eks/nodeGroup:NodeGroup"),
        ("oke-h100", "OkeGpuPool", {"clusterId": "ocid1.cluster.oc1..x", "kubernetesVersion": "v1.34.2"},
         "oci:ContainerEngine/nodePool:NodePool"),
        ("existing", "ExistingNodePool", {}, "kubernetes:core/v1:NodePatch"),
        ("existing", "ExistingNodeTaints", {}, "kubernetes:core/v1:NodePatch"),
    ],
)  # fmt: skip
def test_pool_components_plan_their_pool_from_the_stack(
    tmp_path: Path, stack: str, component: str, refs: dict[str, Any], resource_type: str
) -> None:
    stack_values, pool = pool_inputs(stack)
    program = stack_rendering(stack)
    if component == "GkeGpuPool":
        # The program makes the nodes' service account; a pool of your own takes its email.
        [account] = program.of_type("gcp:serviceaccount/account:Account")
        project = account.inputs["project"]
        refs = {**refs, "nodeServiceAccount": f"{account.inputs['accountId']}@{project}"
                ".iam.gserviceaccount.com"}  # fmt: skip
    rendering = construct(tmp_path, pool, component, {"stack": stack_values, "pool": pool, **refs})

    def planned_fields(inputs: dict[str, Any]) -> dict[str, Any]:
        """Inputs without the cluster reference (the program's comes from a lookup)."""
        return {k: v for k, v in inputs.items() if k not in ("cluster", "clusterName", "clusterId")}

    # Sorted: resources that wait on a read (a node's live taints) register in any order; the
    # program's are the ones under a component of the same type.
    made = sorted(json.dumps(planned_fields(r.inputs), sort_keys=True)
                  for r in rendering.of_type(resource_type))  # fmt: skip
    by_program = sorted(
        json.dumps(planned_fields(r.inputs), sort_keys=True)
        for r in program.of_type(resource_type)
        if program.options[(r.type, r.name)].parent_type == INDEX + component
    )
    assert made and made == by_program


@pytest.mark.parametrize(
    ("component", "inputs", "resource_type", "count"),
    [
        ("GkeCluster", {"name": "c", "location": "europe-west4", "network": "gpu-vpc", "subnetwork": "gpu-subnet",
                        "authorizedNetworks": ["203.0.113.0/24"]},
         "gcp:container/cluster:Cluster", 1),
        ("EksCluster", {"name": "c", "region": "us-east-1", "version": "1.33", "subnetIds": ["subnet-0000000a"]},
         "aws:eks/cluster:Cluster", 1),
        ("OkeCluster", {"name": "c", "compartmentId": "ocid1.compartment.oc1..x", "vcnId": "ocid1.vcn.oc1..v", "endpointSubnetId": "ocid1.subnet.oc1..e",
                        "kubernetesVersion": "v1.33.1", "nodeSubnetId": "n", "podSubnetIds": ["ocid1.subnet.oc1..p"],
                        "availabilityDomain": "AD-1", "systemImageId": "ocid1.image.oc1..sys"},
         "oci:ContainerEngine/cluster:Cluster", 1),
        ("EksClusterAutoscaler", {"clusterName": "c", "region": "us-east-1", "kubernetesVersion": "1.33"},
         "kubernetes:helm.sh/v3:Release", 1),
        ("OkeClusterAutoscaler", {"clusterId": "ocid1.cluster.oc1..c", "compartmentId": "ocid1.compartment.oc1..x",
                                  "pools": [{"min": 0.0, "max": 4.0,
                                                               "nodePoolId": "p"}]},
         "oci:ContainerEngine/addon:Addon", 1),
        ("Keda", {}, "kubernetes:helm.sh/v3:Release", 1),
    ],
)  # fmt: skip
def test_cloud_components_construct_from_dict_inputs(
    tmp_path: Path, component: str, inputs: dict[str, Any], resource_type: str, count: int
) -> None:
    rendering = construct(tmp_path, "made", component, inputs)
    assert len(rendering.of_type(resource_type)) == count


@pytest.mark.parametrize(
    ("stack", "component", "selector", "resource_type"),
    [
        ("gke-h100", "GpuOperator", {}, "kubernetes:helm.sh/v3:Release"),
        ("gke-h100", "MigReadyGate", {}, "kubernetes:batch/v1:Job"),
        ("gke-h100", "InferenceService", {"service": "mistral-nemo"}, "kubernetes:apps/v1:Deployment"),
        ("gke-h100", "Monitoring", {}, "kubernetes:monitoring.coreos.com/v1:PrometheusRule"),
        ("existing", "InPlaceRepartition", {"pool": "lab-h100"}, "kubernetes:batch/v1:Job"),
        ("eks-p4de-demand", "ProfilingJobs", {"service": "chat"}, "kubernetes:batch/v1:Job"),
    ],
)  # fmt: skip
def test_kubernetes_components_construct_from_the_stack(
    tmp_path: Path, stack: str, component: str, selector: dict[str, Any], resource_type: str
) -> None:
    inputs = stack_inputs(stack)
    if component == "Monitoring":
        inputs["monitoring"] = {"prometheusOperator": True}
    rendering = construct(tmp_path, "made", component, {"stack": inputs, **selector})
    assert rendering.of_type(resource_type)


def test_a_refused_stack_is_one_error_naming_the_key_and_creates_nothing(tmp_path: Path) -> None:
    inputs = stack_inputs("gke-h100")
    inputs["pools"][0]["mig"] = "all-3g.20gb"
    empty = tmp_path / "Pulumi.test.yaml"
    empty.write_text("config: {}\n")
    errors: list[str] = []

    def program() -> None:
        try:
            provider().construct("m", INDEX + "MigInference", inputs, pulumi.ResourceOptions())
        except ComponentInitError as error:  # what the provider reports to the engine
            errors.append(str(error))

    rendering = run_program("test", empty, program=program)
    assert len(errors) == 1
    assert "mig-inference:pools[0].mig: 'all-3g.20gb' is not a named MIG config" in errors[0]
    assert not rendering.resources


def eks_stack(cluster_name: Any, create: bool = False) -> Stack:
    """Typed args as a Python program writes them (snake_case), for one EKS pool and service."""
    cluster: Cluster = {
        "name": cluster_name,
        "region": "us-east-1",
        "subnet_ids": ["subnet-0000000a"],
    }
    if create:
        cluster["create"], cluster["vpc_id"], cluster["version"] = True, "vpc-0000000a", "1.33"
        cluster["public_access_cidrs"] = ["203.0.113.0/24"]
    return {
        "cloud": "eks",
        "cluster": cluster,
        "pools": [{"name": "a100", "gpu": "a100-40gb", "machine_type": "p4d.24xlarge", "nodes": 1,
                   "mig": "all-3g.20gb", "max_pods": 64}],
        "services": [{"name": "chat", "model": "org/model", "memory_gi_b": 12, "replicas": 8}],
        "stack_name": "py",
    }  # fmt: skip


def test_python_program_passes_a_cluster_name_from_another_resource(tmp_path: Path) -> None:
    empty = tmp_path / "Pulumi.test.yaml"
    empty.write_text("config: {}\n")

    def program() -> None:
        elsewhere = pulumi.Output.from_input("made-elsewhere").apply(lambda name: name)
        MigInference("mig", eks_stack(elsewhere))

    rendering = run_program("test", empty, program=program)
    assert rendering.error is None, rendering.error
    [group] = rendering.of_type("aws:eks/nodeGroup:NodeGroup")
    assert group.inputs["clusterName"] == "made-elsewhere"
    assert group.inputs["instanceTypes"] == ["p4d.24xlarge"]
    lookups = [args for token, args in rendering.calls if token == "aws:eks/getCluster:getCluster"]
    assert lookups == [{"name": "made-elsewhere"}]
    [deployment] = rendering.of_type("kubernetes:apps/v1:Deployment")
    assert deployment.inputs["spec"]["replicas"] == 8


def test_a_created_cluster_needs_a_plain_name(tmp_path: Path) -> None:
    empty = tmp_path / "Pulumi.test.yaml"
    empty.write_text("config: {}\n")

    def program() -> None:
        MigInference("mig", eks_stack(pulumi.Output.from_input("x"), create=True))

    rendering = run_program("test", empty, program=program)
    assert rendering.error is not None
    assert rendering.error.startswith("mig-inference:cluster.name: must be a plain string")
    assert not rendering.resources


def test_only_the_stack_program_aliases_its_children_to_their_top_level_place(
    tmp_path: Path,
) -> None:
    """The program's children keep 0.1's names and, through an alias each, its resources; a
    MigInference in another program claims no top-level resource of that program."""
    program = stack_rendering("gke-h100")
    direct = [o for o in program.options.values() if o.parent_type == INDEX + "MigInference"]
    assert direct and all(o.aliases_to_stack_root == 1 for o in direct)
    nested = [o for o in program.options.values() if o.parent_type != INDEX + "MigInference"]
    assert all(o.aliases_to_stack_root == 0 for o in nested)
    elsewhere = construct(tmp_path, "gpus", "MigInference", stack_inputs("gke-h100"))
    assert all(o.aliases_to_stack_root == 0 for o in elsewhere.options.values())


def test_two_instances_in_one_program_do_not_collide(tmp_path: Path) -> None:
    empty = tmp_path / "Pulumi.test.yaml"
    empty.write_text("config: {}\n")

    def program() -> None:
        MigInference("blue", eks_stack("cluster-blue"))
        MigInference("green", eks_stack("cluster-green"))

    rendering = run_program("test", empty, program=program)
    assert rendering.error is None, rendering.error
    names = [(r.type, r.name) for r in rendering.resources]
    assert len(names) == len(set(names))
    groups = rendering.of_type("aws:eks/nodeGroup:NodeGroup")
    assert sorted(g.inputs["clusterName"] for g in groups) == ["cluster-blue", "cluster-green"]


def test_outputs_where_the_planner_needs_values_are_named(tmp_path: Path) -> None:
    inputs = stack_inputs("gke-h100")
    errors: list[str] = []

    def program() -> None:
        inputs["pools"][0]["mig"] = pulumi.Output.from_input("all-balanced")
        try:
            provider().construct("m", INDEX + "MigInference", inputs, pulumi.ResourceOptions())
        except ComponentInitError as error:
            errors.append(str(error))
        try:
            MigInference("n", {**eks_stack("c"), "secrets": pulumi.Output.secret({"hf": "x"})})  # type: ignore[typeddict-item]
        except pulumi.RunError as error:
            errors.append(str(error))

    empty = tmp_path / "Pulumi.test.yaml"
    empty.write_text("config: {}\n")
    rendering = run_program("test", empty, program=program)
    assert len(errors) == 2, errors
    assert "mig-inference:pools[0].mig: is an Output of another resource" in errors[0]
    assert errors[1].startswith("mig-inference:secrets: must be a map of secret names to values")
    assert not rendering.resources


def test_outputs_in_nested_inputs_reach_the_resources_through_the_provider(tmp_path: Path) -> None:
    def inputs() -> dict[str, Any]:
        given = stack_inputs("eks-p4d")
        given["cluster"]["name"] = pulumi.Output.from_input("made-elsewhere")
        given["secrets"] = {k: pulumi.Output.secret(v) for k, v in given["secrets"].items()}
        return given

    rendering = construct(tmp_path, "gpus", "MigInference", inputs)
    groups = rendering.of_type("aws:eks/nodeGroup:NodeGroup")
    assert groups and {g.inputs["clusterName"] for g in groups} == {"made-elsewhere"}


@pytest.mark.parametrize("stack", STACKS)
def test_typed_args_round_trip_to_the_stack_file(stack: str) -> None:
    """The program's stack values, through typed args and back: nothing lost or renamed (and
    the plan the program checked first is the one the component reuses)."""
    from mig_inference.components.stack_args import stack_args, stack_values_of

    values = {k: v for k, v in stack_inputs(stack).items() if k in TOP_KEYS}
    assert stack_values_of(stack_args(values)) == values


def test_stack_file_keys_are_not_read_as_python_field_names(tmp_path: Path) -> None:
    """`machine_type` in a stack file is an unknown key there, as `mig-inference plan` says."""
    config = yaml.safe_load(Path(stack_path("gke-h100")).read_text())["config"]
    values = {k.split(":", 1)[1]: v for k, v in config.items() if k.split(":", 1)[1] in TOP_KEYS}
    values["pools"][0]["machine_type"] = values["pools"][0].pop("machineType")
    rendering = render_config(tmp_path, values, hfToken="hf")
    assert rendering.error is not None and "pools[0]" in rendering.error
    assert "machine_type" in rendering.error and not rendering.resources
