"""One node's NVIDIA MIG manager as its source behaves: a pure model driven by a clock.

The model follows k8s-mig-manager v0.15.0 (NVIDIA/mig-parted `e2d5ad1f`, what GPU Operator
v26.7.0 deploys): `cmd/nvidia-mig-manager/main.go` (main.go) and `pkg/mig/reconfigure/
reconfigure.go` (reconfigure.go). Line numbers below are from those files at that commit; what
is inferred from the code rather than read in it says so.

- It applies the value of `nvidia.com/mig.config` when its node informer sees the value CHANGE
  (main.go L572-578: old != new), and once when its pod starts (AddFunc, L569-571). A same-value
  relabel, a change of any other label or annotation, or removing the state label do nothing.
- Values are a latest-value slot, not a queue (main.go L90-120): changes during a run coalesce,
  the latest value runs next if it differs from the one last read; a run is never retried.
- It writes only `nvidia.com/mig.config.state` (pending, rebooting, success, failed; no config
  name) and the operands' `nvidia.com/gpu.deploy.*` labels. The state is not cleared when a new
  value arrives; `success` comes directly when the hardware already matches, `failed` at once for
  a config name the mig-parted config lacks (reconfigure.go L137-146).
- A full run writes `pending`, pauses the operands (deploy labels `paused-for-mig-change`: the
  device plugin stops, no MIG device is advertised), waits for their pods, changes the MIG mode
  if needed, applies the instances, restores the labels and writes `success` (L153-239).
- Applying fails when a process holds an instance of a GPU whose layout changes (mig-parted
  clears every instance of such a GPU first; inferred from `pkg/mig/config/config.go`
  L125-146). A MIG mode change that fails reboots the node with `WITH_REBOOT` (`rebooting`, node
  down, pod restarts, `pending`, `success`/`failed`; L184-204, L353-355), and without it the
  apply that follows fails.
- Two wedges of v0.15.0: once a process has completed one full reconfigure, a later failure in the
  same process leaves the operands paused (package globals never reset, L53-56, L504, L517,
  L550; inferred); and when operand pods do not stop within 5 minutes the run returns without a
  state write: `pending` forever, operands paused (gpu-operator #2833, fixed after v0.15.0 by
  mig-parted PR #484). Both end with a pod restart, which re-applies the label's value.
- With the host's driver (`WITH_SHUTDOWN_HOST_GPU_CLIENTS`, which the operator sets from the
  validator's `IS_HOST_DRIVER`), a run that changes a MIG mode also stops the host's kubelet
  before the change and starts it after the apply (`checkMigModeChangeRequired` adds
  `HOST_KUBELET_SYSTEMD_SERVICE` only then, L332-349; L166-174, L223-228), or in `setState` when
  the run fails (L540-548) unless this process restarted host services before (a global never
  reset, L504: the kubelet then stays stopped); a reboot for the mode starts it fresh instead. On
  AL2023 that restart leaves containerd's state corrupt (gpu-operator#2415, mig-parted#368,
  open): the node is NotReady for good, the labels written as the run goes on, nothing
  advertised; only a new instance clears it. A node whose user data
  switched MIG mode on before the kubelet started (`clouds/bootstrap.py`) starts with `()` per
  such GPU, and its first run changes no mode.

The rollout simulator (`rollout/cluster.py`) runs this model on every node, and the Jobs' tests run
it behind a fake API server: one model of the MIG manager.

Durations are assumptions (`Durations`), not measurements. The API: `advance(now)` runs the
manager up to time `now` and returns the label writes (and reboots) it made, in order;
`observe(labels)` hands it the node's labels after someone changed them (a watch event);
`restart()` deletes its pod (the DaemonSet recreates it); `advertised()` is what the device
plugin offers at the current time. Every method acts at the time of the last `advance`.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from msgspec import Struct, field

from mig_inference.names.labels import (
    GPU_DEPLOY_LABEL_PREFIX,
    MIG_CONFIG_LABEL,
    MIG_STATE_LABEL,
    PAUSED_FOR_MIG_CHANGE,
)

GpuLayout = tuple[str, ...] | None
"""One GPU: None when MIG is disabled, else its MIG instances (profile names, in order)."""
NodeLayout = tuple[GpuLayout, ...]
"""A node's GPUs by index."""

PENDING = "pending"
REBOOTING = "rebooting"
SUCCESS = "success"
FAILED = "failed"
PAUSED = PAUSED_FOR_MIG_CHANGE
"""The value the MIG manager gives the operands' deploy labels while it works."""
DEPLOY_PREFIX = GPU_DEPLOY_LABEL_PREFIX
OPERAND_LABELS = tuple(
    DEPLOY_PREFIX + name
    for name in ("device-plugin", "gpu-feature-discovery", "dcgm-exporter", "dcgm", "nvsm")
)
"""Paused on every full run unless `false` (reconfigure.go L371-386, `maybeSetPaused`)."""
CLIENT_LABEL = DEPLOY_PREFIX + "client"
"""Paused too, but only when the node carries it (v0.15.0, mig-parted PR #426)."""
DEVICE_PLUGIN_LABEL = DEPLOY_PREFIX + "device-plugin"


class Durations(Struct, frozen=True):
    """How long the MIG manager's steps take, in seconds. Assumptions except where a source is
    named: only a real node measures them."""

    pod_start: float = 60.0
    """A new mig-manager pod until its first run (it waits for the toolkit and the driver)."""
    checks: float = 5.0
    """`assert --valid-config`, `assert`, `assert --mode-only` before the first state write."""
    operands_stop: float = 30.0
    """The paused operand pods terminate."""
    operands_timeout: float = 300.0
    """The wait for operand pods gives up (reconfigure.go L389-428: a 5-minute timeout)."""
    apply: float = 60.0
    """`nvidia-mig-parted apply`: instances destroyed and created."""
    reboot: float = 300.0
    """The node down for a reboot (`WITH_REBOOT`)."""
    plugin_start: float = 30.0
    """The device plugin, restarted with its label, until it advertises the devices again."""


class Write(Struct, frozen=True):
    """Labels the MIG manager patched on its node at `time` (None: removed)."""

    time: float
    labels: Mapping[str, str | None]


class Reboot(Struct, frozen=True):
    """The MIG manager rebooted its node at `time`; it is up again at `until`."""

    time: float
    until: float


Event = Write | Reboot


def devices_of(layout: NodeLayout) -> dict[str, int]:
    """What the device plugin advertises for a layout, mixed strategy: `nvidia.com/mig-<profile>`
    per instance, `nvidia.com/gpu` per GPU with MIG disabled."""
    counts: dict[str, int] = {}
    for gpu in layout:
        for resource in ["nvidia.com/gpu"] if gpu is None else [f"nvidia.com/mig-{p}" for p in gpu]:
            counts[resource] = counts.get(resource, 0) + 1
    return dict(sorted(counts.items()))


class _Run(Struct):
    value: str
    phase: str
    """checks -> operands -> apply."""
    at: float
    """When the phase ends."""
    state_at_start: str | None
    mode_change: bool = False


class MigManager(Struct):
    """The MIG manager of one node (see the module's docstring).

    `configs` are the mig-parted configs the manager reads (name -> layout of every GPU of this
    node); `hardware` is the GPUs' layout now. With `running`, its pod is up and has applied the
    label's value already; without, the pod starts now and applies it once it is up."""

    configs: Mapping[str, NodeLayout]
    hardware: NodeLayout
    labels: dict[str, str]
    """The node's labels as the manager last saw them (the caller's are the truth)."""
    now: float = 0.0
    durations: Durations = field(default_factory=Durations)
    with_reboot: bool = False
    """`WITH_REBOOT`: reboot when a MIG mode change fails (off by default, main.go L200-207)."""
    mode_change_needs_reboot: bool = False
    """The GPUs cannot change their MIG mode without a reboot (cloud VMs, per NVIDIA's docs)."""
    running: bool = True
    host_gpu_clients: bool = False
    """`WITH_SHUTDOWN_HOST_GPU_CLIENTS`: the host's driver, so a mode change restarts the host's
    kubelet (main.go L208-215; the operator's entrypoint sets it from `IS_HOST_DRIVER`)."""
    kubelet_restart_breaks: bool = False
    """Fault: that restart leaves the node NotReady for good (gpu-operator#2415 on AL2023)."""
    operands_stuck: bool = False
    """Fault: operand pods do not terminate (gpu-operator #2833): a run waits 5 minutes, then
    returns without a state write. The caller may clear it (the stuck pod finally goes)."""
    plugin_daemonset: bool = True
    """The GPU Operator runs its device plugin's DaemonSet (the ClusterPolicy's
    `devicePlugin.enabled`): without it no plugin pod runs on the node, whatever its label says
    (`set_plugin_daemonset`)."""

    _pod_up_at: float | None = None
    _node_up_at: float | None = None
    _informer: str | None = None
    _current: str = ""
    _last_read: str = ""
    _waiting: bool = False
    _run: _Run | None = None
    _no_restore: bool = False
    """`NoRestartK8sDaemonsetsOnExit`: set by a full reconfigure, never reset in a process."""
    _plugin_since: float = float("-inf")
    _kubelet_lost: bool = False
    _kubelet_stopped: bool = False
    _no_host_restart: bool = False
    """`NoRestartHostSystemdServicesOnExit`: set once host services were restarted, never reset."""
    _events: list[Event] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.labels = dict(self.labels)
        if self.running:
            value = self.labels.get(MIG_CONFIG_LABEL, "")
            self._informer = value
            self._current = self._last_read = value
            self._waiting = True
        else:
            self._pod_up_at = self.now + self.durations.pod_start

    # -- what the caller asks ------------------------------------------------------------------
    @property
    def pod_ready(self) -> bool:
        return self._pod_up_at is None

    @property
    def node_ready(self) -> bool:
        return self._node_up_at is None and not self._kubelet_lost

    @property
    def kubelet_lost(self) -> bool:
        """The host's kubelet restart around a mode change broke the node (#2415)."""
        return self._kubelet_lost

    @property
    def running_config(self) -> str | None:
        """The value a run in progress applies (None: idle, or no pod)."""
        return self._run.value if self._run else None

    @property
    def idle(self) -> bool:
        """Nothing left to do until someone changes its node: no run, reboot or pod start due,
        and its device plugin is not restarting."""
        return self._next_due() is None and self.now >= self._plugin_since + (
            self.durations.plugin_start
        )

    @property
    def plugin_starting(self) -> bool:
        """Its device plugin started again after a MIG change (or the node's boot, or the
        operator's DaemonSet coming back) and is not serving yet."""
        value = self.labels.get(DEVICE_PLUGIN_LABEL, "true")
        started = self._plugin_since + self.durations.plugin_start
        return (
            self.node_ready
            and self.plugin_daemonset
            and value not in (PAUSED, "false")
            and self.now < started
        )

    @property
    def plugin_selected(self) -> bool:
        """The node's label runs the device plugin (neither `false` nor paused), whether or not
        the operator runs its DaemonSet."""
        return self.labels.get(DEVICE_PLUGIN_LABEL, "true") not in (PAUSED, "false")

    def advertised(self) -> dict[str, int]:
        """What the device plugin advertises now: nothing while the node is down, the operator
        runs no plugin DaemonSet, the node's label is paused or `false`, or the plugin is still
        starting; else the GPUs' current layout."""
        value = self.labels.get(DEVICE_PLUGIN_LABEL, "true")
        if not self.node_ready or not self.plugin_daemonset or value in (PAUSED, "false"):
            return {}  # a NotReady node's kubelet registers no device plugin
        if self.now < self._plugin_since + self.durations.plugin_start:
            return {}
        return devices_of(self.hardware)

    # -- what happens to it --------------------------------------------------------------------
    def observe(self, labels: Mapping[str, str]) -> None:
        """The node's labels after a change (a watch event). The informer reacts to a new value of
        `nvidia.com/mig.config` only."""
        self._set_labels(dict(labels))
        if self._pod_up_at is not None or not self.node_ready:
            return  # no process: the next one reads the label when it starts
        value = self.labels.get(MIG_CONFIG_LABEL, "")
        if value != self._informer:
            self._informer = value
            self._set(value)

    def set_plugin_daemonset(self, on: bool) -> None:
        """The operator deletes its device plugin's DaemonSet (its pod leaves the node at once:
        the kubelet withdraws the devices) or creates it again (a pod starts where the label is
        `true`, serving once it has registered)."""
        if on and not self.plugin_daemonset:
            self._plugin_since = self.now
        self.plugin_daemonset = on

    def restart(self) -> None:
        """Its pod deleted: the process ends wherever it was (labels stay as written), the
        DaemonSet's new pod starts with fresh globals and applies the label's value once."""
        self._run = None
        self._waiting = False
        if self.node_ready:
            self._pod_up_at = self.now + self.durations.pod_start

    def advance(self, now: float, busy_gpus: Collection[int] = ()) -> list[Event]:
        """Run the manager up to `now`. `busy_gpus`: indices of GPUs a process holds an instance
        of (the pods on the node), as of this call."""
        self._events = []
        while True:
            due = self._next_due()
            if due is None or due > now:
                break
            self.now = max(self.now, due)
            self._step(frozenset(busy_gpus))
        self.now = max(self.now, now)
        return self._events

    # -- the process ---------------------------------------------------------------------------
    def _next_due(self) -> float | None:
        if self._node_up_at is not None:
            return self._node_up_at
        if self._pod_up_at is not None:
            return self._pod_up_at
        return self._run.at if self._run else None

    def _step(self, busy: frozenset[int]) -> None:
        if self._node_up_at is not None:
            self._node_up_at = None
            self._plugin_since = self.now
            self._pod_up_at = self.now + self.durations.pod_start
        elif self._pod_up_at is not None:
            self._start_process()
        elif self._run is not None:
            {"checks": self._checks, "operands": self._operands, "apply": self._apply}[
                self._run.phase
            ](self._run, busy)

    def _start_process(self) -> None:
        self._pod_up_at = None
        self._no_restore = False
        self._no_host_restart = False
        self._last_read = ""
        self._waiting = True
        value = self.labels.get(MIG_CONFIG_LABEL, "")
        self._informer = value
        self._set(value)  # AddFunc: the informer's initial list

    def _set(self, value: str) -> None:
        """`SyncableMigConfig.Set`: the latest value; it wakes a waiting `Get` only when
        non-empty (main.go L103-110)."""
        self._current = value
        if value and self._waiting and self._run is None:
            self._start_run(value)

    def _get_next(self) -> None:
        """`Get` after a run: the latest value when it differs from the one last read, else
        wait for a `Set` (main.go L112-120)."""
        if self._last_read != self._current:
            self._start_run(self._current)
        else:
            self._waiting = True

    def _start_run(self, value: str) -> None:
        self._last_read = value
        self._waiting = False
        self._run = _Run(
            value, "checks", self.now + self.durations.checks, self.labels.get(MIG_STATE_LABEL)
        )

    def _end_run(self) -> None:
        self._run = None
        self._get_next()

    # -- a run's steps (reconfigure.go Run, L127-240) ------------------------------------------
    def _checks(self, run: _Run, _busy: frozenset[int]) -> None:
        target = self.configs.get(run.value)
        if target is None:
            self._set_state(FAILED)  # assert --valid-config (L137-140): no `pending` before it
            return self._end_run()
        if tuple(self.hardware) == tuple(target):
            self._set_state(SUCCESS)  # already applied (L142-146): nothing is touched
            return self._end_run()
        run.mode_change = _modes(self.hardware) != _modes(target)
        if run.mode_change and run.state_at_start == REBOOTING:
            self._set_state(FAILED)  # "did not take effect after rebooting" (L353-355)
            return self._end_run()
        self._write({MIG_STATE_LABEL: PENDING})
        paused = {
            key: PAUSED
            for key in (*OPERAND_LABELS, CLIENT_LABEL)
            if self.labels.get(key, "true") != "false"
            and (key != CLIENT_LABEL or key in self.labels)
        }
        self._write(paused)
        run.phase = "operands"
        stop = (
            self.durations.operands_timeout if self.operands_stuck else self.durations.operands_stop
        )
        run.at = self.now + stop

    def _operands(self, run: _Run, busy: frozenset[int]) -> None:
        if self.operands_stuck:
            # waitForPodsToBeDeleted's error returns without setState (L170-172): the #2833 wedge.
            return self._end_run()
        target = self.configs[run.value]
        if run.mode_change:
            self._kubelet_stopped = self._kubelet_stopped or self.host_gpu_clients
            changing = {i for i, gpu in enumerate(target) if _mode(gpu) != _mode(self.hardware[i])}
            if self.mode_change_needs_reboot or changing & busy:
                if self.with_reboot:
                    self._write({MIG_STATE_LABEL: REBOOTING})
                    self._reboot(target)
                    return None
                # Without WITH_REBOOT the error is ignored; the full apply fails below.
            else:
                self.hardware = tuple(
                    (None if gpu is None else ()) if i in changing else self.hardware[i]
                    for i, gpu in enumerate(target)
                )
        run.phase = "apply"
        run.at = self.now + self.durations.apply
        return None

    def _apply(self, run: _Run, busy: frozenset[int]) -> None:
        # `nvidia-mig-parted apply` walks the GPUs in order and stops at the first error
        # (cmd/nvidia-mig-parted/apply/config.go): the GPUs before it keep their new layout.
        target = self.configs[run.value]
        layout = list(self.hardware)
        for index, gpu in enumerate(target):
            if _mode(layout[index]) != _mode(gpu) or (
                layout[index] != gpu and index in busy
            ):  # "unable to apply MIG config with MIG mode disabled" (or enabled), or destroying
                # a used instance (L206-209)
                self.hardware = tuple(layout)
                self._set_state(FAILED)
                return self._end_run()
            layout[index] = gpu  # "already set to desired value" leaves its pods running
        self.hardware = tuple(layout)
        self._restart_host_kubelet()  # restartHostGPUClients
        self._no_host_restart = self._no_host_restart or self.host_gpu_clients
        # restartKubernetesGPUClients restores the labels and sets the process-wide flag.
        self._write({k: "true" for k, v in self.labels.items() if v == PAUSED})
        self._no_restore = True
        self._write({MIG_STATE_LABEL: SUCCESS})
        return self._end_run()

    def _restart_host_kubelet(self) -> None:
        """The host's kubelet, stopped for a mode change, started again: on a corrupt containerd
        with #2415's fault; left stopped where the process restarted host services before."""
        if not self._kubelet_stopped:
            return
        if self._no_host_restart or self.kubelet_restart_breaks:
            self._kubelet_lost = True
        self._kubelet_stopped = False

    def _reboot(self, target: NodeLayout) -> None:
        self._kubelet_stopped = False  # the boot starts it afresh
        until = self.now + self.durations.reboot
        self._events.append(Reboot(self.now, until))
        self._run = None
        self._waiting = False
        self._node_up_at = until
        # The pending MIG mode takes effect at boot; instances do not survive a reboot.
        self.hardware = tuple(None if gpu is None else () for gpu in target)

    def _set_state(self, state: str) -> None:
        """`setState`: the paused labels back to `true` unless this process completed a full
        reconfigure before (L550-570), then the state (L572-577)."""
        self._restart_host_kubelet()
        if not self._no_restore:
            self._write({k: "true" for k, v in self.labels.items() if v == PAUSED})
        self._write({MIG_STATE_LABEL: state})

    def _write(self, labels: Mapping[str, str | None]) -> None:
        labels = {k: v for k, v in labels.items() if self.labels.get(k) != v}
        if not labels:
            return
        merged = dict(self.labels)
        for key, value in labels.items():
            if value is None:
                merged.pop(key, None)
            else:
                merged[key] = value
        self._set_labels(merged)
        self._events.append(Write(self.now, dict(labels)))

    def _set_labels(self, labels: dict[str, str]) -> None:
        was = self.labels.get(DEVICE_PLUGIN_LABEL, "true")
        self.labels = labels
        now = self.labels.get(DEVICE_PLUGIN_LABEL, "true")
        if was in (PAUSED, "false") and now not in (PAUSED, "false"):
            self._plugin_since = self.now


def _mode(gpu: GpuLayout) -> bool:
    return gpu is not None


def _modes(layout: NodeLayout) -> tuple[bool, ...]:
    return tuple(_mode(gpu) for gpu in layout)
