"""The model cache: its stack key, its plan, the objects it renders per cloud (validated against
the Kubernetes schema), the replicas that read it instead of the hub, and the populate Job."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from mig_inference.errors import MigError, MigErrors
from mig_inference.plan import StackPlan, plan_stack
from mig_inference.plan.model_cache import CACHE_ROOT, fill_job_name, fsx_lustre_size
from mig_inference.render import run_program
from mig_inference.rendering import Rendering
from mig_inference.spec import Engine, parse_stack
from mig_inference.spec.files import load_stack, stack_path
from mig_inference.versions import GPU_OPERATOR_VERSION
from tests.mocked import stack_rendering
from tests.render.test_stacks import CUSTOM_RESOURCE_GROUPS, schema_version

DEPLOYMENT = "kubernetes:apps/v1:Deployment"
JOB = "kubernetes:batch/v1:Job"
PVC = "kubernetes:core/v1:PersistentVolumeClaim"
PV = "kubernetes:core/v1:PersistentVolume"
STORAGE_CLASS = "kubernetes:storage.k8s.io/v1:StorageClass"
POLICY = "kubernetes:networking.k8s.io/v1:NetworkPolicy"
STACKS = sorted(
    p.name[len("Pulumi.") : -len(".yaml")] for p in Path("stacks").glob("Pulumi.*.yaml")
)


def _values(stack: str) -> tuple[dict[str, Any], frozenset[str]]:
    """A shipped stack's values and secret keys, as the program gets them."""
    raw = yaml.safe_load(Path(stack_path(stack)).read_text())["config"]
    values = {k.split(":", 1)[1]: v for k, v in raw.items()}
    secrets = frozenset(k for k, v in values.items() if isinstance(v, dict) and "secure" in v)
    return {k: v for k, v in values.items() if k not in secrets}, secrets


def _plan(
    values: dict[str, Any], secrets: frozenset[str] = frozenset(), stack: str = "t"
) -> StackPlan:
    spec = parse_stack(
        stack, values, secret_keys=secrets, pinned_operator_version=GPU_OPERATOR_VERSION
    )
    return plan_stack(spec)


def _with_cache(stack: str, cache: dict[str, Any]) -> StackPlan:
    values, secrets = _values(stack)
    return _plan({**values, "modelCache": cache}, secrets, stack)


def _render(tmp_path: Path, stack: str, cache: dict[str, Any] | None) -> Rendering:
    document = yaml.safe_load(Path(stack_path(stack)).read_text())
    if cache is not None:
        document["config"]["mig-inference:modelCache"] = cache
    path = tmp_path / f"Pulumi.{stack}.yaml"
    path.write_text(yaml.safe_dump(document))
    rendering = run_program(stack, path)
    assert rendering.error is None, rendering.error
    for obj in rendering.kubernetes_objects():
        if obj["apiVersion"].split("/")[0] not in CUSTOM_RESOURCE_GROUPS:
            kubernetes_validate.validate(obj, schema_version(load_stack(stack)), strict=True)
    return rendering


def _errors(values: dict[str, Any]) -> list[str]:
    with pytest.raises(MigErrors) as caught:
        _plan(values)
    return [str(e) for e in caught.value.errors]


# -- the stack key ---------------------------------------------------------------------------


def test_each_cloud_offers_its_storage_and_refuses_the_others() -> None:
    values, _ = _values("gke-h100")
    values.pop("services")
    assert _plan({**values, "modelCache": {}}).spec.model_cache.storage.value == "hyperdisk-ml"  # type: ignore[union-attr]
    [error] = _errors({**values, "modelCache": {"storage": "fsx-lustre"}})
    assert error == (
        "mig-inference:modelCache.storage: 'fsx-lustre' is not a model cache storage on gke; "
        "allowed: hyperdisk-ml, gcs-fuse, storage-class"
    )


def test_existing_clusters_name_their_storage_class() -> None:
    values, _ = _values("existing")
    values.pop("services")
    [error] = _errors({**values, "modelCache": {}})
    assert error.startswith("mig-inference:modelCache.storageClass: is required on an existing")
    plan = _plan({**values, "modelCache": {"storageClass": "nfs-rwx"}})
    assert plan.spec.model_cache is not None
    assert plan.spec.model_cache.storage.value == "storage-class"


def test_keys_of_another_storage_and_bad_values_are_refused_at_their_key() -> None:
    values, _ = _values("eks-p4d")
    values.pop("services")
    errors = _errors(
        {
            **values,
            "modelCache": {
                "storage": "fsx-lustre",
                "bucket": "models",
                "throughputMiBps": 300,
                "securityGroupIds": ["sg-nope"],
            },
        }
    )
    assert errors == [
        "mig-inference:modelCache.bucket: applies to storage gcs-fuse, s3-mountpoint, not "
        "fsx-lustre",
        "mig-inference:modelCache.throughputMiBps: FSx for Lustre takes a per-unit throughput "
        "(MB/s per TiB) of 125, 250, 500, 1000; got 300",
        "mig-inference:modelCache.securityGroupIds[0]: 'sg-nope' is not an EC2 security group ID "
        "(sg- and 8 or 17 hexadecimal digits), like sg-0a1b2c3d4e5f60718",
    ]
    assert _errors({**values, "modelCache": {"storage": "fsx-lustre"}}) == [
        "mig-inference:modelCache.securityGroupIds: is required with fsx-lustre: the file "
        "system's security groups, which must let the nodes reach Lustre (TCP 988)"
    ]


def test_hyperdisk_ml_throughput_is_held_to_its_documented_range() -> None:
    values, _ = _values("gke-h100")
    values.pop("services")
    [error] = _errors({**values, "modelCache": {"throughputMiBps": 100}})
    assert error == (
        "mig-inference:modelCache.throughputMiBps: must be >= 400 (Hyperdisk ML: at least 400 "
        "MiB/s per volume), got 100"
    )


def test_a_revision_is_a_hub_revision() -> None:
    values, secrets = _values("gke-h100")
    values["services"][0]["revision"] = "../etc"
    with pytest.raises(MigErrors) as caught:
        _plan(values, secrets)
    assert str(caught.value.errors[0]).startswith("mig-inference:services[0].revision: '../etc'")


def test_a_cache_too_small_for_its_models_is_refused() -> None:
    with pytest.raises(MigError) as caught:
        _with_cache("gke-h100", {"sizeGiB": 10})
    assert str(caught.value) == (
        "mig-inference:modelCache.sizeGiB: 10 GiB does not hold the cached models: they need 28 "
        "GiB (1 model revision(s), 24.5 GB with 20% headroom)"
    )


def test_fsx_for_lustre_is_sized_in_the_capacities_fsx_offers() -> None:
    """PERSISTENT_2 SSD: 1,200 or 2,400 GiB, then steps of 2,400 (Amazon FSx API Reference,
    CreateFileSystem StorageCapacity): never 3,600."""
    assert [fsx_lustre_size(n) for n in (4, 1200, 1201, 2400, 2401, 4800, 4801)] == [
        1200, 1200, 2400, 2400, 4800, 4800, 7200,
    ]  # fmt: skip
    assert fsx_lustre_size(2401, "SCRATCH_1") == 6000
    fsx = {"storage": "fsx-lustre", "securityGroupIds": ["sg-0a1b2c3d"]}
    values, secrets = _values("eks-p4d")
    big = {**values["services"][0], "weightsGiB": 1001}  # with headroom, 1,202 GiB
    plan = _plan({**values, "services": [big], "modelCache": fsx}, secrets)
    assert plan.model_cache is not None and plan.model_cache.size_gib == 2400
    assert _with_cache("eks-p4d", {**fsx, "sizeGiB": 4800}).model_cache.size_gib == 4800  # type: ignore[union-attr]
    with pytest.raises(MigError) as caught:
        _with_cache("eks-p4d", {**fsx, "sizeGiB": 3600})
    assert str(caught.value) == (
        "mig-inference:modelCache.sizeGiB: FSx for Lustre (PERSISTENT_2) takes 1,200 or 2,400 "
        "GiB, then steps of 2,400 GiB, not 3,600 (Amazon FSx API Reference, CreateFileSystem "
        "StorageCapacity); the next size up is 4,800"
    )


def test_hyperdisk_ml_pools_live_in_one_zone() -> None:
    values, secrets = _values("gke-h100")
    values["pools"][0]["zones"] = ["us-central1-b", "us-central1-c"]
    values["pools"][0]["nodes"] = 2
    with pytest.raises(MigError) as caught:
        _plan({**values, "modelCache": {}}, secrets)
    assert str(caught.value).startswith(
        "mig-inference:modelCache.storage: hyperdisk-ml volumes live in one zone"
    )
    plan = _plan({**values, "modelCache": {"storage": "gcs-fuse"}}, secrets)
    assert plan.model_cache is not None and plan.model_cache.zone is None


# -- the plan ----------------------------------------------------------------------------------


def test_one_model_revision_is_one_entry_and_one_job() -> None:
    plan = _with_cache("gke-h100", {})
    cache = plan.model_cache
    assert cache is not None
    [model] = cache.models
    assert (model.model, model.revision) == ("mistralai/Mistral-Nemo-Instruct-2407", "main")
    assert model.mount_path == f"{CACHE_ROOT}/mistralai/Mistral-Nemo-Instruct-2407/main"
    assert cache.size_gib == 28  # 22.8 GiB x 1.2, rounded up
    # A new revision is a new Job (and a new volume on Hyperdisk ML).
    values, secrets = _values("gke-h100")
    values["services"][0]["revision"] = "0123456789abcdef0123456789abcdef01234567"
    moved = _plan({**values, "modelCache": {}}, secrets).model_cache
    assert moved is not None
    assert fill_job_name(moved, moved.models[0]) != fill_job_name(cache, model)
    assert moved.models[0].key != model.key


def test_engines_that_load_their_own_way_stay_on_their_source() -> None:
    values, secrets = _values("existing")
    values["services"].append(
        {"name": "triton", "engine": "triton", "model": "s3://models/repo", "profile": "1g.10gb",
         "replicas": 1}
    )  # fmt: skip
    plan = _plan({**values, "modelCache": {"storageClass": "nfs-rwx"}}, secrets)
    assert plan.model_cache is not None
    assert "triton" in plan.model_cache.uncached
    assert any("service triton: not cached" in w for w in plan.warnings)


# -- the objects, per cloud ----------------------------------------------------------------


def _assert_reads_the_cache_only(deployment: dict[str, Any], plan: StackPlan) -> None:
    """A replica that reads the cache has the hub switched off, no token, the weights' path
    (or bucket) as its model and the cache mounted read-only."""
    cache = plan.model_cache
    assert cache is not None
    name = deployment["metadata"]["name"]
    service = next(s for s in plan.services if s.name == name)
    pod = deployment["spec"]["template"]["spec"]
    [container] = pod["containers"]
    env = {e["name"]: e for e in container.get("env", [])}
    assert env["HF_HUB_OFFLINE"]["value"] == "1"
    assert not {"HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"} & set(env)
    args = container["args"]
    flag = "--model" if service.spec.engine is Engine.VLLM else "--model-id"
    assert args[args.index(flag) + 1] == cache.weights_path(service)
    if not cache.streamed(service):
        [mount] = [m for m in container["volumeMounts"] if m["name"] == "model-cache"]
        assert mount == {"name": "model-cache", "mountPath": CACHE_ROOT, "readOnly": True}
        [volume] = [v for v in pod["volumes"] if v["name"] == "model-cache"]
        assert volume["persistentVolumeClaim"]["readOnly"] is True
    if service.spec.engine is Engine.VLLM:
        assert args[args.index("--served-model-name") + 1] == service.spec.model


CLOUD_CACHES = [
    ("gke-h100", {"storage": "hyperdisk-ml"}),
    ("gke-h100", {"storage": "gcs-fuse"}),
    ("gke-h100", {"storage": "gcs-fuse", "stream": True, "bucket": "team-models"}),
    ("eks-p4d", {"storage": "s3-mountpoint"}),
    ("eks-p4d", {"storage": "fsx-lustre", "securityGroupIds": ["sg-0a1b2c3d"]}),
    ("oke-h100", {"storage": "file-storage"}),
    ("existing", {"storageClass": "nfs-rwx"}),
]


@pytest.mark.parametrize(("stack", "cache"), CLOUD_CACHES)
def test_every_storage_renders_valid_objects_and_replicas_read_only_the_cache(
    tmp_path: Path, stack: str, cache: dict[str, Any]
) -> None:
    rendering = _render(tmp_path, stack, cache)
    plan = _with_cache(stack, cache)
    assert plan.model_cache is not None
    deployments = {d.inputs["metadata"]["name"]: d.inputs for d in rendering.of_type(DEPLOYMENT)}
    for model in plan.model_cache.models:
        for service in model.services:
            _assert_reads_the_cache_only(deployments[service], plan)
    jobs = [j for j in rendering.of_type(JOB) if j.name.endswith("-fill-job")]
    assert {j.inputs["metadata"]["name"] for j in jobs} == {
        fill_job_name(plan.model_cache, m) for m in plan.model_cache.models
    }


def test_hyperdisk_ml_fills_a_volume_then_clones_it_read_only(tmp_path: Path) -> None:
    rendering = _render(tmp_path, "gke-h100", {"storage": "hyperdisk-ml", "throughputMiBps": 4800})
    [storage_class] = rendering.of_type(STORAGE_CLASS)
    assert storage_class.inputs["provisioner"] == "pd.csi.storage.gke.io"
    assert storage_class.inputs["parameters"] == {
        "type": "hyperdisk-ml",
        "provisioned-throughput-on-create": "4800Mi",
    }
    assert storage_class.inputs["volumeBindingMode"] == "WaitForFirstConsumer"
    assert storage_class.inputs["allowedTopologies"] == [
        {"matchLabelExpressions": [{"key": "topology.gke.io/zone", "values": ["us-central1-c"]}]}
    ]
    claims = {c.name: c.inputs for c in rendering.of_type(PVC)}
    fill = claims["mistral-nemo-fill-volume"]
    readers = claims["mistral-nemo-fill-readers"]
    assert fill["spec"]["accessModes"] == ["ReadWriteOnce"]
    assert readers["spec"]["accessModes"] == ["ReadOnlyMany"]
    assert readers["spec"]["dataSource"] == {
        "kind": "PersistentVolumeClaim",
        "name": fill["metadata"]["name"],
    }
    # The clone is made once the Job is done with its source; the Deployment waits for both.
    options = rendering.options
    assert "mistral-nemo-fill-job" in options[(PVC, "mistral-nemo-fill-readers")].depends_on
    deployment = options[(DEPLOYMENT, "mistral-nemo")]
    assert "mistral-nemo-fill" in deployment.depends_on
    # The Job writes from a node of the pool (Hyperdisk ML attaches to GPU machine series),
    # without a GPU.
    [job] = [j.inputs for j in rendering.of_type(JOB) if j.name == "mistral-nemo-fill-job"]
    pod = job["spec"]["template"]["spec"]
    assert "nvidia.com" not in str(pod["containers"][0]["resources"])
    terms = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert {"key": "mig-inference.io/pool", "operator": "In", "values": ["h100-mig"]} in terms[
        "nodeSelectorTerms"
    ][0]["matchExpressions"]


def test_gcs_fuse_bucket_access_and_volume(tmp_path: Path) -> None:
    rendering = _render(tmp_path, "gke-h100", {"storage": "gcs-fuse"})
    plan = _with_cache("gke-h100", {"storage": "gcs-fuse"})
    assert plan.model_cache is not None and plan.model_cache.bucket_owned
    [bucket] = rendering.of_type("gcp:storage/bucket:Bucket")
    assert bucket.inputs["uniformBucketLevelAccess"] is True
    assert bucket.inputs["publicAccessPrevention"] == "enforced"
    assert bucket.inputs["location"] == "US-CENTRAL1"
    # Least privilege: the populate Job's ServiceAccount writes, the replicas' only reads.
    members = {
        m.inputs["member"].rsplit("/", 1)[-1]: m.inputs["role"]
        for m in rendering.of_type("gcp:storage/bucketIAMMember:BucketIAMMember")
    }
    assert members == {
        "model-cache": "roles/storage.objectUser",
        "model-cache-reader": "roles/storage.objectViewer",
    }
    [writer] = [
        m.inputs["member"]
        for m in rendering.of_type("gcp:storage/bucketIAMMember:BucketIAMMember")
        if m.inputs["role"] == "roles/storage.objectUser"
    ]
    assert writer == (
        "principal://iam.googleapis.com/projects/123456789012/locations/global/"
        "workloadIdentityPools/my-gcp-project.svc.id.goog/subject/ns/inference/sa/model-cache"
    )
    [job] = [j.inputs for j in rendering.of_type(JOB) if j.name.endswith("-fill-job")]
    assert job["spec"]["template"]["spec"]["serviceAccountName"] == "model-cache"
    [volume] = rendering.of_type(PV)
    spec = volume.inputs["spec"]
    assert spec["csi"] == {
        "driver": "gcsfuse.csi.storage.gke.io",
        "volumeHandle": bucket.inputs["name"],
    }
    assert "file-cache:enable-parallel-downloads:true" in spec["mountOptions"]
    deployment = next(d.inputs for d in rendering.of_type(DEPLOYMENT))
    template = deployment["spec"]["template"]
    assert template["metadata"]["annotations"]["gke-gcsfuse/volumes"] == "true"
    assert template["spec"]["serviceAccountName"] == "model-cache-reader"
    assert any(v["name"] == "gke-gcsfuse-cache" for v in template["spec"]["volumes"])


def test_vllm_streams_from_the_bucket_with_run_ai(tmp_path: Path) -> None:
    rendering = _render(
        tmp_path, "gke-h100", {"storage": "gcs-fuse", "stream": True, "bucket": "team-models"}
    )
    assert not rendering.of_type("gcp:storage/bucket:Bucket")  # the bucket is the user's
    container = next(d.inputs for d in rendering.of_type(DEPLOYMENT))["spec"]["template"]["spec"][
        "containers"
    ][0]
    args = container["args"]
    assert (
        args[args.index("--model") + 1]
        == "gs://team-models/mistralai/Mistral-Nemo-Instruct-2407/main"
    )
    assert args[args.index("--load-format") + 1] == "runai_streamer"


def test_s3_mountpoint_volume_for_a_non_root_pod(tmp_path: Path) -> None:
    rendering = _render(tmp_path, "eks-p4d", {})
    [volume] = rendering.of_type(PV)
    spec = volume.inputs["spec"]
    assert spec["csi"]["driver"] == "s3.csi.aws.com"
    assert spec["csi"]["volumeAttributes"]["bucketName"].startswith("mig-inference-models-")
    assert {"uid=10001", "gid=10001", "allow-other", "region eu-west-1"} <= set(
        spec["mountOptions"]
    )
    assert spec["claimRef"] == {"namespace": "inference", "name": "model-cache"}
    [block] = rendering.of_type("aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock")
    assert block.inputs["blockPublicPolicy"] is True


def test_fsx_lustre_and_file_storage_classes(tmp_path: Path) -> None:
    fsx = _render(
        tmp_path, "eks-p4d", {"storage": "fsx-lustre", "securityGroupIds": ["sg-0a1b2c3d"]}
    )
    [storage_class] = fsx.of_type(STORAGE_CLASS)
    assert storage_class.inputs["provisioner"] == "fsx.csi.aws.com"
    assert storage_class.inputs["parameters"] == {
        "subnetId": "subnet-0a1b2c3d4e5f60001",
        "securityGroupIds": "sg-0a1b2c3d",
        "deploymentType": "PERSISTENT_2",
        "perUnitStorageThroughput": "250",
    }
    [claim] = fsx.of_type(PVC)
    assert claim.inputs["spec"]["resources"]["requests"]["storage"] == "1200Gi"
    oke = _render(tmp_path, "oke-h100", {})
    [storage_class] = oke.of_type(STORAGE_CLASS)
    assert storage_class.inputs["provisioner"] == "fss.csi.oraclecloud.com"
    parameters = storage_class.inputs["parameters"]
    assert set(parameters) == {
        "availabilityDomain", "mountTargetSubnetOcid", "compartmentOcid", "encryptInTransit",
        "exportOptions",
    }  # fmt: skip


def _fill_pods(rendering: Rendering) -> list[dict[str, Any]]:
    pods = [
        j.inputs["spec"]["template"]["spec"]
        for j in rendering.of_type(JOB)
        if j.name.endswith("-fill-job")
    ]
    assert pods
    return pods


def _namespace_labels(rendering: Rendering, name: str) -> dict[str, str]:
    [namespace] = [
        n.inputs
        for n in rendering.of_type("kubernetes:core/v1:Namespace")
        if n.inputs["metadata"]["name"] == name
    ]
    labels: dict[str, str] = namespace["metadata"]["labels"]
    return labels


def test_the_non_root_fill_job_can_write_file_system_caches(tmp_path: Path) -> None:
    # OCI File Storage: the export squashes every client to root (Oracle's "Squash All"
    # solution), so the non-root Job writes a root-owned file system; nothing runs as root.
    oke = _render(tmp_path, "oke-h100", {})
    [storage_class] = oke.of_type(STORAGE_CLASS)
    [export] = json.loads(storage_class.inputs["parameters"]["exportOptions"])
    assert export == {
        "source": "0.0.0.0/0", "requirePrivilegedSourcePort": False, "access": "READ_WRITE",
        "identitySquash": "ALL", "anonymousUid": 0, "anonymousGid": 0,
    }  # fmt: skip
    assert not any("initContainers" in pod for pod in _fill_pods(oke))
    assert _namespace_labels(oke, "inference")["pod-security.kubernetes.io/enforce"] == (
        "restricted"
    )
    # FSx for Lustre: a root step with CAP_CHOWN alone gives the volume's root to the Job's
    # UID; its namespace enforces baseline (which admits it) and still reports restricted.
    fsx = _render(
        tmp_path, "eks-p4d", {"storage": "fsx-lustre", "securityGroupIds": ["sg-0a1b2c3d"]}
    )
    for pod in _fill_pods(fsx):
        [owner] = pod["initContainers"]
        assert owner["command"] == ["/bin/sh", "-c", "chown 10001:10001 /models"]
        assert owner["securityContext"] == {
            "runAsUser": 0, "runAsNonRoot": False, "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True, "capabilities": {"drop": ["ALL"], "add": ["CHOWN"]},
        }  # fmt: skip
        assert owner["volumeMounts"] == [{"name": "model-cache", "mountPath": "/models"}]
        [fill] = pod["containers"]
        assert fill["securityContext"]["runAsNonRoot"] is True
    labels = _namespace_labels(fsx, "inference")
    assert labels["pod-security.kubernetes.io/enforce"] == "baseline"
    assert labels["pod-security.kubernetes.io/warn"] == "restricted"
    assert labels["pod-security.kubernetes.io/audit"] == "restricted"
    # The other storages keep the restricted standard and no root step.
    s3 = _render(tmp_path, "eks-p4d", {})
    assert not any("initContainers" in pod for pod in _fill_pods(s3))
    assert _namespace_labels(s3, "inference")["pod-security.kubernetes.io/enforce"] == (
        "restricted"
    )


def test_the_populate_job_is_restricted_and_fenced(tmp_path: Path) -> None:
    rendering = _render(tmp_path, "gke-h100", {"storage": "gcs-fuse"})
    [job] = [j.inputs for j in rendering.of_type(JOB) if j.name.endswith("-fill-job")]
    pod = job["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert pod["automountServiceAccountToken"] is False
    [container] = pod["containers"]
    assert container["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "runAsNonRoot": True,
        "capabilities": {"drop": ["ALL"]},
    }
    env = {e["name"]: e for e in container["env"]}
    # The token only through the service's Secret.
    assert env["HF_TOKEN"]["valueFrom"]["secretKeyRef"] == {
        "name": "mistral-nemo-credentials",
        "key": "hf-token",
    }
    assert env["REVISION"]["value"] == "main"
    [policy] = [
        p.inputs for p in rendering.of_type(POLICY) if p.inputs["metadata"]["name"] == "model-fill"
    ]
    spec = policy["spec"]
    assert spec["policyTypes"] == ["Ingress", "Egress"] and "ingress" not in spec
    assert spec["podSelector"]["matchLabels"] == {"app.kubernetes.io/component": "model-cache"}
    ports = sorted((p["port"], p["protocol"]) for rule in spec["egress"] for p in rule["ports"])
    assert ports == [(53, "TCP"), (53, "UDP"), (80, "TCP"), (443, "TCP"), (988, "TCP")]


def test_the_secret_keeps_the_token_for_the_job_and_the_replicas_get_none(tmp_path: Path) -> None:
    rendering = _render(tmp_path, "gke-h100", {})
    [secret] = rendering.of_type("kubernetes:core/v1:Secret")
    assert set(secret.inputs["stringData"]) == {"hf-token", "api-key"}
    env = next(d.inputs for d in rendering.of_type(DEPLOYMENT))["spec"]["template"]["spec"][
        "containers"
    ][0]["env"]
    assert {e["name"] for e in env if "valueFrom" in e} == {"VLLM_API_KEY"}


def test_a_second_service_of_the_same_model_waits_for_the_first_ones_job(tmp_path: Path) -> None:
    values, _ = _values("existing")
    first = values["services"][0]
    twin = {**first, "name": "twin", "replicas": 1}
    document = yaml.safe_load(Path(stack_path("existing")).read_text())
    document["config"]["mig-inference:services"].append(twin)
    document["config"]["mig-inference:modelCache"] = {"storageClass": "nfs-rwx"}
    path = tmp_path / "Pulumi.existing.yaml"
    path.write_text(yaml.safe_dump(document))
    rendering = run_program("existing", path)
    assert rendering.error is None, rendering.error
    jobs = [j for j in rendering.of_type(JOB) if j.name.endswith("-fill-job")]
    assert len(jobs) == len(
        {
            (s["model"], s.get("revision", "main"))
            for s in document["config"]["mig-inference:services"]
        }
    )
    options = rendering.options[("mig-inference:index:InferenceService", "twin")]
    assert first["name"] in options.depends_on


# -- every shipped vLLM/TGI stack, one key ---------------------------------------------------


def _cacheable(stack: str) -> bool:
    plan = plan_stack(load_stack(stack))
    return any(s.spec.engine in (Engine.VLLM, Engine.TGI) for s in plan.services)


def _one_key(stack: str) -> dict[str, Any]:
    return {"storageClass": "nfs-rwx"} if load_stack(stack).cloud.value == "existing" else {}


@pytest.mark.parametrize("stack", [s for s in STACKS if _cacheable(s)])
def test_every_shipped_vllm_or_tgi_stack_turns_the_cache_on_with_one_key(
    tmp_path: Path, stack: str
) -> None:
    cache = _one_key(stack)
    rendering = _render(tmp_path, stack, cache)
    plan = _with_cache(stack, cache)
    assert plan.model_cache is not None
    served = {s.name for s in plan.services if s.spec.engine in (Engine.VLLM, Engine.TGI)}
    cached = {name for m in plan.model_cache.models for name in m.services}
    assert cached == served - set(plan.model_cache.uncached)
    assert cached, "no vLLM/TGI service is cached"
    deployments = {d.inputs["metadata"]["name"]: d.inputs for d in rendering.of_type(DEPLOYMENT)}
    for name in cached:
        _assert_reads_the_cache_only(deployments[name], plan)
    if (
        "mig-inference:modelCache"
        not in yaml.safe_load(Path(stack_path(stack)).read_text())["config"]
    ):
        # Without the key, nothing of the cache.
        shipped = stack_rendering(stack)
        assert not [j for j in shipped.of_type(JOB) if j.name.endswith("-fill-job")]
        assert not shipped.of_type(PVC)


def test_a_new_generation_keeps_the_populate_job(tmp_path: Path) -> None:
    """The Job follows the pool, not its generation: a blue/green change of the pool does not
    make a new Job (which would refill, or on Hyperdisk ML rewrite, the cache)."""
    jobs = []
    for disk in (None, 500):
        document = yaml.safe_load(Path(stack_path("gke-h100-cache")).read_text())
        if disk is not None:
            document["config"]["mig-inference:pools"][0]["diskSizeGb"] = disk
        folder = tmp_path / str(disk)
        folder.mkdir()
        path = folder / "Pulumi.gke-h100-cache.yaml"
        path.write_text(yaml.safe_dump(document))
        rendering = run_program("gke-h100-cache", path)
        assert rendering.error is None, rendering.error
        [job] = [j.inputs for j in rendering.of_type(JOB) if j.name.endswith("-fill-job")]
        [pool] = rendering.of_type("gcp:container/nodePool:NodePool")
        jobs.append((job, pool.inputs["name"]))
    (first, first_pool), (second, second_pool) = jobs
    assert first_pool != second_pool  # a new generation of the pool...
    assert first == second  # ...and the same populate Job
