"""The change plan: what applying the stack as it is now does to a deployed one.

`change_plan(deployed, current, outcome)` says, per pool, whether it is unchanged, updated in
place, re-partitioned node by node, or needs new nodes (and which stack keys cause it), and per
service whether it moves, is rescheduled, scaled or unaffected; the numbers are what the rollout
simulator observed (`mig_inference.rollout`): replicas serving at the worst moment and for how
long fewer served, replicas evicted, nodes created, drained, deleted and left cordoned, GPUs at
the peak. Changes Pulumi would refuse, and the step a `pulumi up` would fail at, are reported with
the ways forward. `diff_records` alone compares two plan records field by field (what the keys
changed), with no simulation.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from pathlib import Path
from typing import Any

from msgspec import Struct, field

from mig_inference.changes.allocation_move import bridge_way
from mig_inference.changes.gateway import caller_changes, gateway_fields, kept_crds_change
from mig_inference.changes.record import plan_record
from mig_inference.changes.upgrade import DeployedBasis, UpgradedPool
from mig_inference.rollout.outcome import Outcome

PROJECT = "mig-inference"
POOL_RESOURCE = {
    "gke": ("mig-inference:index:GkeGpuPool", "gcp:container/nodePool:NodePool"),
    "eks": ("mig-inference:index:EksGpuNodeGroup", "aws:eks/nodeGroup:NodeGroup"),
    "oke": ("mig-inference:index:OkeGpuPool", "oci:ContainerEngine/nodePool:NodePool"),
}


class PoolChange(StrEnum):
    UNCHANGED = "unchanged"
    IN_PLACE = "updated in place"
    REPARTITIONED = "re-partitioned node by node"
    SWITCHED = "moved between the device plugin and DRA node by node"
    NEW_NODES = "new nodes needed"
    NODES_REPLACED = "nodes replaced in place"
    ADDED = "added"
    REMOVED = "removed"


class ServiceChange(StrEnum):
    UNAFFECTED = "unaffected"
    CALLERS = "callers change"
    """No replica moves, but who may call the service does (the gateway turned on or off)."""
    SCALED = "scaled"
    RESCHEDULED = "rescheduled"
    MOVED = "moved"
    DISRUPTED = "fewer replicas for a while"
    DOWN = "down"
    ADDED = "added"
    REMOVED = "removed"


class FieldChange(Struct, frozen=True):
    key: str
    old: str | None
    new: str | None

    def __str__(self) -> str:
        return f"{self.key}: {self.old or '(unset)'} -> {self.new or '(unset)'}"


class PoolDiff(Struct):
    name: str
    change: PoolChange
    fields: list[FieldChange] = field(default_factory=list)
    extra_gpus: int = 0
    """GPUs the new generation adds while the old one still runs."""
    replicas_evicted: int = 0
    slices_unavailable: int = 0
    """Slices out of service at once while the pool re-partitions."""
    refusal: str | None = None
    """Why Pulumi would refuse this change, and the ways forward."""
    nodes_created: int = 0
    nodes_replaced: int = 0
    """Nodes deleted by the change (a new generation's predecessors, a zone that left...)."""
    nodes_drained: int = 0
    nodes_relabelled: int = 0
    nodes_left_cordoned: list[str] = field(default_factory=list)
    nodes_released: list[str] = field(default_factory=list)
    """Nodes an existing pool no longer names: their GPU pods moved, the pool's labels removed."""
    nodes_plugin_config_missing: list[str] = field(default_factory=list)
    """Nodes whose sharing label named a key the device plugin's ConfigMap lacked at some moment."""
    nodes_plugin_blocked: list[str] = field(default_factory=list)
    """Nodes whose device plugin started then and advertised nothing until the key was known."""
    nodes_switched: list[str] = field(default_factory=list)
    """Nodes the re-partitioning Job moved to the other plugin, in order: `name (allocation)`."""
    nodes_offered_twice: list[str] = field(default_factory=list)
    """Nodes whose devices the device plugin and the DRA driver offered at one moment."""
    mig_config_missing: dict[str, tuple[str, float]] = field(default_factory=dict)
    """Nodes whose MIG config label named a config the GPU Operator's mig-parted config no
    longer held for a while (a custom layout renamed): node -> (the config, seconds)."""
    nodes_without_plugin: list[str] = field(default_factory=list)
    """Nodes whose replicas held the device plugin's devices while the GPU Operator ran none,
    before the node was switched to DRA."""
    reservation: str | None = None
    """The reservation (or Capacity Block) both versions' nodes come from, when new nodes come
    up next to the old ones: it must hold both at once."""
    gpus_before: int = 0
    peak_gpus: int = 0
    upgrade: UpgradedPool | None = None
    """Set when the pool needs new nodes because the installed mig-inference computes its
    generation differently from the release that deployed it."""
    node_update: str = ""
    """What the cloud does to the pool's nodes when Pulumi updates the pool in place."""


class ServiceDiff(Struct):
    name: str
    change: ServiceChange
    reason: str = ""
    serving_before: int | None = None
    min_serving: int | None = None
    serving_after: int | None = None
    window_seconds: float = 0.0
    """How long fewer replicas served than the smaller of before and after (estimated)."""
    down_seconds: float = 0.0
    pending_at_end: int = 0
    source: str | None = None
    """Where its replicas read the weights: `hub`, the model cache's storage, `runai-streamer`."""
    replicas_started: int = 0
    """Replicas that start (and load the model) during this `pulumi up` (simulated)."""
    replica_seconds: float | None = None
    """One replica's estimated start until Ready (what the simulation waited per replica)."""
    hub_bytes: int | None = None
    """Bytes this `pulumi up` downloads from the hub for it: every replica that starts, without
    the cache; the model revision once when the cache does not hold it yet; else nothing."""


class ChangePlan(Struct):
    pools: list[PoolDiff]
    services: list[ServiceDiff]
    failure: str | None = None
    """The step a `pulumi up` would fail at, and why."""
    other_refusals: list[str] = field(default_factory=list)
    seconds: float = 0.0
    """How long the simulated `pulumi up` took (from assumed durations: an estimate)."""
    simulated: bool = False
    gateway: list[FieldChange] = field(default_factory=list)
    """What changes at the gateway (its class, address, listener, routes and their weights):
    in place, no replica moves."""
    not_compared: list[str] = field(default_factory=list)
    """What the deployed stack's export could not say, and what was compared instead."""

    @property
    def replicas_evicted(self) -> int:
        return sum(p.replicas_evicted for p in self.pools)

    @property
    def slices_unavailable(self) -> int:
        return sum(p.slices_unavailable for p in self.pools)

    @property
    def extra_gpus(self) -> int:
        return sum(p.extra_gpus for p in self.pools)

    @property
    def hub_bytes(self) -> int:
        return sum(s.hub_bytes or 0 for s in self.services)

    @property
    def refusals(self) -> list[str]:
        return [p.refusal for p in self.pools if p.refusal] + self.other_refusals

    @property
    def changed(self) -> bool:
        return (
            any(p.change is not PoolChange.UNCHANGED for p in self.pools)
            or any(s.change is not ServiceChange.UNAFFECTED for s in self.services)
            or bool(self.gateway)
        )


UNSET_MEANS = {"allocation": "device-plugin"}
"""Keys a plan record leaves out when they hold this value (`allocation` is listed only on DRA
pools): a change names the value, never `(unset)`."""


def _field_changes(old: dict[str, str], new: dict[str, str]) -> list[FieldChange]:
    return [
        FieldChange(key, old.get(key, UNSET_MEANS.get(key)), new.get(key, UNSET_MEANS.get(key)))
        for key in sorted(set(old) | set(new))
        if old.get(key, UNSET_MEANS.get(key)) != new.get(key, UNSET_MEANS.get(key))
    ]


def _slices_per_node(pool: dict[str, Any]) -> int:
    return sum(int(count) for count in pool["capacity_per_node"].values())


def _unprotect_hint(stack: str, cloud: str, pool: str) -> str:
    component, resource = POOL_RESOURCE.get(cloud, ("", ""))
    urn = f"urn:pulumi:{stack}::{PROJECT}::{component}${resource}::{pool}"
    return f"pulumi state unprotect '{urn}'"


def _pool_diff(
    name: str, old: dict[str, Any], new: dict[str, Any], services: dict[str, Any], stack: str,
    cloud: str,
) -> PoolDiff:  # fmt: skip
    if old["generation"] != new["generation"]:
        # A key left out of one side's hash holds its legacy value there (a record exported
        # before `legacy_inputs` existed does not say it: it shows as unset).
        fields = _field_changes(
            {**old.get("legacy_inputs", {}), **old["replacement_inputs"]},
            {**new.get("legacy_inputs", {}), **new["replacement_inputs"]},
        )
        if old["rollout"] != new["rollout"]:
            # The layout joins (or leaves) the generation's inputs with the rollout: it is a
            # change only when the config itself changes.
            fields = [f for f in fields if f.key != "mig"]
            if old["config"] != new["config"]:
                fields.append(FieldChange("mig", old["config"], new["config"]))
            fields.append(FieldChange("rollout", old["rollout"], new["rollout"]))
        diff = PoolDiff(
            name,
            PoolChange.NEW_NODES,
            fields,
            extra_gpus=new["nodes"]["min"] * new["gpus_per_node"],
        )
        if old["protect"] and new["protect"]:
            keys = ", ".join(f.key for f in fields)
            ways = [
                f"unprotect the old generation, then run `pulumi up`: "
                f"{_unprotect_hint(stack, cloud, name)}",
                f"or undo the change of {keys}",
            ]
            diff.refusal = (
                f"pool {name} is protected and {keys} needs new nodes: Pulumi refuses to replace "
                f"a protected resource. Ways forward: {'; '.join(ways)}"
            )
        return diff
    if old["config"] != new["config"]:
        on_pool = [s for s in services.values() if s["pool"] == name]
        return PoolDiff(
            name,
            PoolChange.REPARTITIONED,
            [FieldChange("mig", old["config"], new["config"])],
            replicas_evicted=sum(s["replicas"] for s in on_pool),
            slices_unavailable=min(new["max_unavailable"], max(old["nodes"]["max"], 1))
            * _slices_per_node(old),
        )
    fields = _field_changes(old["in_place_inputs"], new["in_place_inputs"])
    if any(f.key == "allocation" for f in fields):
        # The re-partitioning Job moves the nodes one by one.
        on_pool = [s for s in services.values() if s["pool"] == name]
        return PoolDiff(
            name,
            PoolChange.SWITCHED,
            fields,
            replicas_evicted=sum(s["replicas"] for s in on_pool),
            slices_unavailable=min(new["max_unavailable"], max(old["nodes"]["max"], 1))
            * _slices_per_node(old),
        )
    if old["rollout"] == "in-place" and old.get("max_unavailable") != new.get("max_unavailable"):
        # The re-partitioning Job carries it: a new value is a new Job, which runs again (and
        # finds every node already on its layout).
        fields.append(
            FieldChange(
                "maxUnavailable", str(old.get("max_unavailable")), str(new.get("max_unavailable"))
            )
        )
    return PoolDiff(name, PoolChange.IN_PLACE if fields else PoolChange.UNCHANGED, fields)


def _service_diff(
    name: str, old: dict[str, Any], new: dict[str, Any], pools: dict[str, PoolDiff]
) -> ServiceDiff:
    if old["pool"] != new["pool"]:
        return ServiceDiff(name, ServiceChange.MOVED, f"pool {old['pool']} -> {new['pool']}")
    if old.get("namespace", new.get("namespace")) != new.get("namespace"):
        return ServiceDiff(
            name,
            ServiceChange.MOVED,
            f"namespace {old['namespace']} -> {new['namespace']}: a new Deployment next to the "
            "old one, which Pulumi deletes last",
        )
    if old["generation"] != new["generation"]:
        return ServiceDiff(
            name,
            ServiceChange.MOVED,
            f"to pool {new['pool']}'s new generation {new['generation']}, one replica at a time",
        )
    if old["profile"] != new["profile"]:
        return ServiceDiff(
            name, ServiceChange.RESCHEDULED, f"profile {old['profile']} -> {new['profile']}"
        )
    pool = pools.get(new["pool"])
    if pool is not None and pool.change is PoolChange.REPARTITIONED:
        return ServiceDiff(
            name, ServiceChange.RESCHEDULED, f"evicted while pool {new['pool']} re-partitions"
        )
    if old["pod"] != new["pod"]:
        return ServiceDiff(name, ServiceChange.RESCHEDULED, "pod template changed")
    if old["replicas"] != new["replicas"]:
        return ServiceDiff(
            name, ServiceChange.SCALED, f"replicas {old['replicas']} -> {new['replicas']}"
        )
    return ServiceDiff(name, ServiceChange.UNAFFECTED)


def diff_records(deployed: dict[str, Any], current: dict[str, Any]) -> ChangePlan:
    """The change plan from the deployed record to the current one."""
    stack, cloud = current["stack"], current["cloud"]
    pools: dict[str, PoolDiff] = {}
    for name, new in current["pools"].items():
        old = deployed["pools"].get(name)
        if old is None:
            pools[name] = PoolDiff(
                name, PoolChange.ADDED, extra_gpus=new["nodes"]["min"] * new["gpus_per_node"]
            )
        else:
            pools[name] = _pool_diff(name, old, new, deployed["services"], stack, cloud)
    for name in deployed["pools"]:
        if name not in current["pools"]:
            pools[name] = PoolDiff(name, PoolChange.REMOVED)
    services = [
        _service_diff(name, deployed["services"][name], new, pools)
        if name in deployed["services"]
        else ServiceDiff(name, ServiceChange.ADDED, _regrouped(new, deployed["services"]))
        for name, new in current["services"].items()
    ] + [
        ServiceDiff(name, ServiceChange.REMOVED, _regrouped_away(name, old, current["services"]))
        for name, old in deployed["services"].items()
        if name not in current["services"]
    ]
    gateway = _field_changes(
        gateway_fields(deployed.get("gateway")), gateway_fields(current.get("gateway"))
    )
    kept = kept_crds_change(deployed.get("gateway"), current.get("gateway"))
    if kept is not None:
        gateway.append(FieldChange("gateway CRDs", *kept))
    callers = caller_changes(deployed, current)
    for service in services:
        note = callers.get(service.name)
        if note is None:
            continue
        if service.change is ServiceChange.UNAFFECTED:
            service.change, service.reason = ServiceChange.CALLERS, note
        else:
            service.reason = f"{service.reason}; {note}" if service.reason else note
    return ChangePlan(list(pools.values()), services, gateway=gateway)


def _minutes(seconds: float) -> str:
    return f"~{max(1, round(seconds / 60))} min" if seconds else "0 min"


def _eks_minimum_refusals(deployed: dict[str, Any], current: dict[str, Any]) -> list[str]:
    """EKS refuses a node group whose minimum exceeds its desired size. Pulumi sends the desired
    size the state holds (what the group was created with: the autoscaler owns it since), so
    raising the minimum of an autoscaled group above it fails at EKS."""
    if current["cloud"] != "eks":
        return []
    found = []
    for name, new in current["pools"].items():
        old = deployed["pools"].get(name)
        if old is None or old["generation"] != new["generation"]:
            continue
        held = old["nodes"]["min"]
        if new["nodes"]["min"] > held and new["nodes"]["min"] != new["nodes"]["max"]:
            found.append(
                f"pool {name}: EKS refuses nodes.min {new['nodes']['min']} above the desired size "
                f"the Pulumi state holds ({held}: the autoscaler owns it, so Pulumi sends the old "
                f"value). Way forward: one `pulumi up` with a fixed `nodes: {new['nodes']['min']}` "
                f"(it sets the desired size), then `nodes: {{min: {new['nodes']['min']}, max: "
                f"{new['nodes']['max']}}}` (switching between fixed and autoscaled keeps the group)"
            )
    return found


def _bridge_moves_it(
    pool: PoolDiff, new: Mapping[str, Any], values: Mapping[str, Any] | None
) -> bool:
    """The new generation comes from `allocation: device-plugin -> dra` alone on an in-place
    pool without DynamicMIG: with the extended-resource bridge the pool keeps its generation
    and moves node by node (`plan.pools.generation.allocation_moves_in_place`). Not the way
    back: turning the bridge on for a DRA pool is itself a new generation on a cloud."""
    dra = (values or {}).get("dra")
    return (
        [(f.key, f.new) for f in pool.fields] == [("allocation", "dra")]
        and new.get("rollout") == "in-place"
        and not (isinstance(dra, Mapping) and dra.get("dynamicMig"))
    )


def _pool_refusal(
    pool: PoolDiff,
    urn: str,
    message: str,
    new: Mapping[str, Any],
    values: Mapping[str, Any] | None,
) -> str:
    """Why Pulumi refuses to replace or delete the protected pool, and the ways forward.
    `new`: the pool's record in the version applied; `values`: that version's stack values."""
    keys = ", ".join(f.key for f in pool.fields) or "the change"
    unprotect = f"`pulumi state unprotect '{urn}'`, then `pulumi up`"
    if pool.change is PoolChange.NEW_NODES and new:
        gpus = new["nodes"]["min"] * new["gpus_per_node"]
        unprotect += f" (the new generation comes up next to the old one: {gpus} extra GPUs)"
    ways = [unprotect]
    if pool.change is PoolChange.REMOVED:
        ways.append("or keep the pool in the stack")
    elif pool.upgrade is not None:
        ways.append(
            f"or keep the old nodes: set {pool.upgrade.keep} in the stack file"
            if pool.upgrade.keep
            else "or stay on the release of mig-inference that deployed it"
        )
    else:
        if _bridge_moves_it(pool, new, values):
            ways.append(f"or, {bridge_way(to_dra=True)}")
        # Not `rollout: in-place`: switching the rollout is itself a new generation.
        ways.append(f"or undo the change of {keys}")
    what = "removing" if pool.change is PoolChange.REMOVED else f"{keys} needs new nodes, and"
    return f"pool {pool.name}: {what} Pulumi refuses ({message}). Ways forward: {'; '.join(ways)}"


def change_plan(
    deployed: dict[str, Any],
    current: dict[str, Any],
    outcome: Outcome,
    basis: DeployedBasis | None = None,
) -> ChangePlan:
    """The change plan of two plan records, with what the simulation of the `pulumi up` between
    them observed. `basis`: how `deployed` was made from the deployed stack's export (pools
    whose generation the upgrade of mig-inference alone changes, what it could not say)."""
    changes = diff_records(deployed, current)
    if basis is not None:
        changes.not_compared = list(basis.notes)
        for pool in changes.pools:
            if pool.change is PoolChange.NEW_NODES:
                pool.upgrade = basis.upgraded.get(pool.name)
        repodded = {name for _, name in basis.pods}
        for service in changes.services:
            if service.name in repodded and service.reason == "pod template changed":
                service.reason += " (this release renders it otherwise than the deployed one)"
    changes.simulated = True
    changes.failure = outcome.failure
    changes.seconds = outcome.seconds
    pool_types = {resource for _, resource in POOL_RESOURCE.values()}
    refused = {r.key[1]: r for r in outcome.plan.refusals if r.key[0] in pool_types}
    for pool in changes.pools:
        observed = outcome.pools.get(pool.name)
        if observed is not None:
            pool.nodes_created = observed.nodes_created
            pool.nodes_replaced = observed.nodes_deleted
            pool.nodes_drained = observed.nodes_drained
            pool.nodes_relabelled = observed.nodes_relabelled
            pool.nodes_left_cordoned = sorted(observed.left_cordoned)
            pool.nodes_released = sorted(observed.released)
            pool.nodes_plugin_config_missing = sorted(observed.config_missing)
            pool.nodes_plugin_blocked = sorted(observed.plugin_blocked)
            pool.nodes_switched = list(observed.switched)
            pool.nodes_offered_twice = sorted(observed.offered_twice)
            pool.nodes_without_plugin = sorted(observed.without_plugin)
            pool.mig_config_missing = dict(sorted(observed.mig_config_missing.items()))
            pool.extra_gpus = observed.extra_gpus
            pool.gpus_before, pool.peak_gpus = observed.gpus_before, observed.peak_gpus
            pool.replicas_evicted = observed.evicted
            pool.slices_unavailable = observed.most_devices_down
            pool.node_update = observed.node_update
            taken = observed.nodes_deleted or observed.nodes_drained
            replaced = taken and observed.nodes_created and pool.change in (
                PoolChange.UNCHANGED, PoolChange.IN_PLACE,
            )  # fmt: skip
            if replaced:
                pool.change = PoolChange.NODES_REPLACED
        refusal = next(
            (
                r
                for key, r in refused.items()
                if pool.name == key or key.startswith(f"{pool.name}-")
            ),
            None,
        )
        old, new = deployed["pools"].get(pool.name) or {}, current["pools"].get(pool.name) or {}
        pool.refusal = (
            None
            if refusal is None
            else _pool_refusal(pool, refusal.urn, refusal.message, new, current.get("values"))
        )
        reservation = new.get("reservation")
        if reservation and old.get("reservation") == reservation and pool.extra_gpus:
            pool.reservation = reservation
    listed = {p.name for p in changes.pools}
    changes.other_refusals += [
        f"{r.message}. Way forward: "
        + (r.way or f"`pulumi state unprotect '{r.urn}'`, then `pulumi up`")
        for r in outcome.plan.refusals
        if r.key[0] not in pool_types
        or not any(r.key[1] == n or r.key[1].startswith(f"{n}-") for n in listed)
    ]
    changes.other_refusals += _eks_minimum_refusals(deployed, current)
    groups = {
        name: _group(record, name)
        for records in (deployed["services"], current["services"])
        for name, record in records.items()
    }
    _hub_bytes(changes, deployed, current, outcome)
    for service in changes.services:
        served = outcome.services.get(groups.get(service.name, service.name))
        if served is None:
            continue
        service.serving_before, service.min_serving = served.before, served.least
        service.serving_after, service.pending_at_end = served.after, served.pending_at_end
        service.window_seconds, service.down_seconds = served.below_seconds, served.down_seconds
        if served.down_seconds and service.change is not ServiceChange.REMOVED:
            service.change = ServiceChange.DOWN
            service.reason = f"no replica serves for {_minutes(served.down_seconds)}" + (
                f"; {service.reason}" if service.reason else ""
            )
        elif served.below_seconds and service.change is ServiceChange.UNAFFECTED:
            service.change = ServiceChange.DISRUPTED
            service.reason = (
                f"{served.least} of {served.before} replicas serve at the worst moment, fewer than "
                f"before for {_minutes(served.below_seconds)}"
            )
    return changes


def _hub_bytes(
    changes: ChangePlan, deployed: dict[str, Any], current: dict[str, Any], outcome: Outcome
) -> None:
    """Per service, what this `pulumi up` downloads from the hub: each replica start without
    the cache (the simulation counts them: moves to a new generation, re-partitions, rolling
    updates, scale-ups), and with it each model revision the cache did not hold before, once."""
    filled = {
        cached
        for record in deployed["services"].values()
        if (cached := (record.get("weights") or {}).get("cached"))
    }
    for service in changes.services:
        record = current["services"].get(service.name)
        weights = (record or {}).get("weights")
        if record is None or not weights:
            continue
        service.source = weights["source"]
        service.replica_seconds = weights["replica_seconds"]
        service.replicas_started = outcome.started.get(
            (_namespace(current, service.name), service.name), 0
        )
        size = weights["bytes"]
        if size is None:
            continue
        cached = weights.get("cached")
        if cached:
            service.hub_bytes = 0 if cached in filled else size
            filled.add(cached)
        else:
            service.hub_bytes = service.replicas_started * size


def _namespace(record: dict[str, Any], service: str) -> str:
    values = record.get("values") or {}
    for item in values.get("services") or []:
        if isinstance(item, dict) and item.get("name") == _group(
            record["services"][service], service
        ):
            return str(item.get("namespace") or "inference")
    return "inference"


def _group(service: dict[str, Any], name: str) -> str:
    """The Service a Deployment serves (records before groups: its own name)."""
    return str(service.get("group") or name)


def _regrouped(new: dict[str, Any], deployed: dict[str, Any]) -> str:
    """Why a new Deployment appears when its service existed under other Deployments."""
    group = new.get("group")
    before = [n for n, old in deployed.items() if group and _group(old, n) == group]
    if not before:
        return ""
    return (
        f"serves {group} on {new['profile']} in place of {', '.join(sorted(before))}: it needs "
        f"{new['replicas']} slice(s) of its own while the old replicas still run"
    )


def _regrouped_away(name: str, old: dict[str, Any], current: dict[str, Any]) -> str:
    """Why a Deployment goes when its service goes on under other Deployments."""
    group = _group(old, name)
    after = [n for n, new in current.items() if _group(new, n) == group]
    if not after:
        return ""
    return (
        f"{group} is served by {', '.join(sorted(after))} now: its {old['replicas']} replica(s) "
        "end once Pulumi deletes it"
    )


def change_warnings(changes: ChangePlan) -> list[str]:
    """One line per change that costs more than an in-place update."""
    warnings = list(changes.refusals)
    for pool in changes.pools:
        causes = ", ".join(f.key for f in pool.fields)
        if pool.reservation and not pool.refusal:
            warnings.append(
                f"pool {pool.name}: {causes or 'the update'} brings new nodes up next to the old "
                f"ones, from the same reservation: reservation {pool.reservation} must hold "
                f"{pool.peak_gpus} GPUs while both generations run, {pool.extra_gpus} more than "
                f"the deployed pool holds ({pool.gpus_before}). The plan cannot see its size: if "
                "it holds only the deployed nodes, the new ones never come up, `pulumi up` fails "
                "at the pool and the old nodes go on serving; free or add reserved capacity first"
            )
        elif pool.change is PoolChange.NEW_NODES and not pool.refusal:
            warnings.append(
                f"pool {pool.name}: {causes} needs new nodes: a new generation comes up next to "
                f"the old one ({pool.extra_gpus} extra GPUs until the old one is deleted)"
                + (
                    f"; caused by the upgrade of mig-inference: {pool.upgrade}"
                    if pool.upgrade
                    else ""
                )
            )
        elif pool.change is PoolChange.SWITCHED:
            [allocation] = [f for f in pool.fields if f.key == "allocation"]
            warnings.append(
                f"pool {pool.name}: allocation {allocation.old} -> {allocation.new} in place, node "
                f"by node ({', '.join(pool.nodes_switched) or 'no node switched'}): "
                f"{pool.replicas_evicted} replica(s) evicted, up to {pool.slices_unavailable} "
                f"slices out of service at once, {pool.extra_gpus} extra GPUs"
            )
        elif pool.change is PoolChange.REPARTITIONED:
            warnings.append(
                f"pool {pool.name}: re-partitioned in place, node by node: {pool.replicas_evicted} "
                f"replica(s) evicted, up to {pool.slices_unavailable} slices out of service at once"
            )
        elif pool.change is PoolChange.NODES_REPLACED or (
            pool.change is PoolChange.IN_PLACE and pool.replicas_evicted
        ):
            warnings.append(
                f"pool {pool.name}: {pool.nodes_replaced} node(s) taken away in place, "
                f"{pool.replicas_evicted} replica(s) evicted before their Deployments scale down "
                "(nodes go first: pools come before services). To avoid it, lower the services' "
                "replicas in one `pulumi up` and the pool in the next"
            )
        if any(f.key == "maxUnavailable" for f in pool.fields):
            warnings.append(
                f"pool {pool.name}: maxUnavailable changed: the re-partitioning Job runs again "
                "(nodes already on their layout are left alone)"
            )
        if pool.nodes_left_cordoned:
            warnings.append(
                f"pool {pool.name}: left cordoned: {', '.join(pool.nodes_left_cordoned)}"
            )
        if pool.nodes_plugin_config_missing:
            blocked = ", ".join(pool.nodes_plugin_blocked) or "none in the simulation"
            warnings.append(
                f"pool {pool.name}: {', '.join(pool.nodes_plugin_config_missing)} name(s) a "
                "device-plugin config its ConfigMap no longer has for a while: a device plugin "
                f"that starts then advertises nothing until the label changes ({blocked})"
            )
        if pool.nodes_offered_twice:
            warnings.append(
                f"pool {pool.name}: the device plugin and the DRA driver both offered the devices "
                f"of {', '.join(pool.nodes_offered_twice)} (a slice could be handed out twice)"
            )
        if pool.mig_config_missing:
            configs = sorted({config for config, _ in pool.mig_config_missing.values()})
            longest = max(seconds for _, seconds in pool.mig_config_missing.values())
            warnings.append(
                f"pool {pool.name}: {', '.join(pool.mig_config_missing)} name(s) the MIG layout "
                f"{', '.join(configs)}, which the GPU Operator's mig-parted config no longer holds "
                f"from its release until the node is re-partitioned or replaced (up to "
                f"{_minutes(longest)}): a node that reboots then comes back with no MIG "
                "instances (its MIG manager finds no such config and records failed) and serves "
                "nothing until the re-partitioning Job or its replacement moves it on"
            )
        if pool.nodes_without_plugin:
            warnings.append(
                f"pool {pool.name}: {', '.join(pool.nodes_without_plugin)} ran replicas with no "
                "device plugin before being switched to DRA (the GPU Operator ran none): a "
                "replica recreated there would stay Pending"
            )
        if pool.nodes_released:
            warnings.append(
                f"pool {pool.name}: {', '.join(pool.nodes_released)} leave(s) the pool: the "
                f"re-partitioning Job evicts their GPU pods ({pool.replicas_evicted} replica(s)) "
                "onto the pool's nodes, then removes the pool label; Pulumi removes the layout "
                "and taints last"
            )
    for service in changes.services:
        if service.change in (ServiceChange.DOWN, ServiceChange.DISRUPTED):
            warnings.append(f"service {service.name}: {service.change.value}: {service.reason}")
        if service.pending_at_end:
            warnings.append(
                f"service {service.name}: {service.pending_at_end} replica(s) stay Pending after "
                "the update"
            )
    if changes.failure:
        warnings.append(f"pulumi up would fail: {changes.failure}")
    warnings += [f"not compared against the deployed state: {n}" for n in changes.not_compared]
    return warnings


def change_plan_json(changes: ChangePlan) -> dict[str, Any]:
    return {
        "pools": [
            {
                "name": p.name,
                "change": p.change.value,
                "fields": [{"key": f.key, "old": f.old, "new": f.new} for f in p.fields],
                "extra_gpus": p.extra_gpus,
                "replicas_evicted": p.replicas_evicted,
                "slices_unavailable": p.slices_unavailable,
                "refusal": p.refusal,
                "nodes_created": p.nodes_created,
                "nodes_replaced": p.nodes_replaced,
                "nodes_drained": p.nodes_drained,
                "nodes_relabelled": p.nodes_relabelled,
                "nodes_left_cordoned": p.nodes_left_cordoned,
                "nodes_released": p.nodes_released,
                "nodes_plugin_config_missing": p.nodes_plugin_config_missing,
                "nodes_plugin_blocked": p.nodes_plugin_blocked,
                "nodes_switched": p.nodes_switched,
                "nodes_offered_twice": p.nodes_offered_twice,
                "nodes_without_plugin": p.nodes_without_plugin,
                "mig_config_missing": [
                    {"node": node, "config": config, "seconds": seconds}
                    for node, (config, seconds) in p.mig_config_missing.items()
                ],
                "reservation": p.reservation,
                "upgrade": None
                if p.upgrade is None
                else {
                    "deployed_generation": p.upgrade.exported,
                    "planned_generation": p.upgrade.replanned,
                    "inputs": list(p.upgrade.inputs),
                    "keep_old_nodes": p.upgrade.keep,
                },
                "node_update": p.node_update or None,
            }
            for p in changes.pools
        ],
        "services": [
            {
                "name": s.name,
                "change": s.change.value,
                "reason": s.reason,
                "serving_before": s.serving_before,
                "min_serving": s.min_serving,
                "serving_after": s.serving_after,
                "window_seconds": s.window_seconds,
                "down_seconds": s.down_seconds,
                "pending_at_end": s.pending_at_end,
                "weights_source": s.source,
                "replicas_started": s.replicas_started,
                "replica_seconds": s.replica_seconds,
                "hub_bytes": s.hub_bytes,
            }
            for s in changes.services
        ],
        "cost": {
            "replicas_evicted": changes.replicas_evicted,
            "slices_unavailable_at_once": changes.slices_unavailable,
            "extra_gpus_at_peak": changes.extra_gpus,
            "hub_bytes": changes.hub_bytes,
        },
        "gateway": [{"key": f.key, "old": f.old, "new": f.new} for f in changes.gateway],
        "refusals": changes.refusals,
        "failure": changes.failure,
        "not_compared": changes.not_compared,
        "simulated": changes.simulated,
        "seconds": changes.seconds,
    }


def change_plan_text(changes: ChangePlan) -> str:
    lines = ["pools:"]
    for pool in changes.pools:
        detail = "; ".join(str(f) for f in pool.fields)
        lines.append(f"  {pool.name}: {pool.change.value}" + (f" ({detail})" if detail else ""))
        nodes = [
            f"{count} {what}"
            for count, what in (
                (pool.nodes_created, "created"),
                (pool.nodes_replaced, "deleted"),
                (pool.nodes_drained, "drained"),
                (pool.nodes_relabelled, "relabelled"),
            )
            if count
        ]
        if pool.upgrade:
            lines.append(f"    caused by the upgrade of mig-inference: {pool.upgrade}")
        if nodes:
            lines.append(f"    nodes: {', '.join(nodes)}")
        if pool.node_update:
            lines.append(f"    cloud: {pool.node_update}")
        for label, named in (
            ("left cordoned", pool.nodes_left_cordoned),
            ("released", pool.nodes_released),
            ("device-plugin config missing for a while", pool.nodes_plugin_config_missing),
            ("device plugin could not start", pool.nodes_plugin_blocked),
            ("switched, in order", pool.nodes_switched),
            ("devices offered twice", pool.nodes_offered_twice),
            ("replicas with no device plugin", pool.nodes_without_plugin),
        ):
            if named:
                lines.append(f"    {label}: {', '.join(named)}")
        if pool.mig_config_missing:
            lines.append(
                "    MIG layout missing from the mig-parted config for a while: "
                + ", ".join(
                    f"{node} ({config}, {_minutes(seconds)})"
                    for node, (config, seconds) in pool.mig_config_missing.items()
                )
            )
        if pool.reservation:
            lines.append(
                f"    reservation {pool.reservation}: {pool.peak_gpus} GPUs at the peak, "
                f"{pool.extra_gpus} beyond the deployed pool's {pool.gpus_before}"
            )
    lines.append("services:")
    for service in changes.services:
        reason = f" ({service.reason})" if service.reason else ""
        lines.append(f"  {service.name}: {service.change.value}{reason}")
        if service.min_serving is not None and service.serving_before:
            lines.append(
                f"    serving: {service.serving_before} before, {service.min_serving} at the worst "
                f"moment, {service.serving_after} after"
                + (f", {service.pending_at_end} pending" if service.pending_at_end else "")
            )
        if changes.simulated and not changes.refusals and service.hub_bytes is not None:
            lines.append(f"    weights: {_weights_line(service)}")
    if changes.gateway:
        lines.append("gateway (updated in place; no replica moves):")
        lines += [f"  {change}" for change in changes.gateway]
    if changes.not_compared:
        lines.append("not compared against the deployed state (fell back to re-planning):")
        lines += [f"  {note}" for note in changes.not_compared]
    lines += [
        "transition:",
        f"  replicas evicted: {changes.replicas_evicted}",
        f"  slices out of service at once: {changes.slices_unavailable}",
        f"  extra GPUs at the peak (both generations running): {changes.extra_gpus}",
    ]
    if changes.simulated and not changes.refusals:
        lines.append(f"  downloaded from the hub: {changes.hub_bytes / 1e9:,.1f} GB")
    if changes.simulated and changes.refusals:
        lines.append("  simulated `pulumi up`: refused at preview, nothing changes")
    elif changes.simulated:
        lines.append(
            f"  simulated `pulumi up`: {_minutes(changes.seconds)} (estimated from assumed node "
            "boot, MIG apply and model load times)"
        )
    if changes.failure:
        lines.append(f"pulumi up would fail: {changes.failure}")
    lines += [f"refused: {refusal}" for refusal in changes.refusals]
    return "\n".join(lines)


def _weights_line(service: ServiceDiff) -> str:
    hub = f"{(service.hub_bytes or 0) / 1e9:,.1f} GB from the hub"
    started = f"{service.replicas_started} replica(s) start"
    each = (
        f" (~{max(1, round(service.replica_seconds / 60))} min each)"
        if service.replica_seconds
        else ""
    )
    if service.source == "hub":
        return f"{started}{each}, each downloading the model: {hub}"
    return f"{started}{each}, reading {service.source}: {hub}"


def load_deployed(path: Path) -> dict[str, Any]:
    """A deployed plan: the plan record `pulumi stack output --json` (or `plan` alone)
    exported, or an older stack file's, planned here."""
    from mig_inference.changes.deployed import read_deployed
    from mig_inference.plan import plan_of
    from mig_inference.spec.files import load_stack_file

    deployed = read_deployed(path)
    if deployed.record is not None:
        return deployed.record
    return plan_record(plan_of(lambda: load_stack_file(path)))
