"""NVIDIA's GPU agents on one node, written from NVIDIA's source on its own: the MIG manager, the
GPU Operator's operand DaemonSets it pauses, the device plugin with its config manager, and what
the kubelet then advertises. The Job scripts' tests run it behind the fake API server
(tests/fake_apiserver.py), and tests/rollout/test_node_models.py checks the rollout simulator's
model (mig_inference/rollout/mig_manager.py) against it. It imports nothing of the product.

Read at these commits (line numbers from them):

- MIG manager v0.15.0, the one GPU Operator v26.7.0 deploys: NVIDIA/mig-parted
  e2d5ad1fc72b9d298ea6d04b885cf2d7dbe56941.
  - `cmd/nvidia-mig-manager/main.go`: the node informer calls `Set` with the label's value when
    it first lists the node (AddFunc, L569-571) and on an update only when the value differs from
    the cached one (UpdateFunc, L572-578). `SyncableMigConfig` (L90-120): `Set` stores the value
    and wakes a waiting `Get` only when the value is not empty; `Get` waits only when the last
    value read equals the current one (an `if`, not a loop). The loop (L436-446) runs the
    reconfigure for each value `Get` returns and logs a failure: nothing is retried.
  - `pkg/mig/reconfigure/reconfigure.go` `Run` (L127-240), step by step in `_reconfigure`
    below; `setState` (L540-579) first sets the deploy labels back to `maybeSetTrue` of the values
    read when the run began (unless the process-wide `NoRestartK8sDaemonsetsOnExit`, set for good
    by the first `restartKubernetesGPUClients`, L517, is true), then writes the state;
    `maybeSetPaused`/`maybeSetTrue` (L581-593) keep `false` and turn anything else, an absent
    label included, into the paused or `true` value; the client label only when the node had it
    (L380-382, L526-528); `waitForPodsToBeDeleted` (L388-428) waits up to 5 minutes for each
    operand's pods (polling every second, L613-624) and for DaemonSet pods with the client
    nodeSelector key (L646-673), and its failure returns without any state (L170-172).
  - `cmd/nvidia-mig-parted/apply/config.go` `ApplyMigConfig`: GPU by GPU in order, stopping at the
    first error: MIG enabled where the config disables it, or disabled where it enables it, is an
    error; a GPU whose instances equal the config's (counts per profile) is skipped.
    `pkg/mig/config/config.go` `SetMigConfig` clears the GPU's instances first, which fails while
    a process uses one.
- Device plugin v0.20.0: NVIDIA/k8s-device-plugin 1b826acc6af3079d8923bac395c3124b8861a9a6,
  `cmd/config-manager/main.go`: a label that names a config file the plugin's ConfigMap lacks is
  `specified config ... does not exist` (L351-357), `start` returns the error (L246-254) and
  `main` exits 1 (L207-211); with the `empty` fallback an absent label selects no config.
- GPU Operator v26.7.0: NVIDIA/gpu-operator 10ee5b3638b89e11e949412aafa5ba99279c3721,
  `assets/state-device-plugin/0500_daemonset.yaml`: the plugin pod runs `config-manager-init`
  (ONESHOT) before the plugin, so a pod that starts while its node names an unknown config never
  gets past it, and a `config-manager` sidecar whose exit leaves the running plugin serving the
  config it has; `controllers/object_controls.go` L2893-2894: `FALLBACK_STRATEGIES=empty`. The
  operand DaemonSets select nodes by `nvidia.com/gpu.deploy.<operand>=true`. The device plugin's
  DaemonSet exists only while the ClusterPolicy's `devicePlugin.enabled` is not false
  (`controllers/state_manager.go` L1005-1016 `isStateEnabled`; `controllers/object_controls.go`
  L4643-4658 `DaemonSet` deletes the DaemonSet of a disabled state, so its pods leave every node
  whatever the node's label says; `api/nvidia/v1/clusterpolicy_types.go` L2221-2227: absent is
  on).
- The kubelet (kubernetes `pkg/kubelet/cm/devicemanager/manager.go`, `PluginDisconnected`): when
  the device plugin stops serving (the NVIDIA plugin stops on SIGTERM), its devices are marked
  unhealthy and allocatable drops to 0 for them; the API shows it at the kubelet's next node
  status update (the fake API server models that lag).

Times are in the caller's unit (the fake API server counts requests), durations are `Steps`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Generator, Mapping
from dataclasses import dataclass, field

GpuLayout = tuple[str, ...] | None
"""One GPU: None with MIG disabled, else its instances' profile names."""
Layout = tuple[GpuLayout, ...]

CONFIG_LABEL = "nvidia.com/mig.config"
STATE_LABEL = "nvidia.com/mig.config.state"
PLUGIN_CONFIG_LABEL = "nvidia.com/device-plugin.config"
DEPLOY = "nvidia.com/gpu.deploy."
PLUGIN = DEPLOY + "device-plugin"
CLIENT = DEPLOY + "client"
OPERANDS = tuple(DEPLOY + name for name in ("device-plugin", "gpu-feature-discovery",
                                            "dcgm-exporter", "dcgm", "nvsm"))  # fmt: skip
"""The five deploy labels `getCurrentNodeLabels` reads (reconfigure.go L256-262)."""
WAITED = (*OPERANDS[:4], CLIENT)
"""The pods `waitForPodsToBeDeleted` waits for, in its order: device plugin, GFD, DCGM exporter,
DCGM (by their `app` labels), then any DaemonSet pod selecting on the client label."""
PAUSED = "paused-for-mig-change"


@dataclass(frozen=True)
class Steps:
    """How long each step takes. Assumptions: only a real node measures them."""

    pod_start: float = 60.0
    """A new MIG manager pod until its informer lists the node."""
    assert_valid: float = 2.0
    """`nvidia-mig-parted assert --valid-config`."""
    assert_applied: float = 2.0
    """`nvidia-mig-parted assert`."""
    assert_mode: float = 1.0
    """`nvidia-mig-parted assert --mode-only`."""
    pod_grace: float = 30.0
    """An operand pod's termination once its DaemonSet no longer selects the node."""
    wait_timeout: float = 300.0
    """Each of `waitForPodsToBeDeleted`'s waits (reconfigure.go L390: 5 minutes)."""
    wait_poll: float = 1.0
    """`waitForPodDeletion` polls every second, the first time after a second (L614)."""
    client_poll: float = 5.0
    """`waitForPodsWithNodeSelector` polls every 5 seconds, the first time at once (L649)."""
    mode_apply: float = 5.0
    """`nvidia-mig-parted apply --mode-only` and its check."""
    config_apply: float = 60.0
    """`nvidia-mig-parted apply`."""
    reboot: float = 300.0
    """The node down for a reboot."""
    plugin_start: float = 30.0
    """A device-plugin pod created until it is registered with the kubelet."""


@dataclass(frozen=True)
class LabelWrite:
    """Labels the MIG manager patched at `time` (a merge patch of the node's labels)."""

    time: float
    labels: Mapping[str, str | None]


@dataclass(frozen=True)
class NodeDown:
    """The MIG manager rebooted the node at `time`; it is up at `until`."""

    time: float
    until: float


@dataclass
class _OperandPod:
    created: float
    stopping: float | None = None
    """When its DaemonSet dropped it (SIGTERM)."""
    registered: bool = False
    """The device plugin: past `config-manager-init` and registered with the kubelet."""


@dataclass
class _Sleep:
    until: float


class _AwaitValue:
    """Blocked in `SyncableMigConfig.Get`'s `cond.Wait`."""


_Step = Generator[_Sleep | _AwaitValue, None, None]


def devices(layout: Layout) -> dict[str, int]:
    """The device plugin's resources for a layout, mixed strategy."""
    found: Counter[str] = Counter()
    for gpu in layout:
        if gpu is None:
            found["nvidia.com/gpu"] += 1
        else:
            found.update(f"nvidia.com/mig-{profile.replace('+', '.')}" for profile in gpu)
    return dict(sorted(found.items()))


def _same(current: GpuLayout, wanted: GpuLayout) -> bool:
    """mig-parted compares a GPU's instances as counts per profile."""
    if current is None or wanted is None:
        return current is wanted
    return Counter(current) == Counter(wanted)


@dataclass
class NvidiaNode:
    """One node's agents. `configs` is the mig-parted config the MIG manager reads (name ->
    layout of this node's GPUs), `hardware` the GPUs now. With `running`, the MIG manager's pod is
    up and has handled the label's value; without, its pod starts now. `plugin_configs`: the config
    names in the device plugin's ConfigMap (None: no config manager deployed)."""

    configs: Mapping[str, Layout]
    hardware: Layout
    labels: dict[str, str]
    now: float = 0.0
    steps: Steps = field(default_factory=Steps)
    with_reboot: bool = False
    """`WITH_REBOOT`: reboot when the MIG mode change fails."""
    mode_change_needs_reboot: bool = False
    """The GPUs change their MIG mode only across a reboot (cloud VMs)."""
    running: bool = True
    operands_stuck: bool = False
    """Operand pods that do not finish terminating (NVIDIA/gpu-operator#2833) until cleared."""
    plugin_configs: Collection[str] | None = None
    host_gpu_clients: bool = False
    """`WITH_SHUTDOWN_HOST_GPU_CLIENTS` (main.go L208-215): with the host's driver, a MIG mode
    change stops the host's kubelet (reconfigure.go L332-349, L166-174) and starts it after the
    apply (L223-228)."""
    kubelet_restart_breaks: bool = False
    """That start leaves the node NotReady for good (gpu-operator#2415 on AL2023)."""
    plugin_daemonset: bool = True
    """The GPU Operator runs its device plugin's DaemonSet (the ClusterPolicy's
    `devicePlugin.enabled`; `controllers/object_controls.go` `DaemonSet` deletes the DaemonSet
    of a disabled state): without it no plugin pod runs here, whatever the label says."""

    _pods: dict[str, _OperandPod] = field(default_factory=dict)
    _plugin_devices: dict[str, int] = field(default_factory=dict)
    """What the registered device plugin enumerated when it started."""
    _process: _Step | None = None
    _blocked: _Sleep | _AwaitValue | None = None
    _pod_up_at: float | None = None
    _node_up_at: float | None = None
    _informer: str | None = None
    _current: str = ""
    _last_read: str = ""
    _no_restart: bool = False
    _busy: frozenset[int] = frozenset()
    _kubelet_lost: bool = False
    _kubelet_stopped: bool = False
    _no_host_restart: bool = False
    _written: list[LabelWrite | NodeDown] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.labels = dict(self.labels)
        for key in (*OPERANDS, CLIENT):
            if self.labels.get(key) == "true" and (key != PLUGIN or self.plugin_daemonset):
                self._pods[key] = _OperandPod(self.now - self.steps.plugin_start, registered=True)
        self._plugin_devices = devices(self.hardware)
        if self.running:
            self._start_process(already_handled=True)
        else:
            self._pod_up_at = self.now + self.steps.pod_start

    # -- what the fake API server asks ---------------------------------------------------------
    @property
    def node_ready(self) -> bool:
        return self._node_up_at is None and not self._kubelet_lost

    @property
    def kubelet_lost(self) -> bool:
        return self._kubelet_lost

    def advertised(self) -> dict[str, int]:
        """The devices the kubelet holds as allocatable now."""
        if self._kubelet_lost:
            return {}
        return dict(self._plugin_devices) if self._plugin_registered() else {}

    def observe(self, labels: Mapping[str, str]) -> None:
        """A watch event: someone else changed the node's labels."""
        self.labels = dict(labels)
        self._reconcile_operands()
        if self._process is None:
            return
        value = self.labels.get(CONFIG_LABEL, "")
        if value != self._informer:  # UpdateFunc
            self._informer = value
            self._set(value)

    def set_plugin_daemonset(self, on: bool) -> None:
        """The operator deletes the device plugin's DaemonSet (its pod here gets SIGTERM and the
        kubelet marks its devices unhealthy) or creates it again (a pod starts where the label is
        `true`)."""
        self.plugin_daemonset = on
        self._reconcile_operands()

    def restart(self) -> None:
        """The MIG manager pod deleted: the process ends where it was; the DaemonSet's new pod
        starts with fresh globals."""
        self._process = None
        self._blocked = None
        if self.node_ready:
            self._pod_up_at = self.now + self.steps.pod_start

    def advance(self, now: float, busy_gpus: Collection[int] = ()) -> list[LabelWrite | NodeDown]:
        """Run the agents until `now`; `busy_gpus`: GPUs a process holds an instance of."""
        self._busy = frozenset(busy_gpus)
        self._written = []
        while True:
            due = self._due()
            if due is None or due > now:
                break
            self.now = max(self.now, due)
            self._fire()
        self.now = max(self.now, now)
        self._reconcile_operands()
        return self._written

    # -- time ------------------------------------------------------------------------------------
    def _due(self) -> float | None:
        """The next time something happens: the node or the MIG manager's pod comes up, a step
        of the MIG manager ends, an operand pod is gone, the device plugin registers."""
        times = [self._node_up_at, self._pod_up_at]
        if isinstance(self._blocked, _Sleep):
            times.append(self._blocked.until)
        for key, pod in self._pods.items():
            if pod.stopping is not None:
                if not self.operands_stuck:
                    times.append(pod.stopping + self.steps.pod_grace)
            elif key == PLUGIN and not pod.registered and self._plugin_config_known():
                times.append(max(pod.created + self.steps.plugin_start, self.now))
        found = [t for t in times if t is not None]
        return min(found) if found else None

    def _fire(self) -> None:
        """Everything due at `now`."""
        self._drop_terminated()
        if self._node_up_at is not None and self.now >= self._node_up_at:
            self._node_up_at = None
            self._reconcile_operands()
            self._pod_up_at = self.now + self.steps.pod_start
        if self._pod_up_at is not None and self.now >= self._pod_up_at:
            self._pod_up_at = None
            self._start_process(already_handled=False)
        if isinstance(self._blocked, _Sleep) and self.now >= self._blocked.until:
            self._resume()
        self._register_plugin()

    # -- main.go ---------------------------------------------------------------------------------
    def _start_process(self, *, already_handled: bool) -> None:
        self._no_restart = False
        self._no_host_restart = False
        value = self.labels.get(CONFIG_LABEL, "")
        self._informer = value
        self._current = value  # AddFunc: Set(value), before the loop's first Get
        self._last_read = value if already_handled else ""
        self._process = self._main()
        self._resume()

    def _set(self, value: str) -> None:
        self._current = value
        if value and isinstance(self._blocked, _AwaitValue):
            self._resume()

    def _resume(self) -> None:
        assert self._process is not None
        try:
            self._blocked = next(self._process)
        except StopIteration:  # pragma: no cover - the loop never ends
            self._process = None
            self._blocked = None

    def _main(self) -> _Step:
        while True:
            if self._last_read == self._current:
                yield _AwaitValue()
            self._last_read = self._current
            yield from self._reconfigure(self._last_read)

    # -- reconfigure.go Run ------------------------------------------------------------------------
    def _reconfigure(self, value: str) -> _Step:
        read = {key: self.labels.get(key, "") for key in (*OPERANDS, CLIENT)}  # L250-275
        state = self.labels.get(STATE_LABEL, "")
        yield _Sleep(self.now + self.steps.assert_valid)
        wanted = self.configs.get(value)
        if wanted is None:  # L137-140
            self._set_state("failed", read)
            return
        yield _Sleep(self.now + self.steps.assert_applied)
        if all(_same(c, w) for c, w in zip(self.hardware, wanted, strict=True)):  # L142-146
            self._set_state("success", read)
            return
        yield _Sleep(self.now + self.steps.assert_mode)
        mode_change = [i for i, w in enumerate(wanted) if (w is None) != (self.hardware[i] is None)]
        if mode_change and state == "rebooting":  # L153-156, L352-355
            self._set_state("failed", read)
            return
        self._write({STATE_LABEL: "pending"})  # L158
        paused = {k: ("false" if read[k] == "false" else PAUSED) for k in OPERANDS}  # L371-386
        if read[CLIENT]:
            paused[CLIENT] = "false" if read[CLIENT] == "false" else PAUSED
        self._write(paused)
        for key in WAITED:  # L170-172, L388-428: a timeout ends the run with no state
            deadline = self.now + self.steps.wait_timeout
            poll = self.steps.client_poll if key == CLIENT else self.steps.wait_poll
            if key != CLIENT:
                yield _Sleep(self.now + poll)
            while key in self._pods:
                if self.now >= deadline:
                    return
                yield _Sleep(min(self.now + poll, deadline))
        if mode_change and self.host_gpu_clients:  # L166-174: the kubelet too (L332-349)
            self._kubelet_stopped = True
        yield _Sleep(self.now + self.steps.mode_apply)  # L184-204
        if mode_change:
            if self.mode_change_needs_reboot or set(mode_change) & self._busy:
                if self.with_reboot:
                    self._write({STATE_LABEL: "rebooting"})
                    self._reboot(wanted)
                    return
                # Without WITH_REBOOT the error is not checked; the apply below fails.
            else:
                self.hardware = tuple(
                    (None if w is None else ()) if i in mode_change else self.hardware[i]
                    for i, w in enumerate(wanted)
                )
        yield _Sleep(self.now + self.steps.config_apply)
        if not self._apply(wanted):  # L206-209
            self._set_state("failed", read)
            return
        self._host_start()  # restartHostGPUClients (L223-228)
        self._no_host_restart = self._no_host_restart or self.host_gpu_clients  # L504
        self._no_restart = True  # L517
        self._write({k: ("false" if read[k] == "false" else "true") for k in paused})
        self._write({STATE_LABEL: "success"})  # setState: the labels are not touched again

    def _apply(self, wanted: Layout) -> bool:
        """`ApplyMigConfig`: GPU by GPU, stopping at the first error."""
        layout = list(self.hardware)
        for index, (current, want) in enumerate(zip(layout, wanted, strict=True)):
            if (current is None) != (want is None):
                break  # MIG mode not as the config says
            if _same(current, want):
                continue
            if index in self._busy:
                break  # clearing an instance in use fails
            layout[index] = want
        else:
            self.hardware = tuple(layout)
            return True
        self.hardware = tuple(layout)
        return False

    def _host_start(self) -> None:
        """The stopped host kubelet started again (a corrupt containerd with #2415's fault), or
        left stopped once this process restarted host services (L542)."""
        if self._kubelet_stopped and (self._no_host_restart or self.kubelet_restart_breaks):
            self._kubelet_lost = True
        self._kubelet_stopped = False

    def _set_state(self, state: str, read: Mapping[str, str]) -> None:
        self._host_start()  # L542-548
        if not self._no_restart:  # L550-570
            restored = {k: ("false" if read[k] == "false" else "true") for k in OPERANDS}
            if read[CLIENT]:
                restored[CLIENT] = "false" if read[CLIENT] == "false" else "true"
            self._write(restored)
        self._write({STATE_LABEL: state})

    def _reboot(self, wanted: Layout) -> None:
        self._kubelet_stopped = False  # the boot starts it afresh
        until = self.now + self.steps.reboot
        self._written.append(NodeDown(self.now, until))
        self._process = None
        self._blocked = None
        self._node_up_at = until
        self._pods.clear()
        self._plugin_devices = {}
        # The MIG mode set before the reboot takes effect; no instance survives it.
        self.hardware = tuple(None if w is None else () for w in wanted)

    def _write(self, labels: Mapping[str, str | None]) -> None:
        changed = {k: v for k, v in labels.items() if self.labels.get(k) != v}
        if not changed:
            return
        for key, value in changed.items():
            if value is None:
                self.labels.pop(key, None)
            else:
                self.labels[key] = value
        self._written.append(LabelWrite(self.now, changed))
        self._reconcile_operands()

    # -- the operand DaemonSets and the device plugin ---------------------------------------------
    def _reconcile_operands(self) -> None:
        """The DaemonSets run a pod where their deploy label is `true`, and drop it elsewhere."""
        self._drop_terminated()
        if not self.node_ready:
            return
        for key in (*OPERANDS, CLIENT):
            pod = self._pods.get(key)
            wanted = self.labels.get(key) == "true" and (key != PLUGIN or self.plugin_daemonset)
            if wanted and (pod is None or pod.stopping is not None):
                self._pods[key] = _OperandPod(created=self.now)
            elif not wanted and pod is not None and pod.stopping is None:
                pod.stopping = self.now
        self._register_plugin()

    def _drop_terminated(self) -> None:
        if self.operands_stuck:
            return
        for key, pod in list(self._pods.items()):
            if pod.stopping is not None and self.now >= pod.stopping + self.steps.pod_grace:
                del self._pods[key]

    def _plugin_config_known(self) -> bool:
        """`config-manager-init` gets past a node whose label names a config the ConfigMap has,
        or no config (the `empty` fallback)."""
        name = self.labels.get(PLUGIN_CONFIG_LABEL, "")
        return self.plugin_configs is None or not name or name in self.plugin_configs

    def _plugin_registered(self) -> bool:
        pod = self._pods.get(PLUGIN)
        return pod is not None and pod.stopping is None and pod.registered

    def _register_plugin(self) -> None:
        """A plugin registers once its pod started and its init container got past the config
        label; it enumerates the devices the GPUs have then. A running plugin whose label moves to
        an unknown config keeps serving: only its config-manager sidecar exits."""
        pod = self._pods.get(PLUGIN)
        if pod is None or pod.stopping is not None or pod.registered:
            return
        if self.now >= pod.created + self.steps.plugin_start and self._plugin_config_known():
            pod.registered = True
            self._plugin_devices = devices(self.hardware)
