"""The rollout simulator's MIG manager (mig_inference/rollout/mig_manager.py) against the model
written apart from it from NVIDIA's source (tests/nvidia_node.py): the same scenarios, driven the
same way, must give the same label writes in the same order, the same layouts, the same labels
and the same devices advertised in turn. Their durations are cut differently (the simulator's
`operands_stop` is one phase, NVIDIA's waits poll operand by operand), so times are not compared;
scenarios leave each step time to finish. Where they disagreed, NVIDIA's source decided which was
wrong."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest

from mig_inference.rollout.mig_manager import Durations, MigManager
from tests.fake_apiserver import steps_of
from tests.nvidia_node import (
    CLIENT,
    CONFIG_LABEL,
    OPERANDS,
    PAUSED,
    PLUGIN,
    PLUGIN_CONFIG_LABEL,
    STATE_LABEL,
    Layout,
    NvidiaNode,
)

SEVEN = ("1g.10gb",) * 7
TWO = ("3g.40gb", "3g.40gb")
CONFIGS: dict[str, Layout] = {
    "all-disabled": (None, None),
    "all-1g.10gb": (SEVEN, SEVEN),
    "all-3g.40gb": (TWO, TWO),
    "first-1g": (SEVEN, TWO),
    "half-disabled": (None, TWO),
}
DURATIONS = Durations(
    pod_start=10, checks=1, operands_stop=2, operands_timeout=5, apply=3, reboot=20, plugin_start=2
)
MODELS = ("simulator", "nvidia")


@dataclass
class Run:
    """One model driven through a scenario: what it wrote and where it ended."""

    agent: Any
    busy: set[int] = field(default_factory=set)
    now: int = 0
    writes: list[tuple[float, dict[str, str | None]]] = field(default_factory=list)
    reboots: list[tuple[float, float]] = field(default_factory=list)
    advertised: list[tuple[int, dict[str, int]]] = field(default_factory=list)

    def until(self, end: int) -> None:
        """Time passes a second at a time; the node's labels follow the agent's writes."""
        while self.now < end:
            self.now += 1
            for event in self.agent.advance(self.now, self.busy):
                if hasattr(event, "labels"):
                    self.writes.append((event.time, dict(event.labels)))
                else:
                    self.reboots.append((event.time, event.until))
            seen = self.agent.advertised()
            if not self.advertised or self.advertised[-1][1] != seen:
                self.advertised.append((self.now, seen))

    def relabel(self, changes: Mapping[str, str | None]) -> None:
        labels = dict(self.agent.labels)
        for key, value in changes.items():
            if value is None:
                labels.pop(key, None)
            else:
                labels[key] = value
        self.agent.observe(labels)


def start(model: str, config: str = "all-3g.40gb", *, labels: Mapping[str, str] | None = None,
          hardware: Layout | None = None, **options: Any) -> Run:  # fmt: skip
    node_labels = dict(labels) if labels is not None else {
        CONFIG_LABEL: config, STATE_LABEL: "success", CLIENT: "true",
        **dict.fromkeys(OPERANDS, "true")}  # fmt: skip
    layout = CONFIGS[config] if hardware is None else hardware
    if model == "simulator":
        agent: Any = MigManager(CONFIGS, layout, node_labels, durations=DURATIONS, **options)
    else:
        agent = NvidiaNode(CONFIGS, layout, node_labels, steps=steps_of(DURATIONS), **options)
    return Run(agent)


def new_value(run: Run) -> None:
    run.relabel({CONFIG_LABEL: "all-1g.10gb"})
    run.until(60)


def already_applied(run: Run) -> None:
    run.relabel({CONFIG_LABEL: "all-1g.10gb"})
    run.until(30)
    run.relabel({CONFIG_LABEL: "all-3g.40gb"})
    run.until(60)


def unknown_config(run: Run) -> None:
    run.relabel({CONFIG_LABEL: "all-7g.80gb"})
    run.until(30)


def same_value_and_state_removal_do_nothing(run: Run) -> None:
    run.relabel({CONFIG_LABEL: "all-3g.40gb"})
    run.relabel({STATE_LABEL: None})
    run.until(40)


def busy_gpu_fails_and_restores_operands(run: Run) -> None:
    run.busy = {0}
    run.relabel({CONFIG_LABEL: "all-1g.10gb"})
    run.until(40)


def failure_after_a_full_reconfigure_leaves_operands_paused(run: Run) -> None:
    run.relabel({CONFIG_LABEL: "all-1g.10gb"})
    run.until(30)
    run.busy = {0, 1}
    run.relabel({CONFIG_LABEL: "all-3g.40gb"})
    run.until(60)


def restart_reapplies_the_label_once(run: Run) -> None:
    failure_after_a_full_reconfigure_leaves_operands_paused(run)
    run.busy = set()
    run.agent.restart()
    run.until(120)


def values_coalesce_while_a_run_works(run: Run) -> None:
    run.relabel({CONFIG_LABEL: "all-1g.10gb"})
    run.until(3)
    run.relabel({CONFIG_LABEL: "first-1g"})
    run.relabel({CONFIG_LABEL: "all-disabled"})
    run.relabel({CONFIG_LABEL: "half-disabled"})
    run.until(80)


def label_removed_during_a_run(run: Run) -> None:
    run.relabel({CONFIG_LABEL: "all-1g.10gb"})
    run.until(3)
    run.relabel({CONFIG_LABEL: None})
    run.until(60)


def stuck_operands_wedge_in_pending(run: Run) -> None:
    run.agent.operands_stuck = True
    run.relabel({CONFIG_LABEL: "all-1g.10gb"})
    run.until(40)


def the_wedge_ends_with_a_restart_once_the_operands_go(run: Run) -> None:
    stuck_operands_wedge_in_pending(run)
    run.agent.operands_stuck = False
    run.until(50)
    run.agent.restart()
    run.until(100)


def mode_change_with_reboot(run: Run) -> None:
    run.relabel({CONFIG_LABEL: "all-1g.10gb"})
    run.until(120)


def mode_change_without_reboot_fails(run: Run) -> None:
    run.relabel({CONFIG_LABEL: "all-1g.10gb"})
    run.until(40)


def a_mode_change_on_a_busy_gpu_without_reboot(run: Run) -> None:
    run.busy = {1}
    run.relabel({CONFIG_LABEL: "all-disabled"})
    run.until(40)


def partial_apply_stops_at_the_busy_gpu(run: Run) -> None:
    run.busy = {1}
    run.relabel({CONFIG_LABEL: "all-1g.10gb"})
    run.until(40)


def a_busy_gpu_whose_layout_stays_does_not_fail(run: Run) -> None:
    run.busy = {1}
    run.relabel({CONFIG_LABEL: "first-1g"})
    run.until(40)


def the_apply_walks_the_gpus_in_order_when_a_mode_change_did_not_take(run: Run) -> None:
    # GPU 0 keeps MIG on with other instances, GPU 1 must turn MIG on: without WITH_REBOOT the
    # mode change's error is not checked (reconfigure.go L184-204) and `apply` changes GPU 0
    # before it stops at GPU 1 (apply/config.go).
    run.relabel({CONFIG_LABEL: "all-1g.10gb"})
    run.until(40)


def a_restart_in_the_middle_of_a_run(run: Run) -> None:
    run.relabel({CONFIG_LABEL: "all-1g.10gb"})
    run.until(2)
    run.agent.restart()
    run.until(60)


def a_wedge_whose_layout_is_applied_is_restored_by_a_restart(run: Run) -> None:
    failure_after_a_full_reconfigure_leaves_operands_paused(run)
    run.busy = set()
    run.relabel({CONFIG_LABEL: "all-1g.10gb"})
    run.until(90)
    run.agent.restart()
    run.until(140)


def a_pod_that_starts_applies_the_label(run: Run) -> None:
    run.until(40)


def deploy_labels_the_operator_has_not_set_yet(run: Run) -> None:
    run.relabel({CONFIG_LABEL: "all-1g.10gb"})
    run.until(40)


def the_operator_deletes_the_plugin_then_brings_it_back(run: Run) -> None:
    """`devicePlugin.enabled: false`: the operator deletes the plugin's DaemonSet (gpu-operator
    v26.7.0 `controllers/object_controls.go` `DaemonSet`), the node's label untouched."""
    run.until(5)
    run.agent.set_plugin_daemonset(False)
    run.until(10)
    run.agent.set_plugin_daemonset(True)
    run.until(20)


def a_new_layout_while_the_operator_runs_no_plugin(run: Run) -> None:
    run.agent.set_plugin_daemonset(False)
    run.relabel({CONFIG_LABEL: "all-1g.10gb"})
    run.until(60)


SCENARIOS: dict[str, tuple[Callable[[Run], None], dict[str, Any]]] = {
    "new_value": (new_value, {}),
    "already_applied": (already_applied, {}),
    "unknown_config": (unknown_config, {}),
    "same_value_and_state_removal_do_nothing": (same_value_and_state_removal_do_nothing, {}),
    "busy_gpu_fails_and_restores_operands": (busy_gpu_fails_and_restores_operands, {}),
    "failure_after_a_full_reconfigure_leaves_operands_paused": (
        failure_after_a_full_reconfigure_leaves_operands_paused, {}),
    "restart_reapplies_the_label_once": (restart_reapplies_the_label_once, {}),
    "values_coalesce_while_a_run_works": (values_coalesce_while_a_run_works, {}),
    "label_removed_during_a_run": (label_removed_during_a_run, {}),
    "stuck_operands_wedge_in_pending": (stuck_operands_wedge_in_pending, {}),
    "the_wedge_ends_with_a_restart_once_the_operands_go": (
        the_wedge_ends_with_a_restart_once_the_operands_go, {}),
    "mode_change_with_reboot": (mode_change_with_reboot, {
        "config": "all-disabled", "with_reboot": True, "mode_change_needs_reboot": True}),
    "mode_change_without_reboot_fails": (mode_change_without_reboot_fails, {
        "config": "all-disabled", "mode_change_needs_reboot": True}),
    "a_mode_change_on_a_busy_gpu_without_reboot": (a_mode_change_on_a_busy_gpu_without_reboot, {}),
    "a_pod_that_starts_applies_the_label": (a_pod_that_starts_applies_the_label, {
        "hardware": CONFIGS["all-disabled"], "running": False}),
    "deploy_labels_the_operator_has_not_set_yet": (deploy_labels_the_operator_has_not_set_yet, {
        "labels": {CONFIG_LABEL: "all-3g.40gb"}}),
    "partial_apply_stops_at_the_busy_gpu": (partial_apply_stops_at_the_busy_gpu, {}),
    "a_busy_gpu_whose_layout_stays_does_not_fail": (a_busy_gpu_whose_layout_stays_does_not_fail, {}),
    "the_apply_walks_the_gpus_in_order_when_a_mode_change_did_not_take": (
        the_apply_walks_the_gpus_in_order_when_a_mode_change_did_not_take, {
            "hardware": (TWO, None), "mode_change_needs_reboot": True}),
    "a_restart_in_the_middle_of_a_run": (a_restart_in_the_middle_of_a_run, {}),
    "a_wedge_whose_layout_is_applied_is_restored_by_a_restart": (
        a_wedge_whose_layout_is_applied_is_restored_by_a_restart, {}),
    "the_operator_deletes_the_plugin_then_brings_it_back": (
        the_operator_deletes_the_plugin_then_brings_it_back, {}),
    "a_new_layout_while_the_operator_runs_no_plugin": (
        a_new_layout_while_the_operator_runs_no_plugin, {}),
}  # fmt: skip


def play(model: str, name: str) -> Run:
    scenario, options = SCENARIOS[name]
    run = start(model, **options)
    scenario(run)
    return run


def writes(run: Run) -> list[dict[str, str | None]]:
    return [labels for _, labels in run.writes]


def devices_in_turn(run: Run) -> list[dict[str, int]]:
    return [seen for _, seen in run.advertised]


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_both_models_write_the_same_labels_and_end_the_same(name: str) -> None:
    simulator, nvidia = (play(model, name) for model in MODELS)
    assert writes(simulator) == writes(nvidia)
    assert len(simulator.reboots) == len(nvidia.reboots)
    assert simulator.agent.hardware == nvidia.agent.hardware
    assert simulator.agent.labels == nvidia.agent.labels
    assert devices_in_turn(simulator) == devices_in_turn(nvidia)


def states(run: Run) -> list[str | None]:
    return [labels[STATE_LABEL] for _, labels in run.writes if STATE_LABEL in labels]


@pytest.mark.parametrize("model", MODELS)
def test_what_the_source_says_holds_in_both(model: str) -> None:
    """The scenarios' outcomes, as NVIDIA's source reads (so agreement is not agreement on a
    mistake)."""
    assert states(play(model, "new_value")) == ["pending", "success"]
    assert states(play(model, "already_applied"))[-1:] == ["success"]
    assert states(play(model, "unknown_config")) == ["failed"]  # no pending: L137-140
    assert play(model, "same_value_and_state_removal_do_nothing").writes == []
    # The plugin leaves the node with its DaemonSet, label and all, and serves again once a new
    # pod has registered; a MIG change meanwhile advertises nothing.
    off_and_on = devices_in_turn(play(model, "the_operator_deletes_the_plugin_then_brings_it_back"))
    assert off_and_on == [{"nvidia.com/mig-3g.40gb": 4}, {}, {"nvidia.com/mig-3g.40gb": 4}]
    unplugged = play(model, "a_new_layout_while_the_operator_runs_no_plugin")
    assert states(unplugged) == ["pending", "success"]
    assert devices_in_turn(unplugged) == [{}]
    busy = play(model, "busy_gpu_fails_and_restores_operands")
    assert states(busy) == ["pending", "failed"] and busy.agent.labels[PLUGIN] == "true"
    wedged = play(model, "failure_after_a_full_reconfigure_leaves_operands_paused")
    assert states(wedged)[-1] == "failed" and wedged.agent.labels[PLUGIN] == PAUSED
    restarted = play(model, "restart_reapplies_the_label_once")
    assert restarted.agent.labels[STATE_LABEL] == "success"
    assert restarted.agent.labels[PLUGIN] == "true"
    assert restarted.agent.advertised() == {"nvidia.com/mig-3g.40gb": 4}
    stuck = play(model, "stuck_operands_wedge_in_pending")
    assert stuck.agent.labels[STATE_LABEL] == "pending" and stuck.agent.advertised() == {}
    recovered = play(model, "the_wedge_ends_with_a_restart_once_the_operands_go")
    assert recovered.agent.labels[STATE_LABEL] == "success"
    assert recovered.agent.advertised() == {"nvidia.com/mig-1g.10gb": 14}
    rebooted = play(model, "mode_change_with_reboot")
    assert states(rebooted) == ["pending", "rebooting", "pending", "success"]
    assert len(rebooted.reboots) == 1
    assert states(play(model, "mode_change_without_reboot_fails")) == ["pending", "failed"]
    assert states(play(model, "label_removed_during_a_run"))[-1] == "failed"


def test_a_device_plugin_that_restarts_while_its_config_is_unknown_advertises_nothing() -> None:
    """NVIDIA's config manager (k8s-device-plugin v0.20.0) exits on a label naming a config the
    ConfigMap lacks: a running plugin keeps serving, a restarted one waits in its init container
    until the node names a known config (the simulator's model of it:
    tests/rollout/test_plugin_configs.py)."""
    labels = {CONFIG_LABEL: "all-3g.40gb", STATE_LABEL: "success", PLUGIN_CONFIG_LABEL: "p-old",
              **dict.fromkeys(OPERANDS, "true")}  # fmt: skip
    node = NvidiaNode(CONFIGS, CONFIGS["all-3g.40gb"], labels, steps=steps_of(DURATIONS),
                      plugin_configs={"p-old"})  # fmt: skip
    served = {"nvidia.com/mig-3g.40gb": 4}
    node.plugin_configs = {"p-new"}  # the old key left the ConfigMap; the node still names it
    node.advance(10)
    assert node.advertised() == served  # only the sidecar exits
    node.observe({**node.labels, PLUGIN: PAUSED})  # the plugin's pod goes (a MIG manager run)
    node.advance(20)
    node.observe({**node.labels, PLUGIN: "true"})
    node.advance(60)
    assert node.advertised() == {}  # stuck in config-manager-init
    node.observe({**node.labels, PLUGIN_CONFIG_LABEL: "p-new"})
    node.advance(100)
    assert node.advertised() == served
