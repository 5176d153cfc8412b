"""Pulumi policies (CrossGuard) for MIG inference workloads and GPU node pools.

The checks are plain functions over resource properties as the Pulumi engine sends them
(camelCase); `policies()` wraps them as `pulumi_policy` resource policies for the pack in
`policy/`. Only this module of the domain imports `pulumi_policy`.

A property that is unknown during preview (computed from another resource's output) raises the
SDK's `UnknownValueError` when read; the engine then reports that the policy could not run.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from msgspec import Struct
from pulumi_policy import (
    EnforcementLevel,
    Policy,
    PolicyComplianceFramework,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    Severity,
    StackValidationArgs,
    StackValidationPolicy,
)
from pulumi_policy.proxy import UnknownValueError

from mig_inference.clouds import EKS_INSTANCES, GKE_MACHINES, MACHINES, OKE_SHAPES, MachineShape
from mig_inference.errors import MigError
from mig_inference.gpus.catalog import RESOURCE_PREFIX, GpuModel, load_catalog
from mig_inference.names.labels import GPU_RESOURCE
from mig_inference.policy_claims import (
    CLAIM,
    CLAIM_TEMPLATE,
    DEVICE_CLASS,
    ClaimedRequest,
    ClaimIndex,
    ClaimSource,
    claim_requests,
    claim_source,
    class_profiles,
    held_claims,
    profile_key,
    resource_kind,
)
from mig_inference.resource_props import dig as _dig
from mig_inference.resource_props import mapping as _mapping
from mig_inference.resource_props import sequence as _sequence
from mig_inference.spec.cloud_tags import UNPROTECTED_TAG

GPU_PRODUCT_LABEL = "nvidia.com/gpu.product"
"""GPU feature discovery's product label, e.g. `NVIDIA-H100-80GB-HBM3`."""
GKE_ACCELERATOR_LABEL = "cloud.google.com/gke-accelerator"
INSTANCE_TYPE_LABELS = ("node.kubernetes.io/instance-type", "beta.kubernetes.io/instance-type")
GPU_SELECTOR_LABELS = (GPU_PRODUCT_LABEL, GKE_ACCELERATOR_LABEL, *INSTANCE_TYPE_LABELS)

# GFD appends `-MIG-<profile>` to the product under the `single` MIG strategy and `-SHARED` when
# the device plugin shares the GPU (GPU Operator time-slicing docs show
# `A100-SXM4-40GB-MIG-1g.5gb-SHARED`).
_PRODUCT_SUFFIXES = re.compile(r"(?:-MIG-[0-9a-z.+]+)?(?:-SHARED)?$", re.IGNORECASE)

# Machine families beyond the tables in `clouds.py`, which list only the shapes the project plans:
# GKE: the accelerator-optimized series A4X, A4, A3, A2, G4 and G2 come with NVIDIA GPUs attached
#   (cloud.google.com/compute/docs/accelerator-optimized-machines).
# EKS: NVIDIA GPU instances are the P and G families (p5, p4d, g6e, gr6, ...; EKS user guide
#   "Use EKS-optimized accelerated AMIs for GPU instances"), and the GPU AMI types say GPU or NVIDIA
#   (AL2_x86_64_GPU, AL2023_x86_64_NVIDIA, BOTTLEROCKET_x86_64_NVIDIA).
# OKE: OCI names every GPU shape `BM.GPU...` or `VM.GPU...` (Compute Shapes reference).
_GKE_GPU_MACHINE = re.compile(r"^(?:a4x|a4|a3|a2|g4|g2)-")
_EKS_GPU_INSTANCE = re.compile(r"^(?:p|g|gr)\d[a-z0-9-]*\.")
_OKE_GPU_SHAPE = re.compile(r"^(?:BM|VM)\.GPU")

GKE_NODE_POOL = "gcp:container/nodePool:NodePool"
EKS_NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
OKE_NODE_POOL = "oci:ContainerEngine/nodePool:NodePool"

_TEMPLATE = ("spec", "template", "spec")
_POD_SPEC_PATHS: dict[str, tuple[str, ...]] = {
    "Pod": ("spec",),
    "PodTemplate": ("template", "spec"),
    "Deployment": _TEMPLATE,
    "StatefulSet": _TEMPLATE,
    "DaemonSet": _TEMPLATE,
    "ReplicaSet": _TEMPLATE,
    "ReplicationController": _TEMPLATE,
    "Job": _TEMPLATE,
    "CronJob": ("spec", "jobTemplate", "spec", "template", "spec"),
}

# vLLM (whose parser also takes underscores in long options) and TGI's launcher.
_TENSOR_PARALLEL_FLAGS = frozenset(
    {"--tensor-parallel-size", "--tensor_parallel_size", "-tp", "--num-shard"}
)
_TENSOR_PARALLEL_ENV = ("TENSOR_PARALLEL_SIZE", "NUM_SHARD")
# Names that carry a credential: the well-known ones, and the endings credentials take. A bare
# `_TOKEN` ending is not one (`PAD_TOKEN`, `EOS_TOKEN` name a tokenizer's special tokens), nor is
# PASSWORD inside a name (`PASSWORD_MIN_LENGTH`).
_SECRET_NAMES = frozenset(
    {"HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HUGGINGFACE_HUB_TOKEN", "HUGGINGFACEHUB_API_TOKEN",
     "TOKEN", "API_KEY", "SECRET", "PASSWORD", "AWS_SESSION_TOKEN", "GITHUB_TOKEN", "GH_TOKEN",
     "NGC_API_KEY", "NGC_CLI_API_KEY"}
)  # fmt: skip
_SECRET_NAME = re.compile(
    r".*_(?:API_KEY|API_TOKEN|ACCESS_TOKEN|AUTH_TOKEN|HUB_TOKEN|SECRET|SECRET_KEY|PASSWORD"
    r"|ACCESS_KEY)",
    re.IGNORECASE,
)
# Values that are credentials whatever the variable is called: Hugging Face user access tokens,
# AWS access key IDs, GitHub tokens, NVIDIA NGC keys, OpenAI-style keys.
_SECRET_VALUE = re.compile(
    r"hf_[A-Za-z0-9]{30,}|(?:AKIA|ASIA)[0-9A-Z]{16}|gh[pousr]_[A-Za-z0-9]{36,}"
    r"|nvapi-[A-Za-z0-9_-]{20,}|sk-[A-Za-z0-9_-]{20,}"
)
# `*_FILE` names a file that holds the secret (the `POSTGRES_PASSWORD_FILE` convention).
_SECRET_FILE = re.compile(r".*_FILE", re.IGNORECASE)
_ENV_REFERENCE = re.compile(r"\$\(([-._a-zA-Z0-9]+)\)")


def _number(value: float) -> str:
    return f"{value:g}"


class Container(Struct, frozen=True):
    """One container (or init container) of a pod spec."""

    name: str
    spec: Mapping[str, Any]


def pod_spec(resource_type: str, props: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The pod spec inside a Kubernetes workload's properties; None for other resources."""
    provider, _, rest = resource_type.partition(":")
    if provider != "kubernetes":
        return None
    # Server-side-apply patches (`DeploymentPatch`...) carry the same shape.
    path = _POD_SPEC_PATHS.get(rest.rpartition(":")[2].removesuffix("Patch"))
    if path is None:
        return None
    spec = _dig(props, path)
    return spec if isinstance(spec, Mapping) else None


def containers(pod: Mapping[str, Any]) -> list[Container]:
    """The pod's init containers and containers."""
    found = []
    for field in ("initContainers", "containers"):
        for item in _sequence(pod.get(field)):
            spec = _mapping(item)
            found.append(Container(str(spec.get("name") or "(unnamed)"), spec))
    return found


def quantity(value: object) -> float | None:
    """A Kubernetes quantity as a number; None unless it is a plain or milli (`m`) number."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if not isinstance(value, str):
        return None
    text, scale = value.strip(), 1.0
    if text.endswith("m"):
        text, scale = text[:-1], 0.001
    try:
        return float(text) * scale
    except ValueError:
        return None


def nvidia_resources(container: Mapping[str, Any], section: str) -> dict[str, float]:
    """The `nvidia.com/...` quantities of a container's `limits` or `requests`."""
    resources = _mapping(_mapping(container.get("resources")).get(section))
    found = {}
    for key in resources:
        if isinstance(key, str) and key.startswith("nvidia.com/"):
            amount = quantity(resources[key])
            if amount is not None:
                found[key] = amount
    return found


def mig_devices(container: Mapping[str, Any], section: str) -> dict[str, float]:
    """The MIG resources a container's `limits` or `requests` ask for (positive amounts)."""
    return {
        key: amount
        for key, amount in nvidia_resources(container, section).items()
        if key.startswith(RESOURCE_PREFIX) and amount > 0
    }


def mig_profiles(container: Mapping[str, Any]) -> list[str]:
    """MIG profiles a container asks for, spelled as in the resource (`3g.40gb`, `1g.10gb.me`)."""
    names: list[str] = []
    for section in ("limits", "requests"):
        for key in mig_devices(container, section):
            profile = key.removeprefix(RESOURCE_PREFIX)
            if profile not in names:
                names.append(profile)
    return names


def _machine(name: str) -> MachineShape | None:
    for table in MACHINES.values():
        if name in table:
            return table[name]
    return None


def gpus_for_label(key: str, value: str) -> frozenset[str]:
    """Catalog GPU models a node label value identifies; empty when it names none we know."""
    if key in INSTANCE_TYPE_LABELS:
        shape = _machine(value)
        return frozenset({shape.gpu}) if shape is not None else frozenset()
    if key == GPU_PRODUCT_LABEL:
        value = _PRODUCT_SUFFIXES.sub("", value)
    elif key != GKE_ACCELERATOR_LABEL:
        return frozenset()
    try:
        return frozenset({load_catalog().gpu(value).name})
    except MigError:
        return frozenset()


def _conjunction(constraints: Iterable[tuple[str, Sequence[str]]]) -> frozenset[str] | None:
    """GPUs that satisfy every (label, allowed values) constraint; None when none names a GPU."""
    result: frozenset[str] | None = None
    for key, values in constraints:
        gpus = frozenset(name for value in values for name in gpus_for_label(key, value))
        if gpus:
            result = gpus if result is None else result & gpus
    return result


def target_gpus(pod: Mapping[str, Any]) -> tuple[GpuModel, ...]:
    """GPU models the pod's node selection can land on; empty when that cannot be told.

    `nodeSelector` and each required node-affinity term (operator `In`) are read for the GPU
    labels; values that name no known GPU are left out, so only known candidates are judged.
    """
    selector = _mapping(pod.get("nodeSelector"))
    from_selector = _conjunction(
        (key, [str(value)])
        for key in GPU_SELECTOR_LABELS
        if (value := selector.get(key)) is not None
    )
    terms = _dig(
        pod,
        ("affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution",
         "nodeSelectorTerms"),
    )  # fmt: skip
    from_terms: frozenset[str] | None = None
    for term in _sequence(terms):
        constraints = []
        for item in _sequence(_mapping(term).get("matchExpressions")):
            expression = _mapping(item)
            key = expression.get("key")
            if expression.get("operator") == "In" and key in GPU_SELECTOR_LABELS:
                values = [str(v) for v in _sequence(expression.get("values"))]
                constraints.append((str(key), values))
        found = _conjunction(constraints)
        if found:
            from_terms = found if from_terms is None else from_terms | found
    if from_selector is None:
        chosen = from_terms
    elif from_terms is None:
        chosen = from_selector
    else:
        chosen = from_selector & from_terms
    if not chosen:
        return ()
    return tuple(gpu for gpu in load_catalog().every_gpu if gpu.name in chosen)


def _offered(gpu: GpuModel) -> str:
    return ", ".join(p.resource.removeprefix(RESOURCE_PREFIX) for p in gpu.profiles)


def mig_profile_violations(pod: Mapping[str, Any]) -> list[str]:
    """Containers asking for a MIG profile that a GPU the pod targets does not have."""
    gpus = target_gpus(pod)
    if not gpus:
        return []
    messages = []
    for container in containers(pod):
        for profile in mig_profiles(container.spec):
            for gpu in gpus:
                if gpu.has_profile(profile):
                    continue
                wanted = f'container "{container.name}" requests {RESOURCE_PREFIX}{profile}'
                if gpu.mig_capable:
                    messages.append(
                        f"{wanted}, a profile {gpu.name} does not have; "
                        f"MIG profiles on {gpu.name}: {_offered(gpu)}"
                    )
                else:
                    messages.append(f"{wanted}, but the pod targets {gpu.name}, which has no MIG")
    return messages


def mig_device_violations(pod: Mapping[str, Any]) -> list[str]:
    """Containers asking for more than one MIG device, or for whole GPUs next to MIG devices."""
    messages = []
    for container in containers(pod):
        checked: list[dict[str, float]] = []
        for section in ("limits", "requests"):
            devices = mig_devices(container.spec, section)
            if not devices or devices in checked:
                continue
            checked.append(devices)
            listed = ", ".join(f"{key}: {_number(devices[key])}" for key in sorted(devices))
            total = sum(devices.values())
            if total > 1:
                messages.append(
                    f'container "{container.name}" asks for {_number(total)} MIG devices in '
                    f"{section} ({listed}); CUDA uses one MIG device per process, so a container "
                    "gets at most one"
                )
            if nvidia_resources(container.spec, section).get(GPU_RESOURCE, 0) > 0:
                messages.append(
                    f'container "{container.name}" mixes {GPU_RESOURCE} with MIG devices in '
                    f"{section} ({listed}); ask for one or the other"
                )
    return messages


def known_profile(profile: str) -> bool:
    """Whether some GPU of the catalog has the MIG profile (in either spelling)."""
    return any(gpu.has_profile(profile) for gpu in load_catalog().every_gpu)


def claim_profile_violations(kind: str, props: Mapping[str, Any]) -> list[str]:
    """Claim (template) requests whose selector names a MIG profile no GPU has."""
    messages = []
    for request in claim_requests(kind, props):
        for profile in sorted(request.profiles):
            if not known_profile(profile):
                messages.append(
                    f'{kind} {request.describe()} selects the MIG profile "{profile}", which no '
                    "GPU has: no device will ever match, and its pods stay pending (profiles "
                    "are named like 1g.10gb, 3g.40gb, 1g.10gb+me)"
                )
    return messages


def device_class_violations(props: Mapping[str, Any]) -> list[str]:
    """DeviceClasses that bridge `nvidia.com/mig-<profile>` to DRA (`extendedResourceName`) but
    do not select exactly that profile."""
    resource = _dig(props, ("spec", "extendedResourceName"))
    if not isinstance(resource, str) or not resource.startswith(RESOURCE_PREFIX):
        return []
    wanted = profile_key(resource)
    if not known_profile(wanted):
        return [f"DeviceClass maps {resource}, a MIG profile no GPU has"]
    selected = sorted({profile_key(p) for p in class_profiles(props)})
    if not selected:
        return [
            f"DeviceClass maps {resource} but its selectors name no profile: a pod asking for "
            f"{resource} could be given any device of the class; select it with "
            f"device.attributes['gpu.nvidia.com'].profile == '{wanted}'"
        ]
    if selected != [wanted]:
        return [
            f"DeviceClass maps {resource} but selects {', '.join(selected)}: a pod asking for "
            f"{resource} could be given another slice"
        ]
    return []


def _amount(request: ClaimedRequest) -> str:
    if request.count is None:
        return "every matching MIG device"
    return f"{_number(request.count)} MIG devices"


def claim_count_violations(kind: str, props: Mapping[str, Any]) -> list[str]:
    """Claim (template) requests that take more than one MIG device."""
    return [
        f"{kind} {request.describe()} takes {_amount(request)}; a container that "
        "holds the claim gets them all, and CUDA uses one MIG device per process: ask for one "
        "(count 1, allocationMode ExactCount)"
        for request in claim_requests(kind, props)
        if request.mig and (request.count is None or request.count > 1)
    ]


def _claimed_devices(requests: Sequence[ClaimedRequest]) -> float | None:
    """MIG devices a claim's requests give (one alternative of each `firstAvailable` request,
    the largest); None when one takes every matching device."""
    per_group: dict[str, float] = {}
    for request in requests:
        if not request.mig:
            continue
        if request.count is None:
            return None
        per_group[request.group] = max(per_group.get(request.group, 0), request.count)
    return sum(per_group.values())


def claimed_slice_violations(
    pod: Mapping[str, Any], namespace: str | None, claims: ClaimIndex
) -> list[str]:
    """Containers holding MIG slices through the stack's claims, judged by the pod rules: each
    claimed profile is one of every GPU the pod targets, a container holds one MIG device
    (claimed and requested together) and no whole GPU beside it, and runs tensor parallelism 1.
    Claims made outside the stack are not judged."""
    gpus = target_gpus(pod)
    messages = []
    for container in containers(pod):
        every_claim = held_claims(pod, container.spec, claims, namespace)
        held = [
            (claim, mig) for claim in every_claim if (mig := [r for r in claim.requests if r.mig])
        ]
        if not held:
            continue
        who = f'container "{container.name}"'
        for claim, requests in held:
            for request in requests:
                for gpu in gpus:
                    if not request.profiles or any(gpu.has_profile(p) for p in request.profiles):
                        continue
                    wanted = f"{who} holds {claim.describe()}, whose {request.describe()}"
                    messages.append(
                        f"{wanted} selects a profile {gpu.name} does not have; MIG profiles on "
                        f"{gpu.name}: {_offered(gpu)}"
                        if gpu.mig_capable
                        else f"{wanted} selects a MIG slice, but the pod targets {gpu.name}, "
                        "which has no MIG"
                    )
        counts = [_claimed_devices(requests) for _claim, requests in held]
        requested = sum(mig_devices(container.spec, "limits").values())
        listed = ", ".join(claim.describe() for claim, _requests in held)
        if None in counts:
            messages.append(
                f"{who} holds {listed}, which takes every matching MIG device; CUDA uses one "
                "MIG device per process, so a container gets at most one"
            )
        elif sum(c for c in counts if c is not None) + requested > 1:
            also = f" and requests {_number(requested)} more" if requested else ""
            messages.append(
                f"{who} holds MIG devices through {listed}{also}; CUDA uses one MIG device per "
                "process, so a container gets at most one"
            )
        whole_claimed = any(r.whole_gpu for claim in every_claim for r in claim.requests)
        if whole_claimed or nvidia_resources(container.spec, "limits").get(GPU_RESOURCE, 0) > 0:
            messages.append(
                f"{who} holds a whole GPU next to the MIG slice of {listed}; ask for one or the "
                "other"
            )
        messages += _tensor_parallel_messages(container, f"holds a MIG slice through {listed}")
    return messages


def _literal_env(container: Mapping[str, Any]) -> dict[str, str]:
    found = {}
    for item in _sequence(container.get("env")):
        entry = _mapping(item)
        name, value = entry.get("name"), entry.get("value")
        if isinstance(name, str) and value is not None:
            found[name] = str(value)
    return found


def _words(container: Mapping[str, Any]) -> list[str]:
    # Split every item, so that `sh -c "vllm serve ... -tp 2"` is read too.
    words: list[str] = []
    for field in ("command", "args"):
        for item in _sequence(container.get(field)):
            if isinstance(item, str):
                words.extend(word.strip("'\"") for word in item.split())
    return words


def tensor_parallel(container: Mapping[str, Any]) -> list[tuple[str, int]]:
    """Tensor-parallel degrees a container asks for, each with the text that sets it.

    Reads vLLM's `--tensor-parallel-size`/`-tp`, TGI's `--num-shard` (`N` or `=N`, with the
    `$(VAR)` references Kubernetes expands from the container's env) and the env vars
    `TENSOR_PARALLEL_SIZE` and `NUM_SHARD`; values that are not integers are skipped.
    """
    env = _literal_env(container)
    words = _words(container)
    found = []
    for index, word in enumerate(words):
        flag, equals, value = word.partition("=")
        if flag not in _TENSOR_PARALLEL_FLAGS:
            continue
        if not equals:
            value = words[index + 1] if index + 1 < len(words) else ""
        expanded = _ENV_REFERENCE.sub(lambda m: env.get(m.group(1), m.group(0)), value)
        if expanded.isdigit():
            found.append((f"{flag} {value}", int(expanded)))
    for name in _TENSOR_PARALLEL_ENV:
        value = env.get(name, "").strip()
        if value.isdigit():
            found.append((f"env {name}={value}", int(value)))
    return found


def tensor_parallel_violations(pod: Mapping[str, Any]) -> list[str]:
    """Containers holding a MIG device that ask for tensor parallelism above 1."""
    messages = []
    for container in containers(pod):
        if not (mig_devices(container.spec, "limits") or mig_devices(container.spec, "requests")):
            continue
        messages += _tensor_parallel_messages(container, "holds a MIG device")
    return messages


def _tensor_parallel_messages(container: Container, holding: str) -> list[str]:
    """The container's tensor-parallel degrees above 1, said of a container that `holding`."""
    return [
        f'container "{container.name}" {holding} but asks for tensor parallelism {degree} '
        f"({setting}); a MIG device is a single GPU, use 1"
        for setting, degree in tensor_parallel(container.spec)
        if degree > 1
    ]


def secret_like(name: str) -> bool:
    """True for env var names that carry a credential (`HF_TOKEN`, `*_API_KEY`...)."""
    if _SECRET_FILE.fullmatch(name):
        return False
    return name.upper() in _SECRET_NAMES or _SECRET_NAME.fullmatch(name) is not None


def secret_value(value: str) -> bool:
    """True for a value that is a credential by its form (`hf_...`, `AKIA...`)."""
    return _SECRET_VALUE.search(value) is not None


def plaintext_secret_violations(pod: Mapping[str, Any]) -> list[str]:
    """Env vars with credential-like names whose value is written in the pod spec."""
    messages = []
    for container in containers(pod):
        for item in _sequence(container.spec.get("env")):
            entry = _mapping(item)
            name = entry.get("name")
            value = entry.get("value")
            if not isinstance(name, str) or value is None or value == "":
                continue
            if _ENV_REFERENCE.fullmatch(str(value)):
                continue
            if not secret_like(name) and not secret_value(str(value)):
                continue
            # Never echo the value: the message ends up in logs and Pulumi Cloud.
            messages.append(
                f'container "{container.name}" sets {name} to a literal value; anyone who can '
                "read the workload sees it. Take it from a Secret (valueFrom.secretKeyRef)"
            )
    return messages


def gpu_node_pool(resource_type: str, props: Mapping[str, Any]) -> str | None:
    """What makes a GKE, EKS or OKE node pool a GPU pool; None when it is not one."""
    if resource_type == GKE_NODE_POOL:
        config = _mapping(props.get("nodeConfig"))
        accelerators = [_mapping(a) for a in _sequence(config.get("guestAccelerators"))]
        types = [str(a.get("type")) for a in accelerators if quantity(a.get("count")) != 0]
        if types:
            return f"guest accelerators {', '.join(types)}"
        machine = config.get("machineType")
        if isinstance(machine, str) and (
            machine in GKE_MACHINES or _GKE_GPU_MACHINE.match(machine)
        ):
            return f"GPU machine type {machine}"
    elif resource_type == EKS_NODE_GROUP:
        instances = [
            t
            for t in _sequence(props.get("instanceTypes"))
            if isinstance(t, str) and (t in EKS_INSTANCES or _EKS_GPU_INSTANCE.match(t))
        ]
        if instances:
            return f"GPU instance types {', '.join(instances)}"
        ami = props.get("amiType")
        if isinstance(ami, str) and ("GPU" in ami.upper() or "NVIDIA" in ami.upper()):
            return f"GPU AMI type {ami}"
    elif resource_type == OKE_NODE_POOL:
        shape = props.get("nodeShape")
        if isinstance(shape, str) and (shape in OKE_SHAPES or _OKE_GPU_SHAPE.match(shape)):
            return f"GPU shape {shape}"
    return None


def _pod_validation(
    check: Callable[[Mapping[str, Any]], list[str]],
) -> Callable[[ResourceValidationArgs, ReportViolation], None]:
    def validate(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
        pod = pod_spec(args.resource_type, args.props)
        for message in check(pod) if pod is not None else []:
            report_violation(message, None)

    return validate


def _claim_validation(
    pod_check: Callable[[Mapping[str, Any]], list[str]],
    claim_check: Callable[[str, Mapping[str, Any]], list[str]],
    class_check: Callable[[Mapping[str, Any]], list[str]] | None = None,
) -> Callable[[ResourceValidationArgs, ReportViolation], None]:
    """A pod rule that also judges the DRA objects that hand out MIG slices on their own."""
    on_pods = _pod_validation(pod_check)

    def validate(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
        kind = resource_kind(args.resource_type)
        if kind in (CLAIM, CLAIM_TEMPLATE):
            messages = claim_check(kind, args.props)
        elif kind == DEVICE_CLASS and class_check is not None:
            messages = class_check(args.props)
        else:
            on_pods(args, report_violation)
            return
        for message in messages:
            report_violation(message, None)

    return validate


def _validate_claimed_slices(args: StackValidationArgs, report_violation: ReportViolation) -> None:
    # Every resource is judged that can be; a value unknown during preview then stops the policy
    # as the engine stops resource policies (it reports that the policy could not run).
    unknown: UnknownValueError | None = None
    sources: list[ClaimSource] = []
    for resource in args.resources:
        try:
            source = claim_source(resource.resource_type, resource.props)
        except UnknownValueError as error:
            unknown = unknown or error
            continue
        if source is not None:
            sources.append(source)
    claims = ClaimIndex(sources)
    for resource in args.resources:
        try:
            pod = pod_spec(resource.resource_type, resource.props)
            if pod is None:
                continue
            namespace = _dig(resource.props, ("metadata", "namespace"))
            found = claimed_slice_violations(
                pod, namespace if isinstance(namespace, str) else None, claims
            )
        except UnknownValueError as error:
            unknown = unknown or error
            continue
        for message in found:
            report_violation(message, resource.urn)
    if unknown is not None:
        raise unknown


def opted_out(resource_type: str, props: Mapping[str, Any]) -> bool:
    """Whether the pool carries the opt-out a stack with `cluster.protect: false` gives its GPU
    pools (GKE as a node resource label, EKS and OKE as a tag)."""
    if resource_type == GKE_NODE_POOL:
        marks = _mapping(_mapping(props.get("nodeConfig")).get("resourceLabels"))
    elif resource_type == OKE_NODE_POOL:
        marks = _mapping(props.get("freeformTags"))
    else:
        marks = _mapping(props.get("tags"))
    key, value = UNPROTECTED_TAG
    return marks.get(key) == value


def _validate_node_pool(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    reason = gpu_node_pool(args.resource_type, args.props)
    if reason is None or args.opts.protect or opted_out(args.resource_type, args.props):
        return
    key, value = UNPROTECTED_TAG
    report_violation(
        f'GPU node pool "{args.name}" ({reason}) is not protected: deleting or replacing it '
        "drains every MIG node and the services on them. Set the `protect` resource option, or "
        f"(a stack meant to be destroyed) tag the pool {key}={value}: mig-inference stacks with "
        "cluster.protect: false do",
        None,
    )


MIG_USER_GUIDE = "https://docs.nvidia.com/datacenter/tesla/mig-user-guide/"
"""NVIDIA's MIG user guide: the profiles of each GPU, one device per container, no peer access
between instances (so no tensor parallelism across slices)."""
NIST_800_53 = PolicyComplianceFramework(
    name="NIST SP 800-53",
    version="Rev. 5",
    reference="IA-5(7)",
    specification=(
        "Authenticator Management | No Embedded Unprotected Authenticators: ensure that "
        "unencrypted static authenticators are not embedded in applications or other forms of "
        "static storage"
    ),
)
"""The control a literal credential in a pod template breaks (the template is stored in the
Pulumi state, the cluster's etcd and the workload's history)."""
TAGS = ["mig-inference", "gpu"]
"""Tags every rule of the pack carries, beside its own."""


MIG_PROFILE_EXISTS = ResourceValidationPolicy(
    name="mig-profile-exists-on-gpu",
    description=(
        "A container's nvidia.com/mig-<profile> request names a MIG profile of every GPU its pod's "
        "node selection targets; a DRA claim's selector names a profile some GPU has; a "
        "DeviceClass that maps nvidia.com/mig-<profile> selects that profile."
    ),
    validate=_claim_validation(
        mig_profile_violations, claim_profile_violations, device_class_violations
    ),
    enforcement_level=EnforcementLevel.MANDATORY,
    severity=Severity.HIGH,
    remediation_steps=(
        "Request a profile the targeted GPU has (`mig-inference profiles --gpu <GPU>` lists "
        "them; names are per GPU model: 1g.10gb is a 2-slot profile on A100-40GB, a 1-slot one "
        "on H100-80GB), or change the pod's node selection to a GPU that has it. In a "
        "mig-inference stack, set the service's `profile: auto` or one its pool's layout offers."
    ),
    tags=[*TAGS, "mig", "kubernetes", "scheduling"],
    url=MIG_USER_GUIDE,
)
ONE_MIG_DEVICE = ResourceValidationPolicy(
    name="one-mig-device-per-container",
    description=(
        "A container asks for at most one MIG device and does not mix nvidia.com/gpu with MIG "
        "resources; a DRA claim's request takes at most one MIG device."
    ),
    validate=_claim_validation(mig_device_violations, claim_count_violations),
    enforcement_level=EnforcementLevel.MANDATORY,
    severity=Severity.HIGH,
    remediation_steps=(
        "Give each container one MIG device: a limit of 1 on one nvidia.com/mig-<profile> "
        "resource and no nvidia.com/gpu beside it (or one DRA claim request with count 1); a "
        "model that needs more memory takes a larger profile, and more throughput takes more "
        "replicas."
    ),
    tags=[*TAGS, "mig", "kubernetes", "scheduling"],
    url=MIG_USER_GUIDE,
)
TENSOR_PARALLEL_ONE = ResourceValidationPolicy(
    name="tensor-parallel-one-on-mig",
    description="A container holding a MIG device runs with tensor parallelism 1.",
    validate=_pod_validation(tensor_parallel_violations),
    enforcement_level=EnforcementLevel.MANDATORY,
    severity=Severity.MEDIUM,
    remediation_steps=(
        "Drop --tensor-parallel-size/-tp (vLLM), --num-shard (TGI) and TENSOR_PARALLEL_SIZE/"
        "NUM_SHARD, or set them to 1: MIG instances have no peer-to-peer path between them, so "
        "a model sharded across slices cannot start. Serve a model too large for one slice from "
        "a larger profile or a whole GPU."
    ),
    tags=[*TAGS, "mig", "inference"],
    url=MIG_USER_GUIDE,
)
NO_PLAINTEXT_TOKENS = ResourceValidationPolicy(
    name="no-plaintext-tokens",
    description=(
        "Env vars that carry a credential, by their name (HF_TOKEN, *_API_KEY, *_ACCESS_TOKEN, "
        "*_SECRET, *_PASSWORD, ...) or their value (hf_..., AKIA..., ghp_..., nvapi-..., sk-...), "
        "come from a Secret, not a literal value."
    ),
    validate=_pod_validation(plaintext_secret_violations),
    enforcement_level=EnforcementLevel.MANDATORY,
    severity=Severity.CRITICAL,
    remediation_steps=(
        "Move the value into a Kubernetes Secret and reference it with "
        "env[].valueFrom.secretKeyRef; rotate the credential, which the stack's state and the "
        "cluster's history already hold. In a mig-inference stack, name a secret config key "
        "(`hfTokenSecret`, `apiKeySecret`) set with `pulumi config set --secret`."
    ),
    framework=NIST_800_53,
    tags=[*TAGS, "security", "secrets", "kubernetes"],
    url="https://kubernetes.io/docs/concepts/configuration/secret/",
)
CLAIMED_MIG_SLICES = StackValidationPolicy(
    name="claimed-mig-slices-keep-the-pod-rules",
    description=(
        "A container that holds a MIG slice through a DRA claim of the stack (a claim is a slice) "
        "keeps the pod rules: the claimed profile is one of every GPU its pod targets, one MIG "
        "device per container (claimed and requested together), no whole GPU beside it, "
        "tensor parallelism 1."
    ),
    validate=_validate_claimed_slices,
    enforcement_level=EnforcementLevel.MANDATORY,
    severity=Severity.HIGH,
    remediation_steps=(
        "Make the claim and the container agree with the pod rules: claim a profile every GPU "
        "the pod targets has, one device per container (one request, count 1, claimed and "
        "requested together), no nvidia.com/gpu beside it, tensor parallelism 1."
    ),
    tags=[*TAGS, "mig", "dra", "kubernetes"],
    url=MIG_USER_GUIDE,
)
GPU_POOLS_PROTECTED = ResourceValidationPolicy(
    name="gpu-node-pools-protected",
    description=(
        "GKE, EKS and OKE GPU node pools carry the `protect` resource option, unless tagged as "
        "unprotected by design (stacks with cluster.protect: false)."
    ),
    validate=_validate_node_pool,
    enforcement_level=EnforcementLevel.MANDATORY,
    severity=Severity.HIGH,
    remediation_steps=(
        "Give the pool the `protect` resource option (mig-inference does, with "
        "cluster.protect: true, the default), so that a `pulumi up` or `destroy` cannot delete "
        "GPU capacity by accident; a stack meant to be destroyed sets cluster.protect: false, "
        "which tags its pools mig-inference-unprotected=by-design."
    ),
    tags=[*TAGS, "availability", "cost"],
    url="https://www.pulumi.com/docs/iac/concepts/options/protect/",
)


def policies() -> list[Policy]:
    """Every policy of the mig-inference pack."""
    return [
        MIG_PROFILE_EXISTS,
        ONE_MIG_DEVICE,
        TENSOR_PARALLEL_ONE,
        NO_PLAINTEXT_TOKENS,
        CLAIMED_MIG_SLICES,
        GPU_POOLS_PROTECTED,
    ]
