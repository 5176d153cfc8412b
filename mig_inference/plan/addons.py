"""The cluster add-ons a stack's plan needs (rows of `clouds.addons`), each with the key that asks
for it: what a created cluster is given, what a joined one is checked for, and what `plan`
says about both."""

from __future__ import annotations

from msgspec import Struct

from mig_inference.clouds import Cloud
from mig_inference.clouds.addons import Addon, Feature, Joined, addon
from mig_inference.plan.gateway import needs_load_balancer_controller
from mig_inference.plan.stack_plan import StackPlan
from mig_inference.spec import key_path


class Need(Struct, frozen=True):
    """One add-on the stack needs, and the keys of the stack that need it."""

    addon: Addon
    keys: tuple[str, ...]
    why: str

    @property
    def feature(self) -> Feature:
        return self.addon.feature


def writes_network_policies(plan: StackPlan) -> bool:
    """The stack writes NetworkPolicies: its services (and their verify, fill and profiling
    Jobs) and the node Jobs of its operator-managed pools (the MIG-ready gate, re-partitioning)
    are each fenced by one."""
    return bool(plan.services) or any(pool.operator_managed for pool in plan.pools)


def _streamed(plan: StackPlan) -> bool:
    cache = plan.model_cache
    return cache is not None and any(cache.streamed(service) for service in plan.services)


def _pod_identity_keys(plan: StackPlan) -> list[str]:
    """EKS: what gets its AWS identity through Pod Identity (on a created cluster, the CSI
    drivers' controllers too)."""
    keys = [
        f"{key_path('pools')}[{index}].nodes"
        for index, pool in enumerate(plan.pools)
        if pool.autoscaled
    ]
    cache = plan.model_cache
    if _streamed(plan):
        keys.append(f"{key_path('modelCache')}.stream")
    if needs_load_balancer_controller(plan.gateway, plan.spec.cloud, plan.spec.cluster.create):
        keys.append(f"{key_path('gateway')}.address")
    if plan.spec.cluster.create and cache is not None:
        driver = addon(Cloud.EKS, Feature(cache.storage.value))
        if driver is not None and driver.identity:
            keys.append(f"{key_path('modelCache')}.storage")
    return keys


def needed_addons(plan: StackPlan) -> list[Need]:
    """The add-ons the stack needs of its cluster, in the table's order."""
    cloud = plan.spec.cloud
    wanted: dict[Feature, tuple[list[str], str]] = {}
    cache = plan.model_cache
    if cache is not None:
        wanted[Feature(cache.storage.value)] = (
            [f"{key_path('modelCache')}.storage"],
            f"the model cache on {cache.storage.value}",
        )
    if cloud is Cloud.EKS:
        keys = _pod_identity_keys(plan)
        if keys:
            wanted[Feature.POD_IDENTITY] = (keys, "pods with an AWS identity of their own")
    if writes_network_policies(plan):
        wanted[Feature.NETWORK_POLICY] = (
            [key_path("cluster")],
            "the NetworkPolicies that fence its pods",
        )
    found = []
    for feature, (keys, why) in wanted.items():
        row = addon(cloud, feature)
        if row is not None:
            found.append(Need(row, tuple(keys), why))
    order = list(Feature)
    return sorted(found, key=lambda need: order.index(need.feature))


def needs(plan: StackPlan, feature: Feature) -> Need | None:
    return next((n for n in needed_addons(plan) if n.feature is feature), None)


def addon_warnings(plan: StackPlan) -> list[str]:
    """Why the stack's NetworkPolicies may go unenforced, when the project can neither make nor
    check the cluster's enforcement (OKE, existing clusters)."""
    need = needs(plan, Feature.NETWORK_POLICY)
    if need is None or need.addon.joined is not Joined.NOT_LOOKED_UP:
        return []
    where = (
        "OKE enforces none by itself and this stack installs no engine (Oracle names Calico, "
        f"installed by hand: {need.addon.source})"
        if plan.spec.cloud is Cloud.OKE
        else f"nothing about an existing cluster's CNI is looked up ({need.addon.source})"
    )
    return [
        f"{key_path('cluster')}: the stack's NetworkPolicies are enforced only by a CNI that "
        f"implements them; {where}"
    ]


def addons_text(plan: StackPlan) -> list[str]:
    """What `plan` says about the cluster's add-ons."""
    found = needed_addons(plan)
    if not found:
        return []
    created = plan.spec.cluster.create
    lines = ["cluster add-ons (mig_inference/clouds/addons.py, each row with its source):"]
    for need in found:
        row = need.addon
        if row.feature is Feature.STORAGE_CLASS:
            continue
        if created and row.installed_here:
            how = f"created with the cluster: {row.created}"
        elif row.joined is Joined.BUILT_IN:
            how = f"part of every cluster: {row.addon}"
        elif row.joined is Joined.REFUSED_WITHOUT:
            how = f"looked up at preview, refused without it: {row.addon}"
        elif row.joined is Joined.WARNED_WITHOUT:
            how = f"looked up at preview, warned when missing: {row.addon}"
        else:
            how = f"not checked: {row.addon or 'nothing the cloud shows'}"
        identity = (
            f"; its identity through Pod Identity for {row.identity}"
            if created and row.identity
            else ""
        )
        lines.append(f"  {need.feature.value} ({need.why}): {how}{identity}")
    lines.append("")
    return lines
