"""The project's two Jobs as the simulator runs them: the MIG-ready gate, and the in-place
re-partitioning of a pool. They follow the algorithms of `mig_inference/kube/scripts/gate.sh` and
`repartition.sh` (whose tests run the scripts themselves against a fake API server), the
watchdog for a MIG manager wedged in `pending` included."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from msgspec import Struct, field

from mig_inference.names.labels import (
    DEVICE_PLUGIN_DEPLOY_LABEL,
    DRA_NODE_LABEL,
    MIG_CONFIG_LABEL,
    MIG_STATE_LABEL,
    POOL_LABEL,
)
from mig_inference.rollout.cluster import Cluster
from mig_inference.rollout.model import Node

CORDONED_FOR = "mig-inference.io/cordoned-for"
"""The annotation the re-partitioning Job marks its own cordons with."""


def job_env(inputs: Mapping[str, Any]) -> dict[str, str]:
    containers = inputs.get("spec", {}).get("template", {}).get("spec", {}).get("containers", [])
    return {e["name"]: str(e.get("value", "")) for c in containers for e in c.get("env") or []}


def _matches(node: Node, selector: str) -> bool:
    pairs = [p.split("=", 1) for p in selector.split(",") if p]
    return all(node.labels.get(k) == v for k, v in pairs)


class JobRun(Struct):
    """A Job in progress: `outcome` is None until it ends ("complete" or "failed: ...")."""

    outcome: str | None = None
    log: list[str] = field(default_factory=list)

    def advance(self, cluster: Cluster) -> None:
        raise NotImplementedError


class PendingWatch(Struct):
    """The scripts' watchdog for the MIG manager's `pending` wedge (NVIDIA/gpu-operator#2833): a
    node `pending` for `limit` seconds gets its MIG manager restarted once."""

    limit: float = 600.0
    since: dict[str, float] = field(default_factory=dict)
    restarted: set[str] = field(default_factory=set)

    def check(self, cluster: Cluster, node: Node) -> bool:
        """Watch `node`; True when it stays `pending` past the limit after its restart."""
        if node.state != "pending":
            self.since.pop(node.name, None)
            return False
        since = self.since.setdefault(node.name, cluster.now)
        if cluster.now - since < self.limit:
            return False
        if node.name in self.restarted:
            return True
        self.restarted.add(node.name)
        self.since[node.name] = cluster.now
        cluster.restart_mig_manager(node.name)
        cluster.log(f"node {node.name}: pending without moving; its MIG manager restarted")
        return False


class GateRun(JobRun):
    targets: list[tuple[str, str, str, int]] = field(default_factory=list)
    deadline: float = 0.0
    dra_pools: set[str] = field(default_factory=set)
    """Pools whose devices NVIDIA's DRA driver publishes (a `dra` sixth word)."""
    watch: PendingWatch = field(default_factory=PendingWatch)

    @classmethod
    def of(cls, env: Mapping[str, str], now: float) -> GateRun:
        targets = []
        dra_pools = set()
        for line in env.get("GATE_TARGETS", "").splitlines():
            parts = line.split()
            if len(parts) >= 4:
                targets.append((parts[0], parts[1], parts[2], int(parts[3])))
            if parts[5:6] == ["dra"]:
                dra_pools.add(parts[0])
        deadline = now + float(env.get("GATE_TIMEOUT_SECONDS", "1800"))
        watch = PendingWatch(float(env.get("GATE_PENDING_LIMIT_SECONDS", "600")))
        return cls(targets=targets, deadline=deadline, dra_pools=dra_pools, watch=watch)

    def advance(self, cluster: Cluster) -> None:
        ready = True
        for pool, selector, config, want in self.targets:
            nodes = [n for n in cluster.live_nodes() if _matches(n, selector)]
            for node in nodes:
                if node.config == config:
                    self.watch.check(cluster, node)  # the gate waits on after a second wedge
            failed = [n for n in nodes if n.config == config and n.state == "failed"]
            if failed:
                self.outcome = (
                    f"failed: MIG config {config} failed on node {failed[0].name} (pool {pool})"
                )
                return
            applied = [
                n
                for n in nodes
                if n.config == config and n.state == "success" and n.applied == config
            ]
            if pool in self.dra_pools:
                # A plugin that published before the layout was applied is restarted once.
                for node in applied:
                    if node.published != config:
                        cluster.restart_dra_plugin(node.name)
            done = [n for n in applied if pool not in self.dra_pools or n.published == config]
            if len(done) < want:
                ready = False
        if ready:
            self.outcome = "complete"
        elif cluster.now >= self.deadline:
            self.outcome = "failed: timed out waiting for nodes to report success"


class RepartitionRun(JobRun):
    """Batch by batch: cordon (marked as ours) the batch and hold the nodes still to be switched
    cordoned until their turn, evict the pods holding devices (budgets decide: the pool's own
    services' budgets relaxed while the Job runs), relabel (clearing the state), wait for success
    on the target, uncordon, and let the pool's services settle before the next batch; then
    release the nodes an existing pool no longer names."""

    target: str = ""
    selector: str = ""
    names: tuple[str, ...] = ()
    max_unavailable: int = 1
    drain_timeout: float = 1800.0
    reconfigure_timeout: float = 1800.0
    dra: bool = False
    """The pool's devices are NVIDIA's DRA driver's: its kubelet plugin is restarted on a node
    once the layout is applied there. A node whose labels run the device plugin is switched
    (and back, on a device-plugin pool): the running plugin off, the other on once nothing
    offers the node's devices."""
    plugin_bounced: bool = False
    """The MIG manager stops and restarts the kubelet plugin around the change (its label
    `nvidia.com/gpu.deploy.client`, mig-manager v0.15.0): the Job does not restart it."""
    switching: list[str] = field(default_factory=list)
    """Nodes of the batch whose running plugin was turned off, waiting to be offered by none."""
    switched: list[str] = field(default_factory=list)
    """Nodes of the batch switched to the other plugin with their layout kept: no MIG manager
    run there."""
    named_pool: str = ""
    """Existing pools: a node on the target gets the pool's label; nodes carrying it that `names`
    no longer holds are released once the pool is done (cordoned, drained, the pool label
    removed, uncordoned)."""
    watch: PendingWatch = field(default_factory=PendingWatch)
    budget_selector: str = ""
    """The pool's services' PodDisruptionBudgets (strict otherwise): those whose replicas on a
    batch have no room on the switched nodes relaxed to every replica for that batch's drain,
    restored after it and when the Job ends, however it ends."""
    relaxed: dict[tuple[str, str], int] = field(default_factory=dict)
    """The budgets relaxed for the drain in progress, with the value each gets back after it."""
    widened: bool = False
    """The drain's budgets that still refused were relaxed at its deadline (once per drain)."""
    held: list[str] = field(default_factory=list)
    """Nodes still to be switched that the Job cordoned until their own batch, so evicted
    replicas land only on switched nodes (the script's `hold_rest`)."""
    pacing: bool = False
    """A batch is done: the pool's services settle before the next one is drained."""
    pace_deadline: float = 0.0
    batch: list[str] = field(default_factory=list)
    phase: str = "pick"
    deadline: float = 0.0
    done: list[str] = field(default_factory=list)
    released: list[str] = field(default_factory=list)

    @classmethod
    def of(cls, env: Mapping[str, str]) -> RepartitionRun:
        node_timeout = float(env.get("NODE_TIMEOUT_SECONDS", "1800"))
        return cls(
            target=env.get("TARGET_CONFIG", ""),
            selector=env.get("REPARTITION_SELECTOR", ""),
            names=tuple(env.get("REPARTITION_NODES", "").split()),
            max_unavailable=int(env.get("MAX_UNAVAILABLE", "1")),
            drain_timeout=float(env.get("DRAIN_TIMEOUT_SECONDS", node_timeout)),
            reconfigure_timeout=float(env.get("RECONFIGURE_TIMEOUT_SECONDS", node_timeout)),
            named_pool=env.get("NAMED_POOL", ""),
            dra=bool(env.get("DRA_POOL")),
            plugin_bounced=bool(env.get("DRA_PLUGIN_BOUNCED")),
            watch=PendingWatch(float(env.get("PENDING_LIMIT_SECONDS", "600"))),
            budget_selector=env.get("BUDGET_SELECTOR", ""),
        )

    def _pool(self, cluster: Cluster) -> list[Node]:
        if self.selector:
            return sorted(
                (n for n in cluster.live_nodes() if _matches(n, self.selector)),
                key=lambda n: n.name,
            )
        return [
            cluster.nodes[n] for n in self.names if n in cluster.nodes and not cluster.nodes[n].gone
        ]

    def _holders(self, cluster: Cluster, node: str) -> list[Any]:
        return [p for p in cluster.pods if p.node == node and p.template.resource]

    def advance(self, cluster: Cluster) -> None:
        self._advance(cluster)
        if self.outcome is not None:
            self._restore(cluster)
            for name in self.held:
                if name not in self.batch and name not in self.done:
                    self._uncordon(cluster, name)

    def _ours(self, cluster: Cluster) -> dict[tuple[str, str], Any]:
        """The pool's services' Deployments whose budgets the Job may relax."""
        pairs = [p.split("=", 1) for p in self.budget_selector.split(",") if p]
        return {
            d.key: d
            for d in cluster.deployments.values()
            if pairs and d.budget is not None and all(d.labels.get(k) == v for k, v in pairs)
        }

    def _relax(self, cluster: Cluster, keys: set[tuple[str, str]]) -> None:
        ours = self._ours(cluster)
        fresh = [key for key in sorted(keys) if key in ours and key not in self.relaxed]
        for key in fresh:
            self.relaxed[key] = ours[key].budget
            ours[key].budget = max(ours[key].replicas, 1)
        if fresh:
            cluster.log(
                f"re-partitioning Job: {len(fresh)} budgets relaxed for the drain of "
                + ", ".join(self.batch)
            )

    def _loosen(self, cluster: Cluster) -> None:
        """As the script's `loosen`: per device the batch's replicas hold, when the switched
        schedulable nodes have fewer free ones than the batch has replicas holding it, the
        budgets of those replicas' services are relaxed for this drain; the others stay strict
        (their replicas leave one at a time onto the free devices). While a replica of the
        pool's services is Pending (it waits for the Job to end), every one is relaxed."""
        pods = [p for name in self.batch for p in self._holders(cluster, name) if p.active]
        ours = set(self._ours(cluster))
        # A replica Pending for want of room waits for the Job to end: no budget held strict.
        hurry = any(
            p.node is None and p.active and (p.namespace, p.deployment) in ours
            for p in cluster.pods
        )
        switched = [
            n
            for n in self._pool(cluster)
            if (n.name in self.done or self._on_target(cluster, n)) and not n.unschedulable
        ]
        loose: set[tuple[str, str]] = set()
        for resource in sorted({p.template.resource for p in pods if p.template.resource}):
            holding = [p for p in pods if p.template.resource == resource]
            room = 0 if hurry else sum(max(cluster.free(n, resource), 0) for n in switched)
            if len(holding) > room:
                loose |= {(p.namespace, p.deployment) for p in holding}
        self._relax(cluster, loose)

    def _restore(self, cluster: Cluster) -> None:
        for key, budget in self.relaxed.items():
            if key in cluster.deployments:
                cluster.deployments[key].budget = budget
        if self.relaxed:
            cluster.log("re-partitioning Job: budgets restored")
        self.relaxed = {}

    def _advance(self, cluster: Cluster) -> None:
        if self.phase == "pick":
            for node in self._pool(cluster):
                if self._on_target(cluster, node):
                    self._join(cluster, node.name)
            todo = [
                n
                for n in self._pool(cluster)
                if n.name not in self.done and not self._on_target(cluster, n)
            ]
            if todo and self.pacing:
                if not self._settled(cluster):
                    if cluster.now >= self.pace_deadline:
                        self.outcome = (
                            "failed: the pool's services did not settle before the drain of "
                            + todo[0].name
                        )
                    return
                self.pacing = False
            if not todo:
                leaving = self._leaving(cluster)
                if not leaving:
                    self.outcome = "complete"
                    return
                self.batch, self.phase = leaving, "release"
            else:
                # The emptiest first (as the script's `emptiest_first`): a node switched early
                # with room takes the next batch's replicas at once.
                todo.sort(key=lambda n: len(self._holders(cluster, n.name)))
                self.batch = [n.name for n in todo[: self.max_unavailable]]
                self.phase = "drain"
            self._cordon(cluster)
            if self.phase == "drain":
                self._hold(cluster, [n.name for n in todo[self.max_unavailable :]])
            self._loosen(cluster)
            self.deadline = cluster.now + self.drain_timeout
            self.widened = False
        if self.phase in ("drain", "release"):
            held = [p for name in self.batch for p in self._holders(cluster, name)]
            for pod in held:
                if pod.active and cluster.eviction_allowed(pod):
                    cluster.terminate(pod, "evicted by the re-partitioning Job", evicted=True)
            if any(self._holders(cluster, name) for name in self.batch):
                if cluster.now >= self.deadline and not self.widened:
                    # As the script's `widen`: the pool's budgets that still refuse are relaxed
                    # once, for one more drain timeout.
                    self.widened = True
                    self._relax(cluster, {(p.namespace, p.deployment) for p in held})
                    self.deadline = cluster.now + self.drain_timeout
                    return
                if cluster.now >= self.deadline:
                    for name in self.batch:
                        self._uncordon(cluster, name)
                    self.outcome = (
                        f"failed: drain of {', '.join(self.batch)} did not finish (a "
                        "PodDisruptionBudget refused the evictions); uncordoned, not "
                        + ("released" if self.phase == "release" else "relabelled")
                    )
                return
            self._restore(cluster)
            if self.phase == "release":
                for name in self.batch:
                    cluster.set_labels(name, {POOL_LABEL: None})
                    self._uncordon(cluster, name)
                    self.released.append(name)
                cluster.log(f"re-partitioning Job: released {', '.join(self.batch)}")
                self.outcome = "complete"
                return
            self._switch_off(cluster)
            self.phase, self.deadline = "switch", cluster.now + self.reconfigure_timeout
        if self.phase == "switch":
            offered = [n for n in self.switching if not self._unoffered(cluster.nodes[n])]
            if offered:
                if cluster.now >= self.deadline:
                    self.outcome = (
                        f"failed: node {offered[0]}: its old plugin still offers its devices; "
                        "it stays cordoned"
                    )
                return
            self._switch_on(cluster)
            for name in self.batch:
                node = cluster.nodes[name]
                if name in self.switched:
                    continue
                if node.config != self.target:
                    cluster.set_labels(name, {MIG_CONFIG_LABEL: self.target, MIG_STATE_LABEL: None})
                else:
                    cluster.set_labels(name, {MIG_STATE_LABEL: None})
                    cluster.restart_mig_manager(name)
            self.phase = "wait"
        if self.phase == "wait":
            for name in list(self.batch):
                node = cluster.nodes[name]
                if node.gone:
                    self.batch.remove(name)
                elif node.state == "failed":
                    self.outcome = (
                        f"failed: node {name} reports {MIG_STATE_LABEL}=failed; it stays cordoned"
                    )
                    return
                elif self.watch.check(cluster, node):
                    self.outcome = (
                        f"failed: node {name} stays {MIG_STATE_LABEL}=pending after its MIG "
                        "manager was restarted; it stays cordoned"
                    )
                    return
            for name in self.batch:
                node = cluster.nodes[name]
                applied = node.state == "success" and node.applied == self.target
                starting = name in self.switched and node.published is None
                # With the MIG manager's pause of the plugin's label, its DaemonSet restarts it.
                if (
                    self.dra
                    and not self.plugin_bounced
                    and applied
                    and node.published != self.target
                    and not starting
                ):
                    cluster.restart_dra_plugin(name)
            waiting = [n for n in self.batch if not self._on_target(cluster, cluster.nodes[n])]
            if waiting:
                if cluster.now >= self.deadline:
                    self.outcome = (
                        f"failed: node {waiting[0]} did not reach success in time; it stays "
                        "cordoned"
                    )
                return
            for name in self.batch:
                self._join(cluster, name)
                self._uncordon(cluster, name)
                self.done.append(name)
            cluster.log(f"re-partitioning Job: {', '.join(self.batch)} on {self.target}")
            self.pacing = True
            self.pace_deadline = cluster.now + self.reconfigure_timeout
            self.phase = "pick"

    def _on_plugin(self, node: Node) -> bool:
        """As the script's `node_switched`: the node's labels run the pool's plugin only."""
        plugin_off = node.labels.get(DEVICE_PLUGIN_DEPLOY_LABEL) == "false"
        return node.dra and plugin_off if self.dra else not node.dra and not plugin_off

    def _switch_off(self, cluster: Cluster) -> None:
        """Turn the running plugin off on each node of the batch that runs the other one."""
        self.switching = [n for n in self.batch if not self._on_plugin(cluster.nodes[n])]
        self.switched = []
        for name in self.switching:
            off = {DEVICE_PLUGIN_DEPLOY_LABEL: "false"} if self.dra else {DRA_NODE_LABEL: None}
            cluster.set_labels(name, dict(off))
            cluster.log(f"node {name}: {'device plugin' if self.dra else 'DRA kubelet plugin'} off")

    @staticmethod
    def _unoffered(node: Node) -> bool:
        """Nothing offers the node's devices: no device plugin advertises them (a node not yet
        labelled for DRA shows only those), no slice is published."""
        return not node.devices and node.published is None

    def _switch_on(self, cluster: Cluster) -> None:
        for name in self.switching:
            on = {DRA_NODE_LABEL: "dra"} if self.dra else {DEVICE_PLUGIN_DEPLOY_LABEL: "true"}
            cluster.set_labels(name, dict(on))
            cluster.switched[name] = "dra" if self.dra else "device-plugin"
            node = cluster.nodes[name]
            cluster.log(f"node {name}: {'DRA kubelet plugin' if self.dra else 'device plugin'} on")
            if node.config == self.target and node.state == "success":
                self.switched.append(name)
        self.switching = []

    def _settled(self, cluster: Cluster) -> bool:
        """As the script's `pace`: none of the pool's services' replicas bound to a node is still
        loading, wherever, and none Pending could land on a schedulable node already switched."""
        pairs = [p.split("=", 1) for p in self.budget_selector.split(",") if p]
        ours = {
            d.key
            for d in cluster.deployments.values()
            if pairs and all(d.labels.get(k) == v for k, v in pairs)
        }
        pods = [p for p in cluster.pods if p.active and (p.namespace, p.deployment) in ours]
        nodes = [
            n
            for n in self._pool(cluster)
            if (n.name in self.done or self._on_target(cluster, n)) and not n.unschedulable
        ]
        if any(p.node is not None and not p.ready(cluster.now) for p in pods):
            return False
        return not any(
            p.node is None and p.template.resource and cluster.free(n, p.template.resource) > 0
            for p in pods
            for n in nodes
        )

    def _leaving(self, cluster: Cluster) -> list[str]:
        if not self.named_pool:
            return []
        return sorted(
            n.name
            for n in cluster.live_nodes()
            if n.pool == self.named_pool and n.name not in self.names
        )

    def _join(self, cluster: Cluster, name: str) -> None:
        if self.named_pool:
            cluster.set_labels(name, {POOL_LABEL: self.named_pool})

    def _hold(self, cluster: Cluster, names: list[str]) -> None:
        """As the script's `hold_rest`: the nodes still to be switched, cordoned until their turn
        (nodes someone else cordoned are left as they are)."""
        held = [n for n in names if n not in self.held and not cluster.nodes[n].unschedulable]
        for name in held:
            cluster.nodes[name].unschedulable = True
            cluster.nodes[name].annotations[CORDONED_FOR] = self.target
            self.held.append(name)
        if held:
            cluster.log(f"re-partitioning Job: cordoned {', '.join(held)} until their turn")

    def _cordon(self, cluster: Cluster) -> None:
        for name in self.batch:
            node = cluster.nodes[name]
            if not node.unschedulable:
                node.unschedulable = True
                node.annotations[CORDONED_FOR] = self.target
        cluster.log(f"re-partitioning Job: cordoned {', '.join(self.batch)}")

    def _on_target(self, cluster: Cluster, node: Node) -> bool:
        """As the script's `on_target`: the label, `success`, the layout, and the planned devices
        advertised (the device plugin back; on a DRA pool, published by the restarted plugin)."""
        return (
            self._on_plugin(node)
            and node.config == self.target
            and node.state == "success"
            and node.applied == self.target
            and (not self.dra or node.published == self.target)
            and node.devices == cluster.devices_of(node, self.target)
        )

    @staticmethod
    def _uncordon(cluster: Cluster, name: str) -> None:
        node = cluster.nodes[name]
        if node.annotations.pop(CORDONED_FOR, None) is not None:
            node.unschedulable = False
