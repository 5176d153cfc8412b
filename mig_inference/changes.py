"""The change plan: what applying the stack as it is now does to a deployed one.

`diff_records(deployed, current)` compares two plan records (`mig.record`) and says, per pool,
whether it is unchanged, updated in place, re-partitioned node by node, or needs new nodes (and
which keys cause it); per service, whether it moves, is rescheduled, scaled or unaffected; and
what the transition costs: replicas evicted, slices out of service at once, and GPUs needed at
the peak, when both generations of a pool run. Changes Pulumi would refuse (a protected pool
that must be replaced) are reported with the ways forward.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from mig_inference.errors import MigError
from mig_inference.record import RECORD_FORMAT, plan_record
from mig_inference.yamlfile import load_yaml

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
    NEW_NODES = "new nodes needed"
    ADDED = "added"
    REMOVED = "removed"


class ServiceChange(StrEnum):
    UNAFFECTED = "unaffected"
    SCALED = "scaled"
    RESCHEDULED = "rescheduled"
    MOVED = "moved"
    ADDED = "added"
    REMOVED = "removed"


@dataclass(frozen=True)
class FieldChange:
    key: str
    old: str | None
    new: str | None

    def __str__(self) -> str:
        return f"{self.key}: {self.old or '(unset)'} -> {self.new or '(unset)'}"


@dataclass
class PoolDiff:
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


@dataclass
class ServiceDiff:
    name: str
    change: ServiceChange
    reason: str = ""


@dataclass
class ChangePlan:
    pools: list[PoolDiff]
    services: list[ServiceDiff]

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
    def refusals(self) -> list[str]:
        return [p.refusal for p in self.pools if p.refusal]

    @property
    def changed(self) -> bool:
        return any(p.change is not PoolChange.UNCHANGED for p in self.pools) or any(
            s.change is not ServiceChange.UNAFFECTED for s in self.services
        )


def _field_changes(old: dict[str, str], new: dict[str, str]) -> list[FieldChange]:
    return [
        FieldChange(key, old.get(key), new.get(key))
        for key in sorted(set(old) | set(new))
        if old.get(key) != new.get(key)
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
        fields = _field_changes(old["replacement_inputs"], new["replacement_inputs"])
        if old["rollout"] != new["rollout"]:
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
    return PoolDiff(name, PoolChange.IN_PLACE if fields else PoolChange.UNCHANGED, fields)


def _service_diff(
    name: str, old: dict[str, Any], new: dict[str, Any], pools: dict[str, PoolDiff]
) -> ServiceDiff:
    if old["pool"] != new["pool"]:
        return ServiceDiff(name, ServiceChange.MOVED, f"pool {old['pool']} -> {new['pool']}")
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
    return ChangePlan(list(pools.values()), services)


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
        if pool.change is PoolChange.NEW_NODES and not pool.refusal:
            warnings.append(
                f"pool {pool.name}: {causes} needs new nodes: a new generation comes up next to "
                f"the old one ({pool.extra_gpus} extra GPUs until the old one is deleted)"
            )
        elif pool.change is PoolChange.REPARTITIONED:
            warnings.append(
                f"pool {pool.name}: re-partitioned in place, node by node: {pool.replicas_evicted} "
                f"replica(s) evicted, up to {pool.slices_unavailable} slices out of service at once"
            )
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
            }
            for p in changes.pools
        ],
        "services": [
            {"name": s.name, "change": s.change.value, "reason": s.reason} for s in changes.services
        ],
        "cost": {
            "replicas_evicted": changes.replicas_evicted,
            "slices_unavailable_at_once": changes.slices_unavailable,
            "extra_gpus_at_peak": changes.extra_gpus,
        },
        "refusals": changes.refusals,
    }


def change_plan_text(changes: ChangePlan) -> str:
    lines = ["pools:"]
    for pool in changes.pools:
        detail = "; ".join(str(f) for f in pool.fields)
        lines.append(f"  {pool.name}: {pool.change.value}" + (f" ({detail})" if detail else ""))
    lines.append("services:")
    for service in changes.services:
        reason = f" ({service.reason})" if service.reason else ""
        lines.append(f"  {service.name}: {service.change.value}{reason}")
    lines += [
        "transition:",
        f"  replicas evicted: {changes.replicas_evicted}",
        f"  slices out of service at once: {changes.slices_unavailable}",
        f"  extra GPUs at the peak (both generations running): {changes.extra_gpus}",
    ]
    lines += [f"refused: {refusal}" for refusal in changes.refusals]
    return "\n".join(lines)


def load_deployed(path: Path) -> dict[str, Any]:
    """A deployed plan: `pulumi stack output --json` saved to a file (its `plan`), a plan
    record, or an older stack file (planned here)."""
    from mig_inference.plan import plan_stack
    from mig_inference.stackfile import load_stack_file

    data = load_yaml(path, "deployed plan")
    if isinstance(data, dict) and isinstance(data.get("plan"), dict):
        data = data["plan"]
    if isinstance(data, dict) and data.get("format") == RECORD_FORMAT:
        return data
    if isinstance(data, dict) and "config" in data:
        return plan_record(plan_stack(load_stack_file(path)))
    raise MigError(
        f"not a deployed plan: expected `pulumi stack output --json` of a mig-inference stack "
        f"(with a `plan` of format {RECORD_FORMAT}) or a stack file",
        str(path),
    )
