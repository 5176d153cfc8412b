"""`mig-inference:pools`: GPU node pools."""

from __future__ import annotations

from collections.abc import Mapping

from mig.catalog import resolve_gpu
from mig.clouds import K8S_TAINT_EFFECTS, Cloud
from mig.errors import MigError
from mig.spec.model import (
    AUTO,
    MigManager,
    NodeCount,
    PoolSpec,
    Rollout,
    SharingSpec,
    SharingStrategy,
    Taint,
)
from mig.spec.reader import LABEL_KEY, LABEL_VALUE, ConfigNode, dns_label

POOL_NAME_MAX = 32
POOL_KEYS = ("name", "gpu", "machineType", "gpusPerNode", "nodes", "mig", "migManager", "maxPods",
             "spot", "labels", "taints", "nodeNames", "systemPods", "diskSizeGb", "zones",
             "imageId", "rollout", "maxUnavailable", "sharing")  # fmt: skip
MAX_SHARING_REPLICAS = 48
"""The most clients NVIDIA's MPS server (and so the device plugin) takes per GPU; the same cap
holds for time-slicing here, where more clients only thin each one's memory further."""


def _nodes(node: ConfigNode) -> NodeCount:
    if isinstance(node.value, dict):
        node.mapping(("min", "max"))
        low = node.child("min").integer(0, minimum=0)
        high = node.child("max").integer(minimum=1)
        if high is None:
            raise node.child("max").error("is required for an autoscaling pool")
        assert low is not None
        if low > high:
            raise node.error(f"min {low} is above max {high}")
        return NodeCount(low, high)
    count = node.integer(minimum=0)
    if count is None:
        raise node.error("is required: a node count or {min, max}")
    return NodeCount(count, count)


def _taints(node: ConfigNode) -> tuple[Taint, ...]:
    taints = []
    for item in node.items():
        item.mapping(("key", "value", "effect"))
        effect = item.child("effect").string("NoSchedule")
        if effect not in K8S_TAINT_EFFECTS:
            raise item.child("effect").error(
                f"{effect!r} is not a taint effect; allowed: {', '.join(K8S_TAINT_EFFECTS)} "
                "(Kubernetes spelling; translated per cloud)"
            )
        key = item.child("key").req_string()
        if not LABEL_KEY.match(key):
            raise item.child("key").error(f"{key!r} is not a valid taint key")
        value = item.child("value").string("") or ""
        if value and not LABEL_VALUE.match(value):
            raise item.child("value").error(f"{value!r} is not a valid taint value")
        assert effect is not None
        taints.append(Taint(key, value, effect))
    return tuple(taints)


def _mig(node: ConfigNode) -> str | Mapping[str, int]:
    value = node.value
    if value is None:
        return "all-disabled"
    if isinstance(value, dict):
        for key, count in value.items():
            if isinstance(count, bool) or not isinstance(count, int) or count <= 0:
                raise node.child(str(key)).error(f"must be a count > 0, got {count!r}")
        return {str(k): int(v) for k, v in value.items()}
    if isinstance(value, str) and value.strip():
        return value.strip()
    raise node.error(
        f"must be a named config (all-balanced, all-1g.10gb...), {{profile: count}} or auto; "
        f"got {value!r}"
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
        profiles=inner.child("profiles").strings(),
    )


def pool_spec(node: ConfigNode, cloud: Cloud) -> PoolSpec:
    raw = node.mapping(POOL_KEYS)
    # Cloud pools' physical names append `-<generation>` within GKE's 40-character limit.
    name = dns_label(node.child("name"), POOL_NAME_MAX)
    try:
        gpu = resolve_gpu(node.child("gpu").req_string())
    except MigError as error:
        raise MigError(
            error.message, node.child("gpu").path, value=error.value, allowed=error.allowed
        ) from None
    machine = node.child("machineType").string()
    if cloud is not Cloud.EXISTING and machine is None:
        raise node.child("machineType").error(f"is required for cloud {cloud.value}")
    node_names = node.child("nodeNames").strings()
    for index, node_name in enumerate(node_names):
        if node_names.index(node_name) != index:
            node.child("nodeNames").child(index).problem(
                f"node {node_name!r} is listed twice (it would count its GPUs twice)", None
            )
    if cloud is Cloud.EXISTING:
        if not node_names:
            raise node.child("nodeNames").error(
                "is required for an existing cluster: the nodes of this pool"
            )
    elif node_names:
        raise node.child("nodeNames").error("is only for cloud `existing`; cloud pools are created")
    mig_manager = node.child("migManager").choice(MigManager, MigManager.OPERATOR)
    if mig_manager is MigManager.GKE and cloud is not Cloud.GKE:
        raise node.child("migManager").error(f"`gke` is GKE's native MIG; cloud is {cloud.value}")
    nodes_given = raw.get("nodes") is not None
    mig = _mig(node.child("mig"))
    if cloud is Cloud.EXISTING:
        nodes = NodeCount(len(node_names), len(node_names))
        if nodes_given and _nodes(node.child("nodes")) != nodes:
            raise node.child("nodes").error(
                f"must equal the {len(node_names)} nodeNames (or be left out)"
            )
    elif nodes_given:
        nodes = _nodes(node.child("nodes"))
    elif mig == AUTO:
        nodes = NodeCount(0, 0)  # sized by the planner
    else:
        raise node.child("nodes").error("is required: a node count or {min, max}")
    disk = node.child("diskSizeGb").integer(200, minimum=50)
    assert disk is not None
    if cloud is Cloud.OKE and raw.get("imageId") is None:
        raise node.child("imageId").error("is required on OKE: the OCID of a GPU node image")
    rollout = node.child("rollout").choice(
        Rollout, Rollout.IN_PLACE if cloud is Cloud.EXISTING else Rollout.BLUE_GREEN
    )
    if cloud is Cloud.EXISTING and rollout is not Rollout.IN_PLACE:
        raise node.child("rollout").error(
            "existing nodes cannot be replaced by a new generation; their layout changes "
            "in-place, node by node (leave rollout out)"
        )
    if rollout is Rollout.IN_PLACE and mig_manager is MigManager.GKE:
        raise node.child("rollout").error(
            "GKE's native MIG partitions GPUs when a node is created, so a partition change "
            "always needs new nodes; use rollout: blue-green, or migManager: operator"
        )
    max_unavailable = node.child("maxUnavailable").integer(1, minimum=1)
    assert max_unavailable is not None
    if raw.get("maxUnavailable") is not None and rollout is not Rollout.IN_PLACE:
        raise node.child("maxUnavailable").error(
            "only applies to rollout: in-place (how many nodes are re-partitioned at once)"
        )
    return PoolSpec(
        name=name,
        gpu=gpu,
        machine_type=machine,
        gpus_per_node=node.child("gpusPerNode").integer(minimum=1, maximum=16),
        nodes=nodes,
        mig=mig,
        mig_manager=mig_manager,
        max_pods=node.child("maxPods").integer(minimum=1),
        spot=node.child("spot").boolean(False),
        labels=node.child("labels").labels(),
        taints=_taints(node.child("taints")),
        node_names=node_names,
        system_pods=node.child("systemPods").integer(minimum=0),
        disk_size_gb=disk,
        zones=node.child("zones").strings(),
        image_id=node.child("imageId").string(),
        nodes_given=nodes_given or cloud is Cloud.EXISTING,
        rollout=rollout,
        max_unavailable=max_unavailable,
        sharing=_sharing(node.child("sharing")),
    )
