"""What each cloud does to a pool's nodes when Pulumi creates, updates or deletes the pool, and
what its autoscaler does for replicas left pending.

Sources (the providers' documentation, as cited in DESIGN.md and the README's "Changing a
stack"): GKE and EKS apply label and taint updates to running nodes, OKE only to nodes it creates
later; GKE creates and removes nodes when a pool's locations change; an EKS launch-template version
replaces every node in the phases of the EKS User Guide's "Understand each phase of node updates"
(`EksRoll`); EKS and GKE scale in without PodDisruptionBudgets; deleting a pool drains its nodes:
GKE honouring budgets only with `respectPdbDuringNodePoolDeletion`, EKS for a few minutes, OKE for
its eviction grace (60 minutes)."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping

from msgspec import Struct, field

from mig_inference.names.labels import MIG_STATE_LABEL, POOL_LABEL, STARTUP_TAINT_PREFIX
from mig_inference.rollout.cluster import Cluster, Timings
from mig_inference.rollout.facts import PoolFacts
from mig_inference.rollout.model import Node, Taint
from mig_inference.rollout.node_pools import EKS_GROUP, GKE_POOL, OKE_POOL, PoolShape
from mig_inference.rollout.outcome import PoolOutcome
from mig_inference.rollout.resources import Resource

EKS_DELETE_DRAIN = 300.0
"""EKS drains a deleted node group's nodes for "a few minutes" before terminating them."""
EKS_EVICTION_LIMIT = 900.0
"""An EKS rolling update fails (`PodEvictionFailure`) when pods have not left in 15 minutes."""
EKS_CORDON_WAIT = 60.0
"""After a node's pods are evicted, EKS waits 60 seconds before terminating it."""
EXCLUDED_FROM_LOAD_BALANCERS = "node.kubernetes.io/exclude-from-external-load-balancers"


class EksRoll(Struct):
    """A managed node group's update to a new launch template version, in the EKS User Guide's
    phases ("Understand each phase of node updates"; default update strategy):
    - scale up: the Auto Scaling group grows by the larger of twice its Availability Zones and
      `updateConfig.maxUnavailable` (the guide's bound: "up to" two new nodes per zone), and
      the phase waits until every new node is Ready;
    - the old nodes are marked unschedulable and labelled
      `node.kubernetes.io/exclude-from-external-load-balancers=true`;
    - upgrade: `maxUnavailable` old nodes at a time are drained through the Eviction API
      (PodDisruptionBudgets decide); pods that do not leave within 15 minutes fail the update
      with `PodEvictionFailure` (no force flag), the old nodes stay cordoned; an emptied node is
      terminated 60 seconds later;
    - scale down: the group returns to its size, its surplus (new) nodes drained by EKS's
      termination drain (`EKS_DELETE_DRAIN`)."""

    shape: PoolShape
    old: list[str]
    surge: int
    max_unavailable: int
    phase: str = "scale up"
    batch: list[str] = field(default_factory=list)
    deadline: float = 0.0
    emptied_at: dict[str, float] = field(default_factory=dict)
    outcome: str | None = None
    """None while it runs, "" when done, else why it failed."""


class CloudPools(Struct):
    cluster: Cluster
    facts: Mapping[str, PoolFacts]
    timings: Timings
    outcome: Callable[[Mapping[str, str]], PoolOutcome]
    """The outcome of the pool a node with these labels belongs to."""
    shapes: dict[str, PoolShape] = field(default_factory=dict)
    """The current shape of every cloud pool, by physical name."""
    rolls: dict[str, EksRoll] = field(default_factory=dict)
    """Node groups replacing their nodes in place, by physical name."""

    def nodes(self, physical: str) -> list[Node]:
        return [n for n in self.cluster.live_nodes() if n.source == physical]

    def create(self, shape: PoolShape, count: int, *, running: bool = False) -> list[Node]:
        """`count` nodes more for the pool: booting, or (`running`) already on their layout."""
        self.shapes[shape.physical] = shape
        facts = self.facts.get(shape.labels.get(POOL_LABEL, ""))
        made = []
        existing = [n for n in self.cluster.nodes.values() if n.source == shape.physical]
        for index in range(len(existing), len(existing) + count):
            node = Node(
                f"{shape.physical}-{index}",
                dict(shape.labels),
                # A running node's startup taint came off when it advertised its slices.
                [t for t in shape.taints if not (running and _startup(t))],
                zone=shape.zones[index % len(shape.zones)] if shape.zones else "",
                source=shape.physical,
                gpus=facts.gpus_per_node if facts else 0,
                up_at=self.cluster.now if running else self.cluster.now + self.timings.node_boot,
            )
            config = node.config
            self.cluster.add_node(node, applied=config if running and config else None)
            if running and config:
                node.labels[MIG_STATE_LABEL] = "success"
            elif not running:
                self.outcome(node.labels).nodes_created += 1
                self.cluster.log(f"node {node.name} created ({shape.cloud} pool {shape.physical})")
            made.append(node)
        return made

    def steady_size(self, shape: PoolShape, replicas: int) -> int:
        """Nodes a deployed pool runs: its size, or for an autoscaled one what `replicas` of its
        services need, within its bounds."""
        if shape.min_nodes == shape.max_nodes:
            return shape.nodes
        facts = self.facts.get(shape.labels.get(POOL_LABEL, ""))
        template = Node("template", dict(shape.labels), [])
        per_node = (
            sum(facts.devices_with(template.config or "", template.labels).values()) if facts else 0
        )
        needed = math.ceil(replicas / per_node) if per_node else 0
        return max(shape.min_nodes, min(shape.max_nodes, needed))

    def take_away(self, node: Node, why: str, *, respect_budgets: bool, timeout: float) -> None:
        outcome = self.outcome(node.labels)
        outcome.nodes_drained += 1
        outcome.nodes_deleted += 1
        self.cluster.drain(
            node.name, why, delete=True, respect_budgets=respect_budgets, timeout=timeout
        )

    def delete(self, shape: PoolShape, resource: Resource) -> None:
        """Deleting the pool: each cloud's documented drain, then the nodes go."""
        if shape.type == GKE_POOL:
            drain = resource.inputs.get("nodeDrainConfigs") or [{}]
            respect = bool(drain[0].get("respectPdbDuringNodePoolDeletion"))
            timeout = self.timings.drain_timeout
        elif shape.type == EKS_GROUP:
            respect, timeout = True, EKS_DELETE_DRAIN
        else:
            settings = resource.inputs.get("nodeEvictionNodePoolSettings") or {}
            respect = settings.get("evictionGraceDuration") != "PT0M"
            timeout = self.timings.drain_timeout
        for node in self.nodes(shape.physical):
            self.take_away(
                node, f"pool {shape.physical} deleted", respect_budgets=respect, timeout=timeout
            )

    def update(
        self, old: PoolShape, new: PoolShape, *, recycled: bool, max_unavailable: int = 1
    ) -> None:
        """An in-place update of the pool: what reaches its running nodes (`recycled`: a new
        EKS launch-template version replaces every node, `EksRoll`)."""
        self.shapes[new.physical] = new
        nodes = self.nodes(new.physical)
        if new.type in (GKE_POOL, EKS_GROUP):
            for node in nodes:
                for key in set(old.labels) - set(new.labels):
                    node.labels.pop(key, None)
                node.labels.update(new.labels)
                kept = [t for t in node.taints if t not in old.taints]
                node.taints = kept + [t for t in new.taints if t not in kept]
        if new.type == GKE_POOL and set(old.zones) != set(new.zones):
            self._move_zones(new, nodes)
            return
        live = [n for n in nodes if not n.draining]
        if recycled and live:
            zones = max(len(set(new.zones)), 1)
            roll = EksRoll(
                new, sorted(n.name for n in live), max(2 * zones, max_unavailable), max_unavailable
            )
            self.rolls[new.physical] = roll
            for node in live:
                node.replaced = True
            self.create(new, roll.surge)
            self.cluster.log(
                f"node group {new.physical}: update to a new launch template version, "
                f"{roll.surge} new node(s) first"
            )
            return
        if new.nodes > len(live):
            self.create(new, new.nodes - len(live))
        elif new.nodes < len(live) and new.min_nodes == new.max_nodes:
            respect = new.type == OKE_POOL  # EKS and GKE scale in without budgets
            for node in sorted(live, key=lambda n: n.name)[new.nodes :]:
                self.take_away(
                    node,
                    "the pool shrank",
                    respect_budgets=respect,
                    timeout=self.timings.drain_timeout if respect else 0.0,
                )

    def _move_zones(self, new: PoolShape, nodes: list[Node]) -> None:
        """GKE creates and removes nodes as zones join and leave the pool."""
        for node in nodes:
            if node.zone not in new.zones:
                node.replaced = True
                self.take_away(node, "its zone left the pool", respect_budgets=False, timeout=0.0)
        per_zone = new.nodes // max(len(new.zones), 1)
        for zone in new.zones:
            missing = per_zone - len([n for n in nodes if n.zone == zone])
            if missing > 0:
                self.create(
                    PoolShape(new.type, new.physical, new.labels, new.taints, (zone,),
                              missing, missing, missing),
                    missing,
                )  # fmt: skip
        self.shapes[new.physical] = new

    def advance(self) -> None:
        """Every node group update in progress, one round."""
        for roll in self.rolls.values():
            if roll.outcome is None:
                self._advance_roll(roll)

    def roll_outcome(self, physical: str) -> str | None:
        """None while the pool's nodes are being replaced, "" when done (or none is), else why
        the update failed."""
        roll = self.rolls.get(physical)
        return "" if roll is None else roll.outcome

    def _advance_roll(self, roll: EksRoll) -> None:
        cluster, now = self.cluster, self.cluster.now
        old = [cluster.nodes[n] for n in roll.old if not cluster.nodes[n].gone]
        new = [n for n in self.nodes(roll.shape.physical) if n.name not in roll.old]
        if roll.phase == "scale up":
            if any(not n.ready(now) for n in new):
                return
            for node in old:
                node.unschedulable = True
                node.labels[EXCLUDED_FROM_LOAD_BALANCERS] = "true"
            cluster.log(f"node group {roll.shape.physical}: old nodes cordoned")
            roll.phase = "upgrade"
        if roll.phase == "upgrade":
            if not roll.batch:
                if not old:
                    roll.phase = "scale down"
                else:
                    roll.batch = [n.name for n in old[: roll.max_unavailable]]
                    roll.deadline = now + EKS_EVICTION_LIMIT
                    for name in roll.batch:
                        self.outcome(cluster.nodes[name].labels).nodes_drained += 1
                        cluster.drain(name, "update of its node group", delete=False,
                                      timeout=EKS_EVICTION_LIMIT)  # fmt: skip
            for name in list(roll.batch):
                if any(p.node == name for p in cluster.pods):
                    continue
                emptied = roll.emptied_at.setdefault(name, now)
                if now >= emptied + EKS_CORDON_WAIT:
                    self.outcome(cluster.nodes[name].labels).nodes_deleted += 1
                    cluster.remove_node(name, "update of its node group")
                    roll.batch.remove(name)
            if (
                roll.batch
                and now >= roll.deadline
                and any(name not in roll.emptied_at for name in roll.batch)
            ):
                stuck = [n for n in roll.batch if n not in roll.emptied_at]
                roll.outcome = (
                    f"EKS node group {roll.shape.physical} update failed: PodEvictionFailure "
                    f"(pods on {', '.join(stuck)} did not leave within 15 minutes: a "
                    "PodDisruptionBudget refused their eviction); its old nodes stay cordoned"
                )
                cluster.log(roll.outcome)
            return
        if roll.phase == "scale down":
            surplus = sorted(new, key=lambda n: n.name)[len(roll.old) :]
            for node in surplus:
                self.take_away(node, "its node group returned to its size", respect_budgets=True,
                               timeout=EKS_DELETE_DRAIN)  # fmt: skip
            roll.phase = "done"
        if roll.phase == "done" and not any(n.name in cluster.drains for n in new):
            roll.outcome = ""

    def settled(self, shape: PoolShape) -> bool:
        """Every node of the pool up, none still draining."""
        return not any(
            not n.ready(self.cluster.now) or n.name in self.cluster.drains
            for n in self.cluster.nodes.values()
            if n.source == shape.physical and not n.gone
        )

    def autoscale(self) -> None:
        """The cluster autoscaler: an autoscaled pool grows by a node while replicas are pending
        that a new node of it would take (EKS's Cluster Autoscaler, GKE's, OKE's add-on). It is
        not asked to shrink: nodes of a pool that is deleted go with it."""
        pending = [
            p for p in self.cluster.pods if p.node is None and p.active and p.template.resource
        ]
        if not pending:
            return
        for shape in list(self.shapes.values()):
            nodes = self.nodes(shape.physical)
            if shape.min_nodes == shape.max_nodes or len(nodes) >= shape.max_nodes:
                continue
            # A GPU node counts as coming up until it advertises its devices (the Cluster
            # Autoscaler's `FilterOutNodesWithUnreadyResources`): no second node meanwhile.
            if any(not n.ready(self.cluster.now) or not n.devices for n in nodes):
                continue
            # The autoscaler leaves startup taints out of its templates (`SanitizeTaints`).
            template = Node("template", dict(shape.labels), [t for t in shape.taints
                                                              if not _startup(t)])  # fmt: skip
            facts = self.facts.get(template.pool or "")
            offered = facts.devices_with(template.config or "", template.labels) if facts else {}
            if any(
                p.template.admits(template) and offered.get(p.template.resource or "", 0) > 0
                for p in pending
            ):
                self.create(shape, 1)
                self.cluster.log(f"autoscaler: pool {shape.physical} grows for pending replicas")


def _startup(taint: Taint) -> bool:
    """A Cluster Autoscaler startup taint (`STARTUP_TAINT_PREFIX`)."""
    return taint.key.startswith(STARTUP_TAINT_PREFIX)
