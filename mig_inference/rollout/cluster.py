"""A running cluster, advanced tick by tick: nodes boot, drain and go; NVIDIA's MIG manager
applies the layout a node's label names; the scheduler binds replicas to nodes that admit them and
still have a free device; Deployments replace replicas one at a time; evictions ask the
PodDisruptionBudget; a NoExecute taint evicts the pods that do not tolerate it.

Durations are assumptions (Timings), not measurements: the simulator reports orders of events and
the replicas serving between them; its times are estimates."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from mig_inference.labels import MIG_CONFIG_LABEL, MIG_STATE_LABEL
from mig_inference.rollout.model import Deployment, Node, Pod, Taint, device_counts

TICK = 10.0
"""Seconds between two rounds of the controllers."""


@dataclass(frozen=True)
class Timings:
    """How long things take. Assumed orders of magnitude, to be replaced by measurements: only
    a real cluster knows them."""

    node_boot: float = 600.0
    """A GPU node created, joined and its drivers ready."""
    mig_apply: float = 120.0
    """The MIG manager pausing its operands, applying a layout and restarting them."""
    mig_reboot: float = 300.0
    """A node rebooting for a MIG mode change (`WITH_REBOOT`)."""
    pod_grace: float = 60.0
    """A replica terminating (the engines' termination grace period)."""
    drain_timeout: float = 3600.0
    """How long a cloud waits for PodDisruptionBudgets when it deletes nodes."""
    helm_release: float = 120.0
    """A Helm release installed or upgraded."""
    cloud_update: float = 60.0
    """A cloud API update that touches no node (labels, sizes)."""
    replica_start: float = 300.0
    """A replica bound to a node until Ready: its image pulled, its model loaded."""


@dataclass(frozen=True)
class Event:
    time: float
    text: str


@dataclass
class MigManager:
    """One node's MIG manager (NVIDIA k8s-mig-manager v0.15.0): it applies the value of
    `nvidia.com/mig.config` when the value changes, and once when its pod starts; it writes only
    `nvidia.com/mig.config.state`, which names no config."""

    seen: str | None = None
    """The label value its informer last saw."""
    queued: str | None = None
    running: str | None = None
    done_at: float = 0.0
    outcome: str = ""
    rebooting_until: float | None = None
    full_runs: int = 0
    """Layouts this pod applied in full. After one, v0.15.0 leaves its operands paused when a
    later run fails (process-wide flags it never resets), until the pod restarts."""


@dataclass
class Drain:
    """A node the cloud (or a Job) takes away: cordoned, emptied, then deleted."""

    node: str
    deadline: float
    respect_budgets: bool
    delete: bool
    """Delete the node once empty (a cloud scale-in or pool deletion)."""
    reason: str


@dataclass
class Cluster:
    timings: Timings
    devices_of: Callable[[Node, str], dict[str, int]]
    """What the device plugin advertises on a node with this MIG config applied."""
    known_configs: Callable[[str], bool]
    """Whether a config name is in the mig-parted config the MIG manager reads."""
    now: float = 0.0
    nodes: dict[str, Node] = field(default_factory=dict)
    pods: list[Pod] = field(default_factory=list)
    deployments: dict[tuple[str, str], Deployment] = field(default_factory=dict)
    managers: dict[str, MigManager] = field(default_factory=dict)
    drains: dict[str, Drain] = field(default_factory=dict)
    events: list[Event] = field(default_factory=list)
    with_reboot: bool = True
    pod_counter: int = 0
    evicted: dict[str, int] = field(default_factory=dict)
    """Replicas taken off a node against their will (drains, evictions, NoExecute taints,
    deleted nodes), per pool."""

    # -- bookkeeping -----------------------------------------------------------------------
    def log(self, text: str) -> None:
        self.events.append(Event(self.now, text))

    def live_nodes(self) -> list[Node]:
        return [n for n in self.nodes.values() if not n.gone]

    def pods_of(self, deployment: Deployment) -> list[Pod]:
        return [
            p
            for p in self.pods
            if p.namespace == deployment.namespace and p.deployment == deployment.name
        ]

    def serving(self) -> dict[str, int]:
        """Ready replicas per service."""
        counts: dict[str, int] = {}
        for deployment in self.deployments.values():
            counts.setdefault(deployment.service, 0)
        for pod in self.pods:
            if pod.ready(self.now):
                counts[pod.service] = counts.get(pod.service, 0) + 1
        return counts

    # -- nodes -----------------------------------------------------------------------------
    def add_node(self, node: Node, applied: str | None = None) -> None:
        """A node joins; with `applied`, its GPUs already have that layout (a running node)."""
        self.nodes[node.name] = node
        self.managers[node.name] = MigManager(seen=node.config if applied else None)
        if applied is not None:
            node.applied = applied
            node.devices = self.devices_of(node, applied)
        elif node.config is None:
            node.devices = self.devices_of(node, "")

    def remove_node(self, name: str, why: str) -> None:
        node = self.nodes[name]
        node.gone = True
        node.devices = {}
        for pod in [p for p in self.pods if p.node == name]:
            if pod.active:
                self.evicted[node.pool or ""] = self.evicted.get(node.pool or "", 0) + 1
            self.pods.remove(pod)
        self.drains.pop(name, None)
        self.log(f"node {name} deleted ({why})")

    def set_labels(self, name: str, labels: dict[str, str | None]) -> None:
        node = self.nodes[name]
        for key, value in labels.items():
            if value is None:
                node.labels.pop(key, None)
            else:
                node.labels[key] = value

    def set_taints(self, name: str, taints: list[Taint]) -> None:
        self.nodes[name].taints = list(taints)

    def restart_mig_manager(self, name: str) -> None:
        """A new MIG manager pod applies the label's value once, whatever it was before."""
        self.managers[name] = MigManager()
        node = self.nodes[name]
        if node.applied is not None and not node.devices:
            node.devices = self.devices_of(node, node.applied)

    def drain(self, name: str, why: str, *, delete: bool, respect_budgets: bool = True,
              timeout: float | None = None) -> None:  # fmt: skip
        if name in self.drains or self.nodes[name].gone:
            return
        node = self.nodes[name]
        node.unschedulable = True
        node.draining = True
        deadline = self.now + (self.timings.drain_timeout if timeout is None else timeout)
        self.drains[name] = Drain(name, deadline, respect_budgets, delete, why)
        self.log(f"node {name} cordoned and drained ({why})")

    # -- evictions ---------------------------------------------------------------------------
    def eviction_allowed(self, pod: Pod) -> bool:
        deployment = self.deployments.get((pod.namespace, pod.deployment))
        if deployment is None or deployment.budget is None:
            return True
        healthy = sum(1 for p in self.pods_of(deployment) if p.ready(self.now))
        desired_healthy = deployment.replicas - deployment.budget
        # Evicting a healthy replica takes one from `healthy`; an unhealthy one takes none.
        return healthy - (1 if pod.ready(self.now) else 0) >= desired_healthy

    def terminate(self, pod: Pod, why: str, *, evicted: bool = False) -> None:
        if evicted and pod.node is not None and pod.terminating_until is None:
            pool = self.nodes[pod.node].pool or ""
            self.evicted[pool] = self.evicted.get(pool, 0) + 1
        if pod.terminating_until is None:
            pod.terminating_until = self.now + self.timings.pod_grace
            if pod.node is None:
                pod.terminating_until = self.now
            self.log(f"pod {pod.namespace}/{pod.name} terminated ({why})")

    # -- the controllers, one round ---------------------------------------------------------
    def tick(self) -> None:
        self.now += TICK
        self._mig_managers()
        self._no_execute()
        self._pods()
        self._drains()
        self._deployments()
        self._schedule()

    def _mig_managers(self) -> None:
        for name, manager in self.managers.items():
            node = self.nodes[name]
            if node.gone or not node.ready(self.now):
                continue
            if manager.rebooting_until is not None:
                if self.now < manager.rebooting_until:
                    continue
                manager.rebooting_until = None
                manager.seen = None  # the pod starts again: it re-applies the label's value
            value = node.config
            if value != manager.seen:
                manager.seen = value
                if value:
                    manager.queued = value
            if manager.running is None and manager.queued is not None:
                self._start_mig_run(node, manager, manager.queued)
                manager.queued = None
            elif manager.running is not None and self.now >= manager.done_at:
                self._finish_mig_run(node, manager)

    def _start_mig_run(self, node: Node, manager: MigManager, value: str) -> None:
        if not self.known_configs(value):
            node.labels[MIG_STATE_LABEL] = "failed"
            self.log(f"node {node.name}: MIG config {value} not found: failed")
            return
        if node.applied == value:
            node.labels[MIG_STATE_LABEL] = "success"
            return
        held = device_counts(self.pods, node.name)
        node.labels[MIG_STATE_LABEL] = "pending"
        node.devices = {}  # its operands (the device plugin among them) are paused
        manager.running = value
        manager.outcome = "failed" if held else "success"
        mode_change = (node.applied in (None, "all-disabled")) != (value == "all-disabled")
        manager.done_at = self.now + self.timings.mig_apply
        if mode_change and self.with_reboot and not held and node.applied is not None:
            node.labels[MIG_STATE_LABEL] = "rebooting"
            manager.rebooting_until = self.now + self.timings.mig_reboot
            manager.done_at = manager.rebooting_until + self.timings.mig_apply
        self.log(
            f"node {node.name}: MIG manager applies {value}"
            + (f" while pods hold its devices ({held})" if held else "")
        )

    def _finish_mig_run(self, node: Node, manager: MigManager) -> None:
        value, manager.running = manager.running, None
        assert value is not None
        if manager.outcome == "success":
            node.applied = value
            node.labels[MIG_STATE_LABEL] = "success"
            node.devices = self.devices_of(node, value)
            manager.full_runs += 1
            self.log(f"node {node.name}: {value} applied (success)")
        else:
            node.labels[MIG_STATE_LABEL] = "failed"
            if node.applied is not None and manager.full_runs == 0:
                node.devices = self.devices_of(node, node.applied)
            self.log(f"node {node.name}: {value} failed: its devices were in use")

    def _no_execute(self) -> None:
        for pod in self.pods:
            if pod.node is None or not pod.active:
                continue
            node = self.nodes[pod.node]
            bad = [
                t for t in node.taints if t.effect == "NoExecute" and not pod.template.tolerates(t)
            ]
            if bad:
                self.terminate(pod, f"NoExecute taint {bad[0]} on node {node.name}", evicted=True)

    def _pods(self) -> None:
        for pod in list(self.pods):
            if pod.terminating_until is not None and self.now >= pod.terminating_until:
                self.pods.remove(pod)

    def _drains(self) -> None:
        for name, drain in list(self.drains.items()):
            on_node = [p for p in self.pods if p.node == name and p.active]
            for pod in on_node:
                if not drain.respect_budgets or self.eviction_allowed(pod):
                    self.terminate(pod, f"drained from {name}", evicted=True)
            still = [p for p in self.pods if p.node == name]
            if not still and drain.delete:
                self.remove_node(name, drain.reason)
            elif not still:
                del self.drains[name]
                self.nodes[name].draining = False
            elif self.now >= drain.deadline:
                if drain.delete:
                    self.remove_node(name, f"{drain.reason}; its drain timed out")
                else:
                    del self.drains[name]

    def _deployments(self) -> None:
        for deployment in self.deployments.values():
            pods = self.pods_of(deployment)
            active = [p for p in pods if p.active]
            if deployment.deleted:
                for pod in active:
                    self.terminate(pod, f"Deployment {deployment.name} deleted")
                continue
            current = deployment.template.fingerprint
            if len(active) > deployment.replicas:
                # Scale down: unbound and not-ready replicas first, then the oldest template.
                order = sorted(
                    active,
                    key=lambda p: (p.ready(self.now), p.template.fingerprint == current, p.created),
                )
                for pod in order[: len(active) - deployment.replicas]:
                    self.terminate(pod, f"Deployment {deployment.name} scaled down")
                continue
            old = [p for p in active if p.template.fingerprint != current]
            ready = sum(1 for p in active if p.ready(self.now))
            if old and len(active) == deployment.replicas:
                # maxSurge 0, maxUnavailable 1: one old replica goes once all are available
                # (one that is not available may go at once).
                unready_old = [p for p in old if not p.ready(self.now)]
                if unready_old:
                    self.terminate(unready_old[0], f"rolling update of {deployment.name}")
                elif ready >= deployment.replicas:
                    self.terminate(old[0], f"rolling update of {deployment.name}")
            for _ in range(deployment.replicas - len([p for p in pods if p.active])):
                self.pod_counter += 1
                self.pods.append(
                    Pod(
                        f"{deployment.name}-{self.pod_counter}",
                        deployment.namespace,
                        deployment.name,
                        deployment.service,
                        deployment.template,
                        self.now,
                    )
                )

    def free(self, node: Node, resource: str) -> int:
        return node.devices.get(resource, 0) - device_counts(self.pods, node.name).get(resource, 0)

    def _schedule(self) -> None:
        for pod in self.pods:
            if pod.node is not None or not pod.active:
                continue
            fits = [
                n
                for n in self.live_nodes()
                if n.ready(self.now)
                and not n.unschedulable
                and pod.template.admits(n)
                and (pod.template.resource is None or self.free(n, pod.template.resource) > 0)
            ]
            if not fits:
                continue
            deployment = self.deployments[(pod.namespace, pod.deployment)]
            peers = {
                n.name: sum(
                    1 for p in self.pods if p.node == n.name and p.deployment == pod.deployment
                )
                for n in fits
            }
            # Topology spread by hostname (ScheduleAnyway): the node with fewest peers.
            chosen = min(fits, key=lambda n: (peers[n.name], n.name))
            pod.node = chosen.name
            pod.ready_at = self.now + deployment.start_seconds

    # -- questions the steps ask -------------------------------------------------------------
    def rolled_out(self, deployment: Deployment) -> bool:
        """What Pulumi's Deployment await waits for: every replica on the current template,
        Ready."""
        active = [p for p in self.pods_of(deployment) if p.active]
        return len(active) == deployment.replicas and all(
            p.template.fingerprint == deployment.template.fingerprint and p.ready(self.now)
            for p in active
        )

    def pending(self, deployment: Deployment) -> list[Pod]:
        return [p for p in self.pods_of(deployment) if p.active and p.node is None]

    def config_state(self, name: str) -> tuple[str | None, str | None]:
        node = self.nodes[name]
        return node.labels.get(MIG_CONFIG_LABEL), node.labels.get(MIG_STATE_LABEL)
