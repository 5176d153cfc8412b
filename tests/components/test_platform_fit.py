"""MigInference in a platform team's own program: the providers it is given, the tags it puts on
every cloud resource, Outputs of the team's resources where the planner needs no value."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pulumi
import pytest
import yaml

from mig_inference.components.stack import MigInference
from mig_inference.components.stack_args import Stack, stack_args
from mig_inference.render import run_program
from mig_inference.rendering import Rendering
from mig_inference.spec import secret_references
from mig_inference.spec.cloud_tags import UNPROTECTED_TAG
from mig_inference.spec.files import stack_path

PACKAGE = {"gke": "gcp", "eks": "aws", "oke": "oci"}
CLOUD_STACKS = sorted(
    name
    for path in Path("stacks").glob("Pulumi.*.yaml")
    if (name := path.name.split(".")[1])
    and yaml.safe_load(path.read_text())["config"]["mig-inference:cloud"] in PACKAGE
)


def stack_values(stack: str) -> dict[str, Any]:
    """A shipped stack file's values without its (placeholder) secrets."""
    config = yaml.safe_load(Path(stack_path(stack)).read_text())["config"]
    return {
        key.split(":", 1)[1]: value
        for key, value in config.items()
        if key.startswith("mig-inference:") and not (isinstance(value, dict) and "secure" in value)
    }


def typed(values: dict[str, Any], stack: str = "team") -> Stack:
    """The typed args a Python program writes for these stack-file values."""
    secrets = {name: pulumi.Output.secret(f"{name}-value") for name in secret_references(values)}
    return {**stack_args(values), "secrets": secrets, "stack_name": stack}  # type: ignore[typeddict-item]


def run(tmp_path: Path, program: Callable[[], None]) -> Rendering:
    empty = tmp_path / "Pulumi.test.yaml"
    empty.write_text("config: {}\n")
    rendering = run_program("test", empty, program=program)
    assert rendering.error is None, rendering.error
    return rendering


def team_provider(package: str) -> pulumi.ProviderResource:
    """The team's own provider, configured as a platform repository configures it."""
    if package == "aws":
        import pulumi_aws as aws

        return aws.Provider(
            "team-aws",
            region="us-east-1",
            assume_roles=[
                aws.ProviderAssumeRoleArgs(role_arn="arn:aws:iam::123456789012:role/deploy")
            ],
            default_tags=aws.ProviderDefaultTagsArgs(tags={"cost-center": "ml"}),
        )
    if package == "gcp":
        import pulumi_gcp as gcp

        return gcp.Provider(
            "team-gcp", project="team-project", default_labels={"cost-center": "ml"}
        )
    import pulumi_oci as oci

    return oci.Provider("team-oci", region="us-ashburn-1")


def cloud_of(stack: str) -> str:
    return str(stack_values(stack)["cloud"])


@pytest.mark.parametrize("how", ["providers-list", "providers-map", "provider", "parent"])
@pytest.mark.parametrize("stack", CLOUD_STACKS)
def test_the_team_s_cloud_provider_manages_every_cloud_resource(
    tmp_path: Path, stack: str, how: str
) -> None:
    package = PACKAGE[cloud_of(stack)]

    def program() -> None:
        given = team_provider(package)
        args = typed(stack_values(stack))
        if how == "providers-list":
            MigInference("gpus", args, pulumi.ResourceOptions(providers=[given]))
        elif how == "providers-map":
            MigInference("gpus", args, pulumi.ResourceOptions(providers={package: given}))
        elif how == "provider":
            MigInference("gpus", args, pulumi.ResourceOptions(provider=given))
        else:
            platform = pulumi.ComponentResource(
                "team:index:Platform", "platform", None, pulumi.ResourceOptions(providers=[given])
            )
            MigInference("gpus", args, pulumi.ResourceOptions(parent=platform))

    rendering = run(tmp_path, program)
    made_providers = [
        r.name for r in rendering.resources if r.type == f"pulumi:providers:{package}"
    ]
    assert made_providers == [f"team-{package}"], made_providers
    cloud_resources = [r for r in rendering.resources if r.type.startswith(f"{package}:")]
    assert cloud_resources or rendering.calls
    for resource in cloud_resources:
        assert f"::team-{package}::" in resource.provider, (resource.type, resource.name)
    for (token, _args), provider in zip(rendering.calls, rendering.call_providers, strict=True):
        if token.startswith(f"{package}:"):
            assert f"::team-{package}::" in provider, token


@pytest.mark.parametrize("stack", ["eks-p4d", "gke-h100", "oke-h100"])
def test_without_a_provider_the_component_configures_one_from_the_stack(
    tmp_path: Path, stack: str
) -> None:
    package = PACKAGE[cloud_of(stack)]

    def program() -> None:
        MigInference("gpus", typed(stack_values(stack)))

    rendering = run(tmp_path, program)
    [made] = [r for r in rendering.resources if r.type == f"pulumi:providers:{package}"]
    assert made.name == f"gpus-{package}"
    for resource in rendering.resources:
        if resource.type.startswith(f"{package}:"):
            assert f"::gpus-{package}::" in resource.provider, (resource.type, resource.name)


def test_the_team_s_kubernetes_provider_is_used_for_every_kubernetes_object(
    tmp_path: Path,
) -> None:
    import pulumi_kubernetes as k8s

    def program() -> None:
        cluster = k8s.Provider("team-k8s", kubeconfig=pulumi.Output.secret("apiVersion: v1"))
        MigInference(
            "gpus", typed(stack_values("gke-h100")), pulumi.ResourceOptions(providers=[cluster])
        )

    rendering = run(tmp_path, program)
    made = [r.name for r in rendering.resources if r.type == "pulumi:providers:kubernetes"]
    assert made == ["team-k8s"]
    for resource in rendering.resources:
        if resource.type.startswith("kubernetes:"):
            assert "::team-k8s::" in resource.provider, (resource.type, resource.name)


NOT_TAGGABLE = {
    "aws:iam/rolePolicyAttachment:RolePolicyAttachment": "an attachment, not a resource of its own",
    "aws:iam/rolePolicy:RolePolicy": "an inline policy of its role",
    "aws:autoscaling/tag:Tag": "it is a tag (of the node group's Auto Scaling group)",
    "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock": "a setting of its bucket",
    "gcp:compute/router:Router": "Cloud Routers take no labels",
    "gcp:compute/routerNat:RouterNat": "a setting of its router",
    "gcp:storage/bucketIAMMember:BucketIAMMember": "an IAM binding",
    "gcp:serviceaccount/account:Account": "service accounts take no labels",
    "gcp:projects/iAMMember:IAMMember": "an IAM binding",
    "gcp:projects/service:Service": "an API turned on in the project, which takes no labels",
    "oci:ContainerEngine/addon:Addon": "OKE add-ons take no tags",
}
"""Cloud resources that take no tags or labels, and why."""
TEAM_TAGS = {"cost-center": "ml", "team": "platform"}
OKE_DEFINED = {"Operations.CostCenter": "42"}


def tagged_variants() -> list[tuple[str, dict[str, Any]]]:
    """Stacks that between them create every kind of cloud resource, with the team's tags."""
    gke_cache = stack_values("gke-h100-cache")
    gke_cache["modelCache"] = {"storage": "gcs-fuse"}  # the stack makes its bucket
    eks = stack_values("eks-p5-from-zero")
    eks["cluster"] = {**eks["cluster"], "create": True, "vpcId": "vpc-0000000a",
                      "version": "1.33", "publicAccessCidrs": ["203.0.113.0/24"]}  # fmt: skip
    eks["modelCache"] = {"storage": "s3-mountpoint"}
    oke = stack_values("oke-h100")
    oke["cluster"] = {**oke["cluster"], "create": True, "vcnId": "ocid1.vcn.oc1..v",
                      "endpointSubnetId": "ocid1.subnet.oc1..api",
                      "podSubnetIds": ["ocid1.subnet.oc1..pods"], "kubernetesVersion": "v1.34.2",
                      "systemImageId": "ocid1.image.oc1..sys"}  # fmt: skip
    oke["pools"] = [{**oke["pools"][0], "nodes": {"min": 1, "max": 2}}]
    return [
        ("gke-created", {**stack_values("ephemeral-gke"), "labels": TEAM_TAGS}),
        ("gke-cache", {**gke_cache, "labels": TEAM_TAGS}),
        ("eks-created", {**eks, "tags": TEAM_TAGS}),
        ("oke-created", {**oke, "tags": TEAM_TAGS, "definedTags": OKE_DEFINED}),
    ]


EXPECTED_TYPES = {
    "gke-created": {"gcp:container/cluster:Cluster", "gcp:container/nodePool:NodePool",
                    "gcp:compute/router:Router"},
    "gke-cache": {"gcp:storage/bucket:Bucket", "gcp:container/nodePool:NodePool"},
    "eks-created": {"aws:eks/cluster:Cluster", "aws:eks/nodeGroup:NodeGroup", "aws:iam/role:Role",
                    "aws:ec2/launchTemplate:LaunchTemplate", "aws:eks/addon:Addon",
                    "aws:eks/podIdentityAssociation:PodIdentityAssociation",
                    "aws:s3/bucket:Bucket"},
    "oke-created": {"oci:ContainerEngine/cluster:Cluster", "oci:ContainerEngine/nodePool:NodePool",
                    "oci:ContainerEngine/addon:Addon"},
}  # fmt: skip
"""The kinds each variant must create, so the check below cannot pass by creating fewer."""


def _carried(resource_type: str, inputs: dict[str, Any]) -> list[dict[str, str]]:
    """Every tag or label map a resource's inputs set for the cloud resources it makes."""
    found = []
    # `labels` are Kubernetes node labels on node pools and groups; a bucket's are its own.
    keys = ("labels",) if resource_type == "gcp:storage/bucket:Bucket" else ()
    for key in ("tags", "freeformTags", "resourceLabels", *keys):
        if key in inputs:
            found.append(inputs[key])
    node_config = inputs.get("nodeConfig") or {}
    if "resourceLabels" in node_config:
        found.append(node_config["resourceLabels"])
    details = inputs.get("nodeConfigDetails") or {}
    if "freeformTags" in details:
        found.append(details["freeformTags"])
    for spec in inputs.get("tagSpecifications") or []:
        found.append(spec["tags"])
    return found


@pytest.mark.parametrize("variant", range(len(tagged_variants())))
def test_every_cloud_resource_carries_the_team_s_tags(tmp_path: Path, variant: int) -> None:
    name, values = tagged_variants()[variant]

    def program() -> None:
        MigInference("gpus", typed(values, name))

    rendering = run(tmp_path, program)
    cloud = [r for r in rendering.resources if r.is_cloud and not r.type.startswith("pulumi:")]
    assert EXPECTED_TYPES[name] <= {r.type for r in cloud}
    for resource in cloud:
        if resource.type in NOT_TAGGABLE:
            continue
        carried = _carried(resource.type, resource.inputs)
        assert carried, f"{resource.type} {resource.name} carries no tags"
        for tags in carried:
            # A GPU pool of a stack with protection off also carries the policy pack's opt-out.
            own = {k: v for k, v in tags.items() if (k, v) != UNPROTECTED_TAG}
            assert own == TEAM_TAGS, (resource.type, resource.name, tags)
        if name.startswith("oke"):
            assert resource.inputs["definedTags"] == OKE_DEFINED, resource.type
    launch_templates = [r for r in cloud if r.type == "aws:ec2/launchTemplate:LaunchTemplate"]
    for template in launch_templates:
        kinds = {spec["resourceType"] for spec in template.inputs["tagSpecifications"]}
        assert kinds == {"instance", "volume", "network-interface"}


@pytest.mark.parametrize(
    ("cloud", "key", "value", "message"),
    [
        ("eks-p4d", "labels", TEAM_TAGS, "AWS and OCI call them tags"),
        ("gke-h100", "tags", TEAM_TAGS, "Google Cloud calls them labels"),
        ("gke-h100", "labels", {"Team": "x"}, "is not a Google Cloud label key"),
        ("eks-p4d", "tags", {"aws:team": "x"}, "not starting with 'aws:'"),
        ("eks-p4d", "tags", {"team": 3}, "is not a string"),
        ("oke-h100", "definedTags", {"CostCenter": "x"}, "is not an OCI defined tag"),
        ("eks-p4d", "definedTags", {"Ops.Cost": "x"}, "defined tags are OCI's"),
    ],
)
def test_tags_the_cloud_would_refuse_are_refused_with_their_key(
    tmp_path: Path, cloud: str, key: str, value: Any, message: str
) -> None:
    stack = tmp_path / "Pulumi.t.yaml"
    config = yaml.safe_load(Path(stack_path(cloud)).read_text())
    config["config"][f"mig-inference:{key}"] = value
    stack.write_text(yaml.safe_dump(config))
    run_ = subprocess.run(
        [sys.executable, "-m", "mig", "plan", "--stack-file", str(stack), "--json"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert run_.returncode == 1, run_.stderr
    errors = json.loads(run_.stdout)["errors"]
    assert len(errors) == 1 and errors[0]["key"].startswith(f"mig-inference:{key}"), errors
    assert message in errors[0]["message"], errors


PLACEHOLDERS = ("from-another-resource", "fromanotherresource", "subnet-00000000", "vpc-00000000")


def _everywhere(value: Any) -> list[str]:
    if isinstance(value, dict):
        return [s for item in value.values() for s in _everywhere(item)]
    if isinstance(value, list):
        return [s for item in value for s in _everywhere(item)]
    return [value] if isinstance(value, str) else []


def one_program(cloud: str, whole_list: bool) -> Callable[[], None]:
    """The everyday program: the team's network and cluster, then GPU pools on them."""

    def program() -> None:
        if cloud == "eks":
            import pulumi_aws as aws

            vpc = aws.ec2.Vpc("team-vpc", cidr_block="10.0.0.0/16")
            subnets = [
                aws.ec2.Subnet(f"team-subnet-{z}", vpc_id=vpc.id, cidr_block=f"10.0.{i}.0/24")
                for i, z in enumerate("ab")
            ]
            values = stack_values("eks-p4d")
            cluster: dict[str, Any] = {
                "name": "gpu-cluster", "create": True, "region": "us-east-1",
                "vpc_id": vpc.id, "version": "1.33", "public_access_cidrs": ["203.0.113.0/24"],
                "subnet_ids": pulumi.Output.all(*[s.id for s in subnets]) if whole_list
                else [s.id for s in subnets],
            }  # fmt: skip
        elif cloud == "gke":
            import pulumi_gcp as gcp

            project = pulumi.Output.from_input("team-project-42")
            network = gcp.compute.Network("team-net", auto_create_subnetworks=False)
            subnetwork = gcp.compute.Subnetwork(
                "team-subnet", network=network.id, ip_cidr_range="10.1.0.0/20", region="us-central1"
            )
            values = stack_values("gke-h100")
            cluster = {
                "name": "gpu-cluster", "create": True, "location": "us-central1",
                "project": project, "network": network.id, "subnetwork": subnetwork.self_link,
                "authorized_networks": ["203.0.113.0/24"],
            }  # fmt: skip
        else:
            import pulumi_oci as oci

            compartment = pulumi.Output.from_input("ocid1.compartment.oc1..team")
            vcn = oci.core.Vcn("team-vcn", compartment_id=compartment, cidr_blocks=["10.2.0.0/16"])
            oci_subnets = [
                oci.core.Subnet(
                    f"team-{role}", compartment_id=compartment, vcn_id=vcn.id, cidr_block=cidr
                )
                for role, cidr in (("nodes", "10.2.0.0/20"), ("api", "10.2.16.0/28"))
            ]
            values = stack_values("oke-h100")
            cluster = {
                "name": "gpu-cluster", "create": True, "compartment_id": compartment,
                "vcn_id": vcn.id, "endpoint_subnet_id": oci_subnets[1].id,
                "subnet_ids": pulumi.Output.all(oci_subnets[0].id) if whole_list
                else [oci_subnets[0].id],
                "pod_subnet_ids": [oci_subnets[0].id], "kubernetes_version": "v1.34.2",
                "availability_domains": values["cluster"]["availabilityDomains"],
                "system_image_id": pulumi.Output.from_input("ocid1.image.oc1..team"),
            }  # fmt: skip
        args = typed(values)
        args["cluster"] = cluster  # type: ignore[typeddict-item]
        MigInference("gpus", args)

    return program


@pytest.mark.parametrize("whole_list", [False, True], ids=["items", "whole-list"])
@pytest.mark.parametrize("cloud", ["eks", "gke", "oke"])
def test_network_and_cluster_and_gpu_pools_in_one_program(
    tmp_path: Path, cloud: str, whole_list: bool
) -> None:
    rendering = run(tmp_path, one_program(cloud, whole_list))
    unseen = [line for line in rendering.logs if "the planner cannot see it change" in line]
    # EKS and OKE replace nodes when their subnets change: the plan says it cannot see that.
    assert len(unseen) == {"eks": 1, "gke": 0, "oke": 2}[cloud], rendering.logs
    strings = [s for r in rendering.resources for s in _everywhere(r.inputs)]
    strings += [s for _token, args in rendering.calls for s in _everywhere(args)]
    assert not [s for s in strings if any(p in s for p in PLACEHOLDERS)]
    inputs = {(r.type, r.name): r.inputs for r in rendering.resources}
    if cloud == "eks":
        groups = [r for r in rendering.resources if r.type == "aws:eks/nodeGroup:NodeGroup"]
        assert groups and all(
            g.inputs["subnetIds"] == ["team-subnet-a-id", "team-subnet-b-id"] for g in groups
        )
        [cluster] = [r for r in rendering.resources if r.type == "aws:eks/cluster:Cluster"]
        assert cluster.inputs["vpcConfig"]["subnetIds"] == ["team-subnet-a-id", "team-subnet-b-id"]
    elif cloud == "gke":
        gke = inputs[("gcp:container/cluster:Cluster", "gpus-gpu-cluster")]
        assert gke["network"] == "team-net-id"
        assert gke["workloadIdentityConfig"]["workloadPool"] == "team-project-42.svc.id.goog"
    else:
        [made] = [r for r in rendering.resources if r.type == "oci:ContainerEngine/cluster:Cluster"]
        assert made.inputs["vcnId"] == "team-vcn-id"
        assert made.inputs["compartmentId"] == "ocid1.compartment.oc1..team"
        pools = [
            r for r in rendering.resources if r.type == "oci:ContainerEngine/nodePool:NodePool"
        ]
        for pool in pools:
            placements = pool.inputs["nodeConfigDetails"]["placementConfigs"]
            assert {p["subnetId"] for p in placements} == {"team-nodes-id"}


def test_what_the_planner_decides_on_must_still_be_plain(tmp_path: Path) -> None:
    def program() -> None:
        values = stack_values("gke-h100")
        args = typed(values)
        args["cluster"]["location"] = pulumi.Output.from_input("us-central1")  # type: ignore[typeddict-item]
        MigInference("gpus", args)

    empty = tmp_path / "Pulumi.test.yaml"
    empty.write_text("config: {}\n")
    rendering = run_program("test", empty, program=program)
    assert rendering.error is not None and not rendering.resources
    assert rendering.error.startswith("mig-inference:cluster.location: is an Output")
    assert "cluster.subnetIds" in rendering.error


# --- node identity --------------------------------------------------------------------------------


def render_values(tmp_path: Path, values: dict[str, Any]) -> Rendering:
    def program() -> None:
        MigInference("gpus", typed(values))

    return run(tmp_path, program)


def gpu_pools_of(rendering: Rendering, resource_type: str) -> list[Any]:
    return [r for r in rendering.of_type(resource_type) if "-system" not in r.name]


@pytest.mark.parametrize("stack", ["gke-h100", "gke-h100-cache", "ephemeral-gke"])
def test_gke_gpu_nodes_run_as_a_dedicated_account_with_workload_identity(
    tmp_path: Path, stack: str
) -> None:
    from mig_inference.components.clouds.gke import CLOUD_PLATFORM_SCOPE, NODE_ROLES

    rendering = render_values(tmp_path, stack_values(stack))
    [account] = rendering.of_type("gcp:serviceaccount/account:Account")
    grants = rendering.of_type("gcp:projects/iAMMember:IAMMember")
    email = f"{account.inputs['accountId']}@{account.inputs['project']}.iam.gserviceaccount.com"
    assert sorted(g.inputs["role"] for g in grants) == sorted(NODE_ROLES)
    assert {g.inputs["member"] for g in grants} == {f"serviceAccount:{email}"}
    pools = gpu_pools_of(rendering, "gcp:container/nodePool:NodePool")
    assert pools
    for pool in pools:
        config = pool.inputs["nodeConfig"]
        assert config["serviceAccount"] == email
        assert config["workloadMetadataConfig"] == {"mode": "GKE_METADATA"}
        assert config["oauthScopes"] == [CLOUD_PLATFORM_SCOPE]
        assert config["shieldedInstanceConfig"]["enableSecureBoot"] is True


def test_gke_takes_the_team_s_node_account_or_keeps_the_old_nodes_when_told(
    tmp_path: Path,
) -> None:
    from mig_inference.plan import plan_stack
    from mig_inference.spec import parse_stack
    from mig_inference.versions import GPU_OPERATOR_VERSION

    values = stack_values("gke-h100")
    team = "gpu-nodes@my-gcp-project.iam.gserviceaccount.com"
    values["cluster"] = {**values["cluster"], "nodeServiceAccount": team}
    rendering = render_values(tmp_path, values)
    assert not rendering.of_type("gcp:serviceaccount/account:Account")
    [pool] = gpu_pools_of(rendering, "gcp:container/nodePool:NodePool")
    assert pool.inputs["nodeConfig"]["serviceAccount"] == team

    def inputs(cluster: dict[str, Any]) -> dict[str, str]:
        given = {**stack_values("gke-h100"), "cluster": cluster}
        spec = parse_stack(
            "gke-h100",
            given,
            secret_keys=frozenset(secret_references(given)),
            pinned_operator_version=GPU_OPERATOR_VERSION,
        )
        return dict(plan_stack(spec).pools[0].replacement_inputs)

    legacy = {**values["cluster"], "nodeServiceAccount": "default", "workloadIdentity": False}
    assert "cluster.nodeIdentity" not in inputs(legacy)
    assert "cluster.nodeIdentity" in inputs(stack_values("gke-h100")["cluster"])


def test_eks_gpu_nodes_keep_pods_off_the_node_role_and_honour_the_team_s_iam(
    tmp_path: Path,
) -> None:
    values = stack_values("eks-p5-from-zero")
    rendering = render_values(tmp_path, values)
    [template] = rendering.of_type("aws:ec2/launchTemplate:LaunchTemplate")
    metadata = template.inputs["metadataOptions"]
    assert metadata["httpTokens"] == "required" and metadata["httpPutResponseHopLimit"] == 1

    boundary = "arn:aws:iam::123456789012:policy/platform-boundary"
    role = "arn:aws:iam::123456789012:role/team-gpu-nodes"
    values["cluster"] = {**values["cluster"], "nodeRoleArn": role,
                         "permissionsBoundary": boundary, "imdsHopLimit": 2}  # fmt: skip
    rendering = render_values(tmp_path, values)
    groups = gpu_pools_of(rendering, "aws:eks/nodeGroup:NodeGroup")
    assert groups and {g.inputs["nodeRoleArn"] for g in groups} == {role}
    roles = rendering.of_type("aws:iam/role:Role")
    assert roles and all(r.inputs["permissionsBoundary"] == boundary for r in roles)
    assert not [r for r in roles if "ec2.amazonaws.com" in r.inputs["assumeRolePolicy"]]
    [template] = rendering.of_type("aws:ec2/launchTemplate:LaunchTemplate")
    assert template.inputs["metadataOptions"]["httpPutResponseHopLimit"] == 2


# --- outputs --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("stack", "keys"),
    [
        ("gke-h100", {"name", "id", "serviceAccount"}),
        ("eks-p5-from-zero", {"name", "arn", "autoscalingGroups", "nodeRoleArn"}),
        ("oke-h100", {"name", "id"}),
        ("existing", {"nodes"}),
    ],
)
def test_what_the_cloud_made_is_an_output_per_pool(
    tmp_path: Path, stack: str, keys: set[str]
) -> None:
    def program() -> None:
        gpus = MigInference("gpus", typed(stack_values(stack)))
        pulumi.export("cloudPools", gpus.cloud_pools)
        pulumi.export("kubeconfig", gpus.kubeconfig)

    rendering = run(tmp_path, program)
    pools = rendering.outputs["cloudPools"]
    assert set(pools) == {p["name"] for p in stack_values(stack)["pools"]}
    for made in pools.values():
        assert set(made) == keys, made
        assert all(value not in (None, "") for value in made.values()), made
    if stack == "gke-h100":
        [pool] = pools.values()
        assert pool["serviceAccount"].startswith("mig-nodes-")


# --- node hooks -----------------------------------------------------------------------------------


def _plan_errors(tmp_path: Path, stack: str, pool_keys: dict[str, Any]) -> dict[str, str]:
    config = yaml.safe_load(Path(stack_path(stack)).read_text())
    config["config"]["mig-inference:pools"][0].update(pool_keys)
    path = tmp_path / "Pulumi.t.yaml"
    path.write_text(yaml.safe_dump(config))
    run_ = subprocess.run(
        [sys.executable, "-m", "mig", "plan", "--stack-file", str(path), "--json"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    return {e["key"]: e["message"] for e in json.loads(run_.stdout).get("errors", [])}


def test_gke_boot_disk_type_among_those_the_machine_boots_from(tmp_path: Path) -> None:
    values = stack_values("gke-h100")
    values["pools"][0]["bootDiskType"] = "pd-ssd"
    [pool] = gpu_pools_of(render_values(tmp_path, values), "gcp:container/nodePool:NodePool")
    assert pool.inputs["nodeConfig"]["diskType"] == "pd-ssd"
    errors = _plan_errors(tmp_path, "gke-h100", {"machineType": "a4-highgpu-8g",
                                                 "gpu": "B200-180GB", "mig": "all-1g.23gb",
                                                 "bootDiskType": "pd-ssd"})  # fmt: skip
    assert "boots only from hyperdisk-balanced" in errors.get(
        "mig-inference:pools[0].bootDiskType", ""
    ), errors
    errors = _plan_errors(tmp_path, "eks-p4d", {"bootDiskType": "pd-ssd"})
    assert list(errors) == ["mig-inference:pools[0].bootDiskType"], errors


def test_eks_user_data_runs_after_the_project_s_parts(tmp_path: Path) -> None:
    import base64
    import email

    values = stack_values("eks-p4d")
    script = "#!/bin/bash\necho team-hook > /etc/team-hook\n"
    values["pools"][0]["userData"] = script
    rendering = render_values(tmp_path, values)
    [template] = rendering.of_type("aws:ec2/launchTemplate:LaunchTemplate")
    message = email.message_from_bytes(base64.b64decode(template.inputs["userData"]))
    parts = [p for p in message.walk() if not p.is_multipart()]
    assert [p.get_content_type() for p in parts] == [
        "application/node.eks.aws",
        "text/cloud-config",
        "text/x-shellscript",  # MIG mode at boot (tests/clouds/test_mig_mode_at_boot.py)
        "text/x-shellscript",
    ]
    payload = parts[-1].get_payload(decode=True)
    assert isinstance(payload, bytes)
    assert payload.decode().rstrip("\n") == script.rstrip("\n")
    errors = _plan_errors(tmp_path, "eks-p4d", {"userData": "echo no shebang"})
    assert "must be a shell script" in errors["mig-inference:pools[0].userData"]
    errors = _plan_errors(tmp_path, "eks-p4d", {"userData": "#!/bin/sh\n" + "x" * 9000})
    assert "EC2's 16,384 bytes" in errors["mig-inference:pools[0].userData"]
    errors = _plan_errors(tmp_path, "gke-h100", {"userData": "#!/bin/sh\n"})
    assert list(errors) == ["mig-inference:pools[0].userData"], errors


# --- help() ---------------------------------------------------------------------------------------


def test_help_shows_every_field_of_the_typed_args() -> None:
    import pydoc
    import typing

    import mig_inference.components.stack_args as typed_args
    from mig_inference.components.field_docs import field_docstrings

    classes = [
        value for value in vars(typed_args).values()
        if typing.is_typeddict(value) and value.__module__ == typed_args.__name__
    ]  # fmt: skip
    assert len(classes) >= 15
    for cls in classes:
        shown = pydoc.render_doc(cls, renderer=pydoc.plaintext)  # type: ignore[attr-defined]
        docs = field_docstrings(cls)
        assert set(docs) == set(cls.__annotations__), cls.__name__
        for name, doc in docs.items():
            assert f"{name}: {doc.splitlines()[0]}" in shown, (cls.__name__, name)


def test_the_schema_keeps_one_description_per_field() -> None:
    from mig_inference.components.provider import MigInferenceProvider

    assert "Fields:" not in str(MigInferenceProvider().schema)
