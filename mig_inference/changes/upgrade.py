"""The deployed side of a change, from what the deployed stack exported.

`diff` re-plans the deployed stack's values with the installed code to simulate the `pulumi up`;
a release of mig-inference that computes a pool's generation differently (a new input, as the
node identity was in 0.3.0) plans the same values to another generation, so re-planning alone
hides the new nodes the upgrade brings. The plan record a deployed stack exported says what it
runs: each pool's generation, cloud name and the inputs it hashed, each service's pool,
generation, profile, replicas and pod. Those exported values replace the re-planned ones field by
field; a pool or service whose export lacks what the comparison needs (a stack exported by an
older release) keeps the re-planned values, and the basis says so.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from msgspec import Struct, field

from mig_inference.changes.deployed import Deployed
from mig_inference.plan.pools.generation import LEGACY_HOP_LIMIT

POOL_IDENTITY = ("generation", "replacement_inputs")
"""What a pool's export must hold to be compared against the deployed state at all."""
POOL_FIELDS = (
    "physical_name", "legacy_inputs", "config", "rollout", "max_unavailable", "in_place_inputs",
    "nodes",
)  # fmt: skip
"""Further fields of the deployed pool, taken from the export where it has them."""
SERVICE_FIELDS = ("pool", "generation", "profile", "replicas", "pod", "namespace", "group")
SERVICE_IDENTITY = ("pool", "generation", "profile", "replicas", "pod")


class UpgradedPool(Struct, frozen=True):
    """A pool whose generation the installed code computes differently from the release that
    deployed it, for the same stack values."""

    exported: str | None
    """The generation the pool runs (exported)."""
    replanned: str | None
    """The generation the installed code plans for the deployed values."""
    inputs: tuple[str, ...]
    """The generation inputs whose values (or presence) differ between the two."""
    keep: str | None = None
    """The stack keys that keep the running nodes, where the release that changed the
    generation names them."""

    def __str__(self) -> str:
        inputs = ", ".join(self.inputs) or "how the generation is computed"
        text = (
            f"the pool runs generation {self.exported}, this release plans {self.replanned} for "
            f"the same stack values ({inputs})"
        )
        return text + (f"; keep the old nodes: set {self.keep}" if self.keep else "")


class DeployedBasis(Struct):
    """What `diff` compares the stack with: the deployed record, and how it was made."""

    record: dict[str, Any]
    upgraded: dict[str, UpgradedPool] = field(default_factory=dict)
    """Pools whose exported generation differs from the re-planned one."""
    notes: list[str] = field(default_factory=list)
    """What could not be compared against the deployed state, and what it fell back to."""
    pods: dict[tuple[str, str], str] = field(default_factory=dict)
    """(namespace, Deployment) -> the pod fingerprint exported, where the installed code
    renders the deployed values' pod differently."""

    def kept(self, planned: Mapping[str, str | None]) -> list[str]:
        """Upgraded pools whose exported generation is the one planned now (`planned`: pool ->
        generation): the stack keeps their running nodes."""
        return [name for name, pool in self.upgraded.items() if planned.get(name) == pool.exported]

    @property
    def generations(self) -> dict[str, str]:
        """Re-planned generation -> the exported one, for the pools the upgrade renames."""
        return {
            p.replanned: p.exported for p in self.upgraded.values() if p.replanned and p.exported
        }


def deployed_basis(replanned: dict[str, Any], deployed: Deployed) -> DeployedBasis:
    """The deployed record `diff` compares with: `replanned` (the deployed values planned by the
    installed code) with every field the export carries in its place."""
    if deployed.record is None:
        return DeployedBasis(replanned)
    exported = deployed.record
    basis = DeployedBasis({**replanned, "pools": {}, "services": {}})
    replanned_pools = set()
    for name, pool in replanned["pools"].items():
        merged = _pool(name, pool, exported.get("pools", {}).get(name), basis, replanned)
        if merged is None:
            replanned_pools.add(name)
        basis.record["pools"][name] = merged or pool
    for name, service in replanned["services"].items():
        given = exported.get("services", {}).get(name)
        missing = _missing(given, SERVICE_IDENTITY)
        if missing:
            basis.notes.append(
                f"service {name}: the deployed stack's export lacks {', '.join(missing)}: "
                "compared as this release plans the deployed values"
            )
            basis.record["services"][name] = service
            continue
        assert isinstance(given, dict)
        merged = {**service, **{k: given[k] for k in SERVICE_FIELDS if k in given}}
        if merged["pod"] != service["pod"]:
            basis.pods[(str(merged.get("namespace") or "inference"), name)] = str(merged["pod"])
        if service["pool"] in replanned_pools:
            merged["generation"] = service["generation"]  # as its pool is compared
        basis.record["services"][name] = merged
    if "gateway" in exported:
        basis.record["gateway"] = exported["gateway"]
    elif replanned.get("gateway") is not None:
        basis.notes.append(
            "gateway: the deployed stack's export lacks it: compared as this release plans the "
            "deployed values"
        )
    return basis


def _missing(given: object, needed: tuple[str, ...]) -> list[str]:
    if not isinstance(given, Mapping):
        return ["its entry"]
    return [key for key in needed if key not in given]


def _pool(
    name: str, pool: dict[str, Any], given: object, basis: DeployedBasis, replanned: dict[str, Any]
) -> dict[str, Any] | None:
    """The pool's exported fields over the re-planned ones (None: the export cannot say)."""
    missing = _missing(given, POOL_IDENTITY)
    if isinstance(given, Mapping) and not isinstance(given.get("replacement_inputs", {}), Mapping):
        missing.append("replacement_inputs as a mapping")
    if missing:
        basis.notes.append(
            f"pool {name}: the deployed stack's export lacks {', '.join(missing)}: its generation "
            "is compared as this release plans the deployed values (a new generation the upgrade "
            "alone brings does not show)"
        )
        return None
    assert isinstance(given, dict)
    merged = {**pool, **{k: given[k] for k in (*POOL_IDENTITY, *POOL_FIELDS) if k in given}}
    if "legacy_inputs" not in given and pool.get("legacy_inputs"):
        # What pools had before a key joined the generation does not depend on the release
        # that deployed them: this release knows it for every key it added.
        basis.notes.append(
            f"pool {name}: the deployed stack's export lacks legacy_inputs: the values of inputs "
            "left out of its generation are named as this release knows them"
        )
    if merged["generation"] != pool["generation"]:
        old, new = merged["replacement_inputs"], pool["replacement_inputs"]
        changed = tuple(sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k)))
        added = tuple(k for k in changed if k not in old)
        basis.upgraded[name] = UpgradedPool(
            merged["generation"], pool["generation"], changed, keep_old_nodes(added, replanned)
        )
    return merged


def keep_old_nodes(added: tuple[str, ...], record: Mapping[str, Any]) -> str | None:
    """The stack keys that keep a pool's running nodes when the inputs `added` joined its
    generation (its nodes run what pools had before those keys), as CHANGELOG.md names them
    (0.3.0, "Upgrading from 0.2.0": the node identity)."""
    keys = []
    if "cluster.nodeIdentity" in added:
        cluster = (record.get("values") or {}).get("cluster") or {}
        keys.append("`cluster.nodeServiceAccount: default`")
        if not (isinstance(cluster, Mapping) and cluster.get("create")):
            keys.append("`cluster.workloadIdentity: false` (a joined cluster)")
    if "cluster.imdsHopLimit" in added:
        keys.append(f"`cluster.imdsHopLimit: {LEGACY_HOP_LIMIT}`")
    return " and ".join(keys) or None
