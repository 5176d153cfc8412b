"""A running cluster, advanced tick by tick: nodes boot, drain and go; NVIDIA's MIG manager
(`mig_manager`, the model read from NVIDIA's source) applies the layout a node's label names; the
scheduler binds replicas to nodes that admit them and
still have a free device; Deployments replace replicas one at a time; evictions ask the
PodDisruptionBudget; a NoExecute taint evicts the pods that do not tolerate it.

Durations are assumptions (Timings), not measurements: the simulator reports orders of events and
the replicas serving between them; its times are estimates."""

from __future__ import annotations

from collections.abc import Callable

from msgspec import Struct, field
from msgspec.structs import replace

from mig_inference.names.labels import (
    CLIENT_DEPLOY_LABEL,
    DEVICE_PLUGIN_CONFIG_LABEL,
    MIG_CONFIG_LABEL,
    MIG_STATE_LABEL,
    STARTUP_TAINT_KEY,
)
from mig_inference.rollout.mig_manager import Durations, MigManager, NodeLayout, Reboot, Write
from mig_inference.rollout.model import Deployment, Node, Pod, Taint, device_counts

TICK = 10.0
"""Seconds between two rounds of the controllers."""


class Timings(Struct, frozen=True):
    """How long things take. Assumed orders of magnitude, to be replaced by measurements: only
    a real cluster knows them."""

    node_boot: float = 600.0
    """A GPU node created, joined and its drivers ready."""
    mig_manager: Durations = field(default_factory=Durations)
    """The MIG manager's steps (its pod starting, operands stopping, applying, rebooting)."""
    pod_grace: float = 60.0
    """A replica terminating (the engines' termination grace period)."""
    drain_timeout: float = 3600.0
    """How long a cloud waits for PodDisruptionBudgets when it deletes nodes."""
    helm_release: float = 120.0
    """A Helm release installed or upgraded."""
    cloud_update: float = 60.0
    """A cloud API update that touches no node (labels, sizes)."""
    replica_start: float = 300.0
    """A replica bound to a node until Ready: its image pulled, its model loaded. Only when the
    plan's load estimate has no figure for its Deployment (`rollout.facts.LoadFacts`)."""


class Event(Struct, frozen=True):
    time: float
    text: str


class Drain(Struct):
    """A node the cloud (or a Job) takes away: cordoned, emptied, then deleted."""

    node: str
    deadline: float
    respect_budgets: bool
    delete: bool
    """Delete the node once empty (a cloud scale-in or pool deletion)."""
    reason: str


class Cluster(Struct):
    timings: Timings
    devices_of: Callable[[Node, str], dict[str, int]]
    """What the device plugin advertises on a node with this MIG config applied."""
    configs_of: Callable[[Node], dict[str, NodeLayout]]
    """The configs the MIG manager finds in the mig-parted config now, as the node's layouts."""
    config_of: Callable[[Node, NodeLayout], str | None]
    """The config whose layout a node's GPUs have."""
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
    started: dict[tuple[str, str], int] = field(default_factory=dict)
    """Replicas bound to a node (each loads its model), per (namespace, Deployment)."""
    claim_templates: dict[tuple[str, str], str | None] = field(default_factory=dict)
    """The ResourceClaimTemplates in the cluster now: (namespace, name) -> the device a claim
    made from it takes (None: one the simulator does not read)."""
    plugin_configs: frozenset[str] | None = None
    """The keys of the device plugin's ConfigMap now (None: no config manager, any label goes;
    `rollout.plugin_configs`)."""
    config_missing: set[str] = field(default_factory=set)
    """Nodes whose sharing label named a key the ConfigMap lacked at some moment: a device plugin
    starting then would not have started."""
    plugin_blocked: set[str] = field(default_factory=set)
    """Nodes whose device plugin started in such a moment and waited for a known key."""
    _stuck_plugins: set[str] = field(default_factory=set)
    device_plugin: bool = True
    """The GPU Operator runs its device plugin (`devicePlugin.enabled`); per node, only where
    `nvidia.com/gpu.deploy.device-plugin` is not `false` (the MIG manager model reads that).
    Changed through `set_device_plugin`."""
    mig_config_missing: dict[str, tuple[str, float]] = field(default_factory=dict)
    """Nodes whose `nvidia.com/mig.config` named a config the operator's mig-parted config did
    not hold: node -> (that config, seconds it was so). Its MIG manager, restarted then (a
    reboot, a pod restart), records `failed` and applies nothing: after a reboot the GPUs come
    back without their MIG instances."""
    without_plugin: dict[str, float] = field(default_factory=dict)
    """Nodes whose labels run the device plugin, with replicas holding its devices, while the
    operator ran no device plugin at all (their replicas go on running, a replica recreated
    there stays Pending), with the first time it happened."""
    dra_client_selector: bool = False
    """The DRA driver's kubelet plugin is scheduled only where `nvidia.com/gpu.deploy.client=true`
    (GPU Operator v26.7.0+, which sets that label on its GPU nodes): the MIG manager's pause of
    the label stops the plugin (its slices withdrawn) and its return starts a new one, which
    publishes the layout the GPUs have then."""
    plugin_paused: set[str] = field(default_factory=set)
    """DRA nodes whose kubelet plugin the MIG manager's pause has stopped."""
    switched: dict[str, str] = field(default_factory=dict)
    """Nodes the re-partitioning Job moved to the other plugin: node -> allocation now."""
    offered_twice: dict[str, float] = field(default_factory=dict)
    """Nodes whose device plugin advertised devices while their DRA kubelet plugin's slices were
    published, with the first time it happened."""

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
        """A node joins; with `applied`, its GPUs already have that layout and its MIG manager
        runs (a running node); without, its GPUs have MIG disabled and its MIG manager starts
        once the node is up. A node with neither `applied` nor a `nvidia.com/mig.config` label
        runs no MIG manager (GKE's native MIG partitions the GPUs when it creates the node; a
        GPU without MIG is shared by its device plugin's config): it advertises what its
        labels give it."""
        self.nodes[node.name] = node
        if applied is None and MIG_CONFIG_LABEL not in node.labels:
            node.devices = self.devices_of(node, "")
            return
        configs = self.configs_of(node)
        if self.dra_client_selector:
            node.labels.setdefault(CLIENT_DEPLOY_LABEL, "true")
        hardware = configs.get(applied or "all-disabled") or (None,) * node.gpus
        node.applied = applied
        self.managers[node.name] = MigManager(
            configs=configs, hardware=hardware, labels=node.labels, now=max(self.now, node.up_at),
            durations=self.timings.mig_manager, with_reboot=self.with_reboot,
            running=applied is not None, plugin_daemonset=self.device_plugin,
        )  # fmt: skip
        node.devices = self.devices_of(node, applied or "")
        if node.dra:
            node.published = applied
            node.devices = self.devices_of(node, applied) if applied else {}

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

    def select_client_label(self, on: bool) -> None:
        """The DRA driver's release (re)installed: its kubelet plugin selects
        `nvidia.com/gpu.deploy.client=true` or not. The GPU Operator (v26.7.0+) has set that label
        on its GPU nodes already."""
        self.dra_client_selector = on
        if on:
            for name in self.managers:
                self.nodes[name].labels.setdefault(CLIENT_DEPLOY_LABEL, "true")

    def set_device_plugin(self, on: bool, why: str) -> None:
        """The GPU Operator's ClusterPolicy turns its device plugin on or off for every node
        (gpu-operator v26.7.0 `controllers/object_controls.go` `DaemonSet`: a disabled state's
        DaemonSet is deleted, so its pods leave every node whatever their labels say)."""
        if on == self.device_plugin:
            return
        self.device_plugin = on
        for manager in self.managers.values():
            manager.set_plugin_daemonset(on)
        self.log(
            f"GPU Operator: its device plugin turned {'on' if on else 'off'} for every node ({why})"
        )

    def restart_dra_plugin(self, name: str) -> None:
        """The node's DRA kubelet plugin restarts and publishes the layout the GPUs have now."""
        node = self.nodes[name]
        node.published = node.applied
        self.log(f"node {name}: DRA kubelet plugin restarted; it publishes {node.applied}")

    def restart_mig_manager(self, name: str) -> None:
        """Its pod deleted: the DaemonSet's new pod applies the label's value once."""
        if name in self.managers:
            self.managers[name].restart()

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
        self._device_plugins()
        self._startup_taints()
        self._no_execute()
        self._pods()
        self._drains()
        self._deployments()
        self._schedule()

    def _mig_managers(self) -> None:
        for node in self.live_nodes():
            if node.name not in self.managers:
                # Its device plugin advertises what the node's labels (a sharing config) give.
                node.devices = self.devices_of(node, "")
        for name, manager in self.managers.items():
            node = self.nodes[name]
            if node.gone or self.now < node.up_at:
                continue
            manager.configs = self.configs_of(node)
            named = node.labels.get(MIG_CONFIG_LABEL)
            if named and named not in manager.configs:
                _, seconds = self.mig_config_missing.get(name, (named, 0.0))
                self.mig_config_missing[name] = (named, seconds + TICK)
            manager.observe(node.labels)
            for event in manager.advance(self.now, self._busy_gpus(node, manager.hardware)):
                if isinstance(event, Write):
                    self.set_labels(name, dict(event.labels))
                    state = event.labels.get(MIG_STATE_LABEL)
                    if state:
                        self.log(f"node {name}: {MIG_STATE_LABEL}={state} ({node.config})")
                elif isinstance(event, Reboot):
                    self.log(f"node {name}: rebooting for a MIG mode change")
                    for pod in [p for p in self.pods if p.node == name and p.active]:
                        self.terminate(pod, f"node {name} rebooted", evicted=True)
            node.applied = self.config_of(node, manager.hardware)
            advertised = self.devices_of(node, node.applied or "") if manager.advertised() else {}
            if not self.device_plugin and not node.dra and manager.plugin_selected:
                self._note_without_plugin(node)
            paused = self.dra_client_selector and node.labels.get(CLIENT_DEPLOY_LABEL) != "true"
            if node.dra and paused:
                # The MIG manager paused the plugin's label: its DaemonSet stopped the plugin.
                if name not in self.plugin_paused:
                    self.plugin_paused.add(name)
                    self.log(f"node {name}: DRA kubelet plugin stopped by the MIG manager's pause")
                node.published = None
                node.devices = {}
            elif node.dra:
                if name in self.plugin_paused:
                    self.plugin_paused.discard(name)
                    self.log(
                        f"node {name}: DRA kubelet plugin started again after the MIG manager's "
                        f"pause; it publishes {node.applied}"
                    )
                if node.published is None:
                    # The kubelet plugin starts as soon as the node is up (or labelled for DRA),
                    # whatever layout its GPUs have by then.
                    node.published = node.applied
                node.devices = self.devices_of(node, node.published) if node.published else {}
                if advertised and node.devices and name not in self.offered_twice:
                    self.offered_twice[name] = self.now
                    self.log(f"node {name}: its devices offered twice (device plugin and DRA)")
            else:
                # Without the label the kubelet plugin's DaemonSet leaves the node, and the
                # kubelet withdraws its slices.
                node.published = None
                node.devices = advertised

    def _startup_taints(self) -> None:
        """The startup-taint agent (`kube/scripts/startup_taint.sh`): a node's Cluster
        Autoscaler startup taint goes once it carries its config, reports success and advertises
        what that config gives."""
        for node in self.live_nodes():
            tainted = [t for t in node.taints if t.key == STARTUP_TAINT_KEY]
            config = node.labels.get(MIG_CONFIG_LABEL)
            if not tainted or config is None or node.labels.get(MIG_STATE_LABEL) != "success":
                continue
            if (
                node.applied == config
                and node.devices
                and node.devices == self.devices_of(node, config)
            ):
                node.taints = [t for t in node.taints if t.key != STARTUP_TAINT_KEY]
                self.log(f"node {node.name}: its startup taint removed (its slices advertised)")

    def _note_without_plugin(self, node: Node) -> None:
        """The node's labels run the device plugin and the operator runs none: a problem once
        replicas hold devices there (a node no replica uses any more needs no plugin)."""
        if node.name in self.without_plugin or not device_counts(self.pods, node.name):
            return
        self.without_plugin[node.name] = self.now
        self.log(
            f"node {node.name}: its replicas run with no device plugin (the GPU Operator runs none "
            "and the node is not switched to DRA): a replica recreated there stays Pending"
        )

    def _device_plugins(self) -> None:
        """A device plugin starting while its node's sharing label names a key the ConfigMap
        lacks stays in `config-manager-init`, advertising nothing, until the label names a known
        key (`rollout.plugin_configs`); one already serving keeps serving."""
        for node in self.live_nodes():
            value = node.labels.get(DEVICE_PLUGIN_CONFIG_LABEL, "")
            known = self.plugin_configs
            if not value or known is None or value in known:
                if node.name in self._stuck_plugins:
                    self._stuck_plugins.discard(node.name)
                    self.log(f"node {node.name}: its device plugin starts (its config is known)")
                continue
            self.config_missing.add(node.name)
            if node.name not in self._stuck_plugins and self._plugin_starting(node):
                self._stuck_plugins.add(node.name)
                self.plugin_blocked.add(node.name)
                self.log(
                    f"node {node.name}: its device plugin cannot start: "
                    f"{DEVICE_PLUGIN_CONFIG_LABEL}={value} is not in its ConfigMap"
                )
            if node.name in self._stuck_plugins:
                node.devices = {}

    def _plugin_starting(self, node: Node) -> bool:
        """The node's device plugin is starting: on a node that joined during the update, or
        after its MIG manager paused it."""
        if node.up_at > 0 and self.now < node.up_at + self.timings.mig_manager.plugin_start:
            return True
        manager = self.managers.get(node.name)
        return manager is not None and manager.plugin_starting

    def _busy_gpus(self, node: Node, hardware: NodeLayout) -> set[int]:
        """The GPUs a pod on the node holds an instance (or the whole GPU) of: its held devices
        taken from the GPUs in index order."""
        busy: set[int] = set()
        for resource, count in device_counts(self.pods, node.name).items():
            for index, gpu in enumerate(hardware):
                if count <= 0:
                    break
                held = (
                    (1 if resource.startswith("nvidia.com/gpu") else 0)
                    if gpu is None
                    else sum(1 for p in gpu if resource.startswith(f"nvidia.com/mig-{p}"))
                )
                if held:
                    busy.add(index)
                    count -= held
        return busy

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
        # Each Deployment's pods, in one pass over the pods (a round touches only its own).
        pods_by_deployment: dict[tuple[str, str], list[Pod]] = {}
        for pod in self.pods:
            pods_by_deployment.setdefault((pod.namespace, pod.deployment), []).append(pod)
        for deployment in self.deployments.values():
            pods = pods_by_deployment.get((deployment.namespace, deployment.name), [])
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
                pod = Pod(
                    f"{deployment.name}-{self.pod_counter}",
                    deployment.namespace,
                    deployment.name,
                    deployment.service,
                    deployment.template,
                    self.now,
                )
                self._make_claims(pod)
                self.pods.append(pod)

    def _make_claims(self, pod: Pod) -> None:
        """The pod's claims, made from its ResourceClaimTemplates as they are now (the
        control plane never updates a claim afterwards): the device it holds."""
        if not pod.template.claims:
            return
        keys = [(pod.namespace, name) for name in pod.template.claims]
        pod.claims_made = all(key in self.claim_templates for key in keys)
        if pod.claims_made:
            devices = sorted(d for key in keys if (d := self.claim_templates[key]) is not None)
            pod.template = replace(pod.template, resource=devices[0] if devices else None)

    def free(self, node: Node, resource: str) -> int:
        return node.devices.get(resource, 0) - device_counts(self.pods, node.name).get(resource, 0)

    def _schedule(self) -> None:
        # What binding decides on, counted once per round and kept as pods are bound: the
        # devices held on each node (as `free` counts them) and the pods of each Deployment name
        # on each node (the topology spread's peers). Nodes do not change within a round.
        held: dict[tuple[str, str], int] = {}
        peers: dict[tuple[str, str], int] = {}
        for pod in self.pods:
            if pod.node is not None:
                if pod.template.resource:
                    where = (pod.node, pod.template.resource)
                    held[where] = held.get(where, 0) + 1
                peers[(pod.node, pod.deployment)] = peers.get((pod.node, pod.deployment), 0) + 1
        open_nodes = [n for n in self.live_nodes() if n.ready(self.now) and not n.unschedulable]
        for pod in self.pods:
            if pod.node is not None or not pod.active:
                continue
            if not pod.claims_made:
                self._make_claims(pod)
                if not pod.claims_made:
                    continue
            resource = pod.template.resource
            fits = [
                n
                for n in open_nodes
                if pod.template.admits(n)
                and (
                    resource is None
                    or n.devices.get(resource, 0) - held.get((n.name, resource), 0) > 0
                )
            ]
            if not fits:
                continue
            deployment = self.deployments[(pod.namespace, pod.deployment)]
            # Topology spread by hostname (ScheduleAnyway): the node with fewest peers.
            chosen = min(fits, key=lambda n: (peers.get((n.name, pod.deployment), 0), n.name))
            pod.node = chosen.name
            if resource:
                held[(chosen.name, resource)] = held.get((chosen.name, resource), 0) + 1
            peers[(chosen.name, pod.deployment)] = peers.get((chosen.name, pod.deployment), 0) + 1
            pod.ready_at = self.now + deployment.start_seconds
            self.started[deployment.key] = self.started.get(deployment.key, 0) + 1

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
