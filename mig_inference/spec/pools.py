"""`mig-inference:pools`: GPU node pools."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mig_inference.clouds import K8S_TAINT_EFFECTS, Cloud
from mig_inference.clouds.capacity import CLOUD_CAPACITY, RESERVED, Capacity
from mig_inference.errors import AlreadyReported, MigError, shown
from mig_inference.gpus.catalog import GpuModel, resolve_gpu
from mig_inference.gpus.layout import Layout, parse_custom_layout, place
from mig_inference.names.labels import (
    DEVICE_PLUGIN_CONFIG_LABEL,
    DEVICE_PLUGIN_DEPLOY_LABEL,
    GENERATION_LABEL,
    GKE_NO_DEVICE_PLUGIN_LABEL,
    GKE_PARTITION_LABEL,
    GKE_SHARED_CLIENTS_LABEL,
    MIG_CONFIG_LABEL,
    MIG_MANAGER_DEPLOY_LABEL,
    MIG_STATE_LABEL,
    OKE_NO_DEVICE_PLUGIN_LABEL,
    POOL_LABEL,
)
from mig_inference.spec import formats
from mig_inference.spec.model import (
    AUTO,
    Allocation,
    MigManager,
    NodeCount,
    PoolSpec,
    Rollout,
    SharingSpec,
    SharingStrategy,
    Taint,
)
from mig_inference.spec.reader import ConfigNode, dns_label, label_key_problem

POOL_NAME_MAX = 32
POOL_KEYS = ("name", "gpu", "machineType", "gpusPerNode", "nodes", "mig", "migManager", "maxPods",
             "spot", "labels", "taints", "nodeNames", "systemPods", "diskSizeGb", "zones",
             "imageId", "rollout", "maxUnavailable", "evictUnmanagedPods", "sharing", "capacity",
             "reservation", "bootDiskType", "userData", "allocation", "migPrefer")  # fmt: skip
MAX_SHARING_REPLICAS = 48
"""The most clients NVIDIA's MPS server (and so the device plugin) takes per GPU; the same cap
holds for time-slicing here, where more clients only thin each one's memory further."""
PROJECT_LABELS = (POOL_LABEL, GENERATION_LABEL, MIG_CONFIG_LABEL, MIG_STATE_LABEL,
                  DEVICE_PLUGIN_CONFIG_LABEL, GKE_NO_DEVICE_PLUGIN_LABEL, GKE_PARTITION_LABEL,
                  GKE_SHARED_CLIENTS_LABEL, OKE_NO_DEVICE_PLUGIN_LABEL, DEVICE_PLUGIN_DEPLOY_LABEL,
                  MIG_MANAGER_DEPLOY_LABEL)  # fmt: skip
"""Node labels the project sets itself (a pool's own value would be overridden)."""
RESERVED_LABEL_PREFIXES = ("mig-inference.io/", "kubernetes.io/", "k8s.io/")
"""The project's own prefix, and Kubernetes' (the kubelet refuses `--node-labels` in the
kubernetes.io and k8s.io namespaces, Kubernetes "Well-Known Labels")."""
MACHINE_FORMATS = {Cloud.GKE: formats.GKE_MACHINE, Cloud.EKS: formats.EC2_INSTANCE,
                   Cloud.OKE: formats.OKE_SHAPE}  # fmt: skip
RESERVATION_FORMATS = {Cloud.GKE: formats.GCP_RESERVATION,
                       Cloud.EKS: formats.AWS_CAPACITY_RESERVATION,
                       Cloud.OKE: formats.ocid("capacityreservation")}  # fmt: skip


def _nodes(node: ConfigNode, cloud: Cloud) -> NodeCount:
    bound = formats.NODES[cloud.value]
    if isinstance(node.value, dict):
        node.mapping(("min", "max"))
        low = node.child("min").integer(0, minimum=0, bound=bound)
        high = node.child("max").integer(minimum=1, bound=bound)
        if high is None:
            raise node.child("max").error("is required for an autoscaling pool")
        assert low is not None
        if low > high:
            raise node.error(f"min {low} is above max {high}")
        return NodeCount(low, high)
    count = node.integer(minimum=0, bound=bound)
    if count is None:
        raise node.error("is required: a node count or {min, max}")
    return NodeCount(count, count)


def _taints(node: ConfigNode) -> tuple[Taint, ...]:
    taints: list[Taint] = []
    for item in node.items():
        item.mapping(("key", "value", "effect"))
        effect = item.child("effect").string("NoSchedule")
        if effect not in K8S_TAINT_EFFECTS:
            raise item.child("effect").error(
                f"{shown(effect)} is not a taint effect; allowed: {', '.join(K8S_TAINT_EFFECTS)} "
                "(Kubernetes spelling; translated per cloud)"
            )
        key = item.child("key").req_string()
        key_problem = label_key_problem(key, "taint") if key else None
        if key_problem is not None:
            raise item.child("key").error(f"{shown(key)} is not a valid taint key: {key_problem}")
        value = item.child("value").string("") or ""
        value_problem = formats.TAINT_VALUE.problem(value) if value else None
        if value_problem is not None:
            raise item.child("value").error(value_problem)
        assert effect is not None
        twin = next((t for t in taints if (t.key, t.effect) == (key, effect)), None)
        if twin is not None:
            raise item.error(
                f"taint {key}:{effect} is given twice: Kubernetes takes one taint per key and "
                f"effect (the other is [{taints.index(twin)}])"
            )
        taints.append(Taint(key, value, effect))
    return tuple(taints)


def _labels(node: ConfigNode) -> dict[str, str]:
    labels = node.labels()
    for key in list(labels):
        ours = key in PROJECT_LABELS or key.startswith("mig-inference.io/")
        if ours or key.startswith(RESERVED_LABEL_PREFIXES):
            whose = "this project sets" if ours else "Kubernetes reserves (the kubelet refuses it)"
            node.child(key).problem(
                f"{shown(key)} is a label {whose}; pick a key of your own prefix", None
            )
            del labels[key]
    return labels


def _eks_node_group_rules(
    node: ConfigNode, labels: dict[str, str], taints: tuple[Taint, ...]
) -> tuple[dict[str, str], tuple[Taint, ...]]:
    """What EKS's node group API refuses of labels and taints that Kubernetes would take:
    label keys (prefix included) and values of 1-63 characters, at most 50 taints of keys of
    1-63 (formats.EKS_NODE_LABEL_KEY_MAX, EKS_TAINTS_MAX). The labels and taints it keeps."""
    kept = dict(labels)
    for key, value in labels.items():
        if len(key) > formats.EKS_NODE_LABEL_KEY_MAX:
            node.child("labels").child(key).problem(
                f"{shown(key)} is {len(key)} characters; EKS takes node group label keys of at "
                f"most {formats.EKS_NODE_LABEL_KEY_MAX}, prefix included",
                None,
            )
            del kept[key]
        elif (problem := formats.EKS_NODE_LABEL_VALUE.problem(value)) is not None:
            node.child("labels").child(key).problem(problem, None)
            del kept[key]
    if len(taints) > formats.EKS_TAINTS_MAX:
        node.child("taints").problem(
            f"has {len(taints)} taints; EKS takes at most {formats.EKS_TAINTS_MAX} per node group",
            None,
        )
    for index, taint in enumerate(taints):
        if len(taint.key) > formats.EKS_TAINT_KEY_MAX:
            node.child("taints").child(index).child("key").problem(
                f"{shown(taint.key)} is {len(taint.key)} characters; EKS takes taint keys of at "
                f"most {formats.EKS_TAINT_KEY_MAX}, prefix included",
                None,
            )
    fitting = tuple(t for t in taints if len(t.key) <= formats.EKS_TAINT_KEY_MAX)
    return kept, fitting


def _zones(node: ConfigNode, cloud: Cloud) -> tuple[str, ...]:
    if node.value is None:
        return ()
    if cloud is Cloud.EKS:
        return node.problem(
            "does not apply on EKS: a node group's zones are those of cluster.subnetIds (one "
            "subnet per zone); list the subnets of the zones you want",
            (),
        )
    if cloud is Cloud.EXISTING:
        return node.problem("does not apply to existing nodes: they are where they are", ())
    return node.texts(formats.GCP_ZONE if cloud is Cloud.GKE else formats.AVAILABILITY_DOMAIN)


def _capacity(node: ConfigNode, cloud: Cloud) -> tuple[Capacity, str, str | None]:
    """`capacity` (a closed set per cloud), `spot` (the older spelling of `capacity: spot`)
    and the `reservation` a reserved choice consumes, with the key that chose the capacity.
    Which choices a machine type has is the planner's check (it knows the machine)."""
    raw = node.value if isinstance(node.value, dict) else {}
    spot = node.child("spot").boolean(False)
    allowed = [str(c) for c in CLOUD_CAPACITY[cloud.value]]
    given = node.child("capacity").string()
    capacity = Capacity.SPOT if spot else Capacity.ON_DEMAND
    if given is not None and cloud is Cloud.EXISTING:
        node.child("capacity").problem(
            "does not apply to existing nodes: they are bought already", None
        )
    elif given is not None and given not in allowed:
        node.child("capacity").problem(
            f"{shown(given)} is not a capacity choice on {cloud.value}; allowed: "
            f"{', '.join(allowed)}",
            None,
            allowed,
        )
    elif given is not None:
        capacity = Capacity(given)
        if raw.get("spot") is not None and spot != (capacity is Capacity.SPOT):
            node.child("spot").problem(
                f"spot: {str(spot).lower()} contradicts capacity: {given} (spot: true is "
                "capacity: spot; give one of them)",
                None,
            )
    reservation = (
        node.child("reservation").text(RESERVATION_FORMATS[cloud])
        if cloud in RESERVATION_FORMATS
        else None
    )
    if capacity in RESERVED and reservation is None and raw.get("reservation") is None:
        node.child("reservation").problem(
            f"is required with capacity: {capacity}: the reservation the nodes consume", None
        )
    elif capacity not in RESERVED and raw.get("reservation") is not None:
        node.child("reservation").problem(
            f"only applies to capacity: {' or '.join(RESERVED)} (capacity is {capacity})", None
        )
        reservation = None
    return capacity, "spot" if spot and given is None else "capacity", reservation


def _mig(node: ConfigNode) -> str | Mapping[str, int]:
    value = node.value
    if value is None:
        return "all-disabled"
    if isinstance(value, dict):
        for key, count in value.items():
            if isinstance(count, bool) or not isinstance(count, int) or count <= 0:
                raise node.child(str(key)).error(f"must be a count > 0, got {shown(count)}")
        return {str(k): int(v) for k, v in value.items()}
    if isinstance(value, str) and value.strip():
        return value.strip()
    raise node.error(
        f"must be a named config (all-balanced, all-1g.10gb...), {{profile: count}} or auto; "
        f"got {shown(value)}"
    )


def _sharing(node: ConfigNode) -> SharingSpec | None:
    if node.value is None:
        return None
    strategies = tuple(s.value for s in SharingStrategy)
    raw = node.mapping(strategies)
    given = [s for s in strategies if s in raw]
    if len(given) != 1:
        raise node.error(
            f"must name one strategy, {' or '.join(strategies)}: "
            "e.g. {timeSlicing: {replicas: 4}}",
            strategies,
        )
    strategy = SharingStrategy(given[0])
    inner = node.child(given[0])
    inner.mapping(("replicas", "rename", "profiles"))
    replicas = inner.child("replicas").integer(minimum=2, maximum=MAX_SHARING_REPLICAS)
    if replicas is None:
        raise inner.child("replicas").error(
            f"is required: pods per device, 2 to {MAX_SHARING_REPLICAS}"
        )
    return SharingSpec(
        strategy=strategy,
        replicas=replicas,
        rename=inner.child("rename").boolean(False),
        profiles=inner.child("profiles").texts(formats.MIG_PROFILE),
    )


def pool_spec(node: ConfigNode, cloud: Cloud) -> PoolSpec:
    raw = node.mapping(POOL_KEYS)
    # Cloud pools' physical names append `-<generation>` within GKE's 40-character limit.
    gke = "a GKE node pool (formats.GKE_NODE_POOL_NAME)" if cloud is Cloud.GKE else None
    name = dns_label(node.child("name"), POOL_NAME_MAX, names=gke)
    gpu = None
    gpu_name = node.child("gpu").req_string()
    if gpu_name:
        try:
            gpu = resolve_gpu(gpu_name)
        except MigError as error:
            node.child("gpu").problem(error.message, None, error.allowed)
    machine = (
        node.child("machineType").text(MACHINE_FORMATS[cloud])
        if cloud in MACHINE_FORMATS
        else node.child("machineType").string()
    )
    if cloud is not Cloud.EXISTING and machine is None:
        node.child("machineType").problem(f"is required for cloud {cloud.value}", None)
    node_names = node.child("nodeNames").texts(formats.NODE_NAME)
    named = raw.get("nodeNames")
    listed: list[Any] = named if isinstance(named, list) else []
    for index, node_name in enumerate(listed):
        if node_name in node_names and listed.index(node_name) != index:
            node.child("nodeNames").child(index).problem(
                f"node {shown(node_name)} is listed twice (it would count its GPUs twice)", None
            )
    if cloud is Cloud.EXISTING:
        if raw.get("nodeNames") in (None, []):
            node.child("nodeNames").problem(
                "is required for an existing cluster: the nodes of this pool", None
            )
    elif raw.get("nodeNames") not in (None, []):
        node.child("nodeNames").problem(
            "is only for cloud `existing`; cloud pools are created", None
        )
    mig_manager = node.child("migManager").choice(MigManager, MigManager.OPERATOR)
    if mig_manager is MigManager.GKE and cloud is not Cloud.GKE:
        mig_manager = node.child("migManager").problem(
            f"`gke` is GKE's native MIG; cloud is {cloud.value}", MigManager.OPERATOR
        )
    nodes_given = raw.get("nodes") is not None
    # A mig or nodes refused is recorded; AUTO then asks for no node count beside it.
    no_mig: str | Mapping[str, int] = AUTO
    mig = node.attempt(lambda: _mig(node.child("mig")), no_mig)
    if cloud is Cloud.EXISTING:
        count = len(listed) or len(node_names)
        nodes = NodeCount(count, count)
        given = (
            node.attempt(lambda: _nodes(node.child("nodes"), cloud), nodes)
            if nodes_given
            else nodes
        )
        if count and given != nodes:
            node.child("nodes").problem(f"must equal the {count} nodeNames (or be left out)", None)
    elif nodes_given:
        nodes = node.attempt(lambda: _nodes(node.child("nodes"), cloud), NodeCount(0, 0))
    elif mig == AUTO:
        nodes = NodeCount(0, 0)  # sized by the planner
    else:
        nodes = node.child("nodes").problem(
            "is required: a node count or {min, max}", NodeCount(0, 0)
        )
    disk = node.child("diskSizeGb").integer(
        200, minimum=formats.DISK_GB_MINIMUM, bound=formats.DISK_GB[cloud.value]
    )
    assert disk is not None
    if cloud is Cloud.OKE and raw.get("imageId") is None:
        node.child("imageId").problem("is required on OKE: the OCID of a GPU node image", None)
    rollout = node.child("rollout").choice(
        Rollout, Rollout.IN_PLACE if cloud is Cloud.EXISTING else Rollout.BLUE_GREEN
    )
    if cloud is Cloud.EXISTING and rollout is not Rollout.IN_PLACE:
        rollout = node.child("rollout").problem(
            "existing nodes cannot be replaced by a new generation; their layout changes "
            "in-place, node by node (leave rollout out)",
            Rollout.IN_PLACE,
        )
    if rollout is Rollout.IN_PLACE and mig_manager is MigManager.GKE:
        node.child("rollout").problem(
            "GKE's native MIG partitions GPUs when a node is created, so a partition change "
            "always needs new nodes; use rollout: blue-green, or migManager: operator",
            None,
        )
    max_unavailable = node.child("maxUnavailable").integer(1, bound=formats.MAX_UNAVAILABLE)
    assert max_unavailable is not None
    if raw.get("maxUnavailable") is not None and rollout is not Rollout.IN_PLACE:
        node.child("maxUnavailable").problem(
            "only applies to rollout: in-place (how many nodes are re-partitioned at once)", None
        )
    evict_unmanaged = node.child("evictUnmanagedPods").boolean(False)
    if raw.get("evictUnmanagedPods") is not None and rollout is not Rollout.IN_PLACE:
        node.child("evictUnmanagedPods").problem(
            "only applies to rollout: in-place (whether the re-partitioning Job may evict GPU "
            "pods no controller owns)",
            None,
        )
    # Every value is read (and its errors recorded) before a missing GPU ends the pool.
    gpus_per_node = node.child("gpusPerNode").integer(minimum=1, maximum=16)
    max_pods = node.child("maxPods").integer(bound=formats.MAX_PODS)
    capacity, capacity_key, reservation = _capacity(node, cloud)
    labels = _labels(node.child("labels"))
    no_taints: tuple[Taint, ...] = ()
    taints = node.attempt(lambda: _taints(node.child("taints")), no_taints)
    if cloud is Cloud.EKS:
        labels, taints = _eks_node_group_rules(node, labels, taints)
    system_pods = node.child("systemPods").integer(bound=formats.SYSTEM_PODS)
    zones = _zones(node.child("zones"), cloud)
    image_id = node.child("imageId").text(formats.ocid("image"))
    if cloud is not Cloud.OKE and raw.get("imageId") is not None:
        image_id = node.child("imageId").problem(
            "is an OKE node image; on this cloud the node image comes with the pool", None
        )
    sharing = node.attempt(lambda: _sharing(node.child("sharing")), None)
    allocation = _allocation(node, mig_manager, sharing)
    boot_disk_type = _boot_disk_type(node.child("bootDiskType"), cloud)
    user_data = _user_data(node.child("userData"), cloud)
    mig_prefer = _mig_prefer(node.child("migPrefer"), gpu, mig)
    if gpu is None:
        raise AlreadyReported(node.path)  # no pool without its GPU; its errors are recorded
    return PoolSpec(
        name=name,
        gpu=gpu,
        machine_type=machine,
        nodes=nodes,
        mig=mig,
        mig_manager=mig_manager,
        node_names=node_names,
        disk_size_gb=disk,
        nodes_given=nodes_given or cloud is Cloud.EXISTING,
        rollout=rollout,
        max_unavailable=max_unavailable,
        evict_unmanaged_pods=evict_unmanaged,
        gpus_per_node=gpus_per_node,
        max_pods=max_pods,
        spot=capacity is Capacity.SPOT,
        labels=labels,
        taints=taints,
        system_pods=system_pods,
        zones=zones,
        image_id=image_id,
        boot_disk_type=boot_disk_type,
        user_data=user_data,
        sharing=sharing,
        capacity=capacity,
        capacity_key=capacity_key,
        reservation=reservation,
        allocation=allocation,
        mig_prefer=mig_prefer,
    )


def _mig_prefer(
    node: ConfigNode, gpu: GpuModel | None, mig: str | Mapping[str, int]
) -> tuple[Layout, ...]:
    """`migPrefer`: the deployed layout of each GPU of a node (as `plan --deployed` prints it),
    for `mig: auto` only."""
    if node.value is None:
        return ()
    if mig != AUTO:
        return node.problem("only applies to mig: auto (a fixed layout is kept as given)", ())
    layouts = []
    for item in node.items():
        text = item.req_string()
        if gpu is None or not text:
            continue
        try:
            layout = parse_custom_layout(gpu, text)
            place(gpu, layout)
        except MigError as error:
            item.problem(error.message, None, error.allowed)
            continue
        layouts.append(layout)
    return tuple(layouts)


def _allocation(
    node: ConfigNode, mig_manager: MigManager, sharing: SharingSpec | None
) -> Allocation:
    """`allocation`: the device plugin (default) or NVIDIA's DRA driver, which needs the GPU
    Operator's MIG manager to apply the layout and owns every device of the node."""
    allocation: Allocation = node.child("allocation").choice(Allocation, Allocation.DEVICE_PLUGIN)
    if allocation is not Allocation.DRA:
        return allocation
    if mig_manager is MigManager.GKE:
        return node.child("allocation").problem(
            "GKE's native MIG (and its time-sharing) serve slices through GKE's own device "
            "plugin, which cannot run beside a DRA driver; DRA pools take migManager: operator",
            Allocation.DEVICE_PLUGIN,
        )
    if sharing is not None:
        return node.child("sharing").problem(
            "is the device plugin's time-slicing or MPS; a DRA pool's devices are each claimed "
            "by one pod (leave sharing out, or use allocation: device-plugin)",
            Allocation.DRA,
        )
    return allocation


def _boot_disk_type(node: ConfigNode, cloud: Cloud) -> str | None:
    """GKE: the nodes' boot disk type (default: the first the machine takes)."""
    if node.value is None:
        return None
    if cloud is not Cloud.GKE:
        return node.problem(
            "is GKE's boot disk type; EKS GPU nodes boot from encrypted gp3 and OKE boot volumes "
            "have no type (diskSizeGb sets the size everywhere)",
            None,
        )
    allowed = list(formats.GKE_BOOT_DISK_TYPES)
    if node.value not in allowed:
        return node.problem(
            f"{shown(node.value)} is not allowed; allowed: {', '.join(allowed)}", None, allowed
        )
    return str(node.value)


def _user_data(node: ConfigNode, cloud: Cloud) -> str | None:
    """EKS: a shell script or cloud-config run after this project's nodeadm parts."""
    if node.value is None:
        return None
    if cloud is not Cloud.EKS:
        return node.problem(
            "is EKS's extra user data (a part of the launch template's MIME multipart); "
            "not taken on this cloud",
            None,
        )
    text = node.string()
    if text is None:
        return None
    if not text.startswith(("#!", "#cloud-config")):
        return node.problem(
            "must be a shell script (starting with #!) or cloud-config (starting with "
            "#cloud-config)",
            None,
        )
    if len(text.encode()) > formats.EC2_USER_DATA_BYTES // 2:
        return node.problem(
            f"is {len(text.encode()):,} bytes; with this project's parts the launch template's "
            f"user data must stay under EC2's {formats.EC2_USER_DATA_BYTES:,} bytes: keep it "
            f"under {formats.EC2_USER_DATA_BYTES // 2:,}",
            None,
        )
    return text
