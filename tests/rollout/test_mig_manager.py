"""The model of NVIDIA's MIG manager v0.15.0 (mig_inference/rollout/mig_manager.py): each test is
one behaviour the research notes read in its source."""

from __future__ import annotations

from mig_inference.names.labels import MIG_CONFIG_LABEL, MIG_STATE_LABEL
from mig_inference.rollout.mig_manager import (
    CLIENT_LABEL,
    DEVICE_PLUGIN_LABEL,
    OPERAND_LABELS,
    PAUSED,
    Durations,
    Event,
    MigManager,
    NodeLayout,
    Reboot,
    Write,
)

SEVEN = ("1g.10gb",) * 7
TWO = ("3g.40gb", "3g.40gb")
CONFIGS: dict[str, NodeLayout] = {
    "all-disabled": (None, None),
    "all-1g.10gb": (SEVEN, SEVEN),
    "all-3g.40gb": (TWO, TWO),
    "first-1g": (SEVEN, TWO),
    "copy-of-3g": (TWO, TWO),
}
FAST = Durations(
    pod_start=10, checks=1, operands_stop=2, operands_timeout=5, apply=3, reboot=20, plugin_start=2
)


def manager(config: str = "all-3g.40gb", **options: object) -> MigManager:
    labels = {MIG_CONFIG_LABEL: config, MIG_STATE_LABEL: "success", CLIENT_LABEL: "true",
              **dict.fromkeys(OPERAND_LABELS, "true")}  # fmt: skip
    return MigManager(CONFIGS, CONFIGS[config], labels, durations=FAST, **options)  # type: ignore[arg-type]


def relabel(m: MigManager, changes: dict[str, str | None]) -> None:
    """Someone patches the node's labels (the manager sees the watch event)."""
    labels = dict(m.labels)
    for key, value in changes.items():
        if value is None:
            labels.pop(key, None)
        else:
            labels[key] = value
    m.observe(labels)


def states(events: list[Event]) -> list[str | None]:
    return [e.labels[MIG_STATE_LABEL] for e in events if isinstance(e, Write)
            and MIG_STATE_LABEL in e.labels]  # fmt: skip


def test_a_new_value_is_applied_pending_then_success() -> None:
    m = manager()
    relabel(m, {MIG_CONFIG_LABEL: "all-1g.10gb"})
    events = m.advance(100)
    assert states(events) == ["pending", "success"]
    assert m.hardware == CONFIGS["all-1g.10gb"]
    assert m.advertised() == {"nvidia.com/mig-1g.10gb": 14}
    assert all(m.labels[key] == "true" for key in (*OPERAND_LABELS, CLIENT_LABEL))


def test_the_old_state_is_not_cleared_when_a_new_value_arrives() -> None:
    m = manager()
    relabel(m, {MIG_CONFIG_LABEL: "all-1g.10gb"})
    assert m.labels[MIG_STATE_LABEL] == "success"  # stale, names no config
    assert m.advance(0.5) == [] and m.running_config == "all-1g.10gb"
    assert states(m.advance(1)) == ["pending"]


def test_operands_are_paused_and_nothing_is_advertised_while_it_works() -> None:
    m = manager()
    relabel(m, {MIG_CONFIG_LABEL: "all-1g.10gb"})
    m.advance(2)
    assert {key: m.labels[key] for key in (*OPERAND_LABELS, CLIENT_LABEL)} == dict.fromkeys(
        (*OPERAND_LABELS, CLIENT_LABEL), PAUSED
    )
    assert m.advertised() == {}
    m.advance(6)  # success at 6; the device plugin needs 2 more seconds
    assert m.labels[DEVICE_PLUGIN_LABEL] == "true" and m.advertised() == {}
    m.advance(8)
    assert m.advertised() == {"nvidia.com/mig-1g.10gb": 14}


def test_the_client_label_is_paused_only_when_the_node_has_it() -> None:
    m = manager()
    relabel(m, {CLIENT_LABEL: None, MIG_CONFIG_LABEL: "all-1g.10gb"})
    m.advance(2)
    assert CLIENT_LABEL not in m.labels


def test_the_same_value_again_or_any_other_label_does_nothing() -> None:
    m = manager()
    relabel(m, {MIG_CONFIG_LABEL: "all-3g.40gb"})
    relabel(m, {"team": "a", MIG_STATE_LABEL: None})
    assert m.advance(1000) == [] and m.running_config is None
    assert MIG_STATE_LABEL not in m.labels  # nothing writes it back


def test_success_directly_when_the_hardware_already_matches() -> None:
    m = manager()
    relabel(m, {MIG_CONFIG_LABEL: "copy-of-3g", MIG_STATE_LABEL: None})
    events = m.advance(100)
    assert states(events) == ["success"]
    assert all(m.labels[key] == "true" for key in OPERAND_LABELS)  # nothing paused


def test_an_unknown_config_fails_at_once_without_pending() -> None:
    m = manager()
    relabel(m, {MIG_CONFIG_LABEL: "no-such-config"})
    events = m.advance(100)
    assert states(events) == ["failed"]
    assert [e.time for e in events] == [1]
    assert m.hardware == CONFIGS["all-3g.40gb"]


def test_values_coalesce_the_latest_runs_next() -> None:
    m = manager()
    relabel(m, {MIG_CONFIG_LABEL: "all-1g.10gb"})
    m.advance(0.5)
    relabel(m, {MIG_CONFIG_LABEL: "all-disabled"})
    relabel(m, {MIG_CONFIG_LABEL: "first-1g"})
    events = m.advance(100)
    assert states(events) == ["pending", "success", "pending", "success"]
    assert m.hardware == CONFIGS["first-1g"]  # all-disabled never ran


def test_a_to_b_to_a_during_a_run_gives_no_second_run() -> None:
    m = manager()
    relabel(m, {MIG_CONFIG_LABEL: "all-1g.10gb"})
    m.advance(0.5)
    relabel(m, {MIG_CONFIG_LABEL: "first-1g"})
    relabel(m, {MIG_CONFIG_LABEL: "all-1g.10gb"})
    assert states(m.advance(100)) == ["pending", "success"]


def test_a_pod_start_applies_the_current_value_once() -> None:
    m = MigManager(CONFIGS, CONFIGS["all-disabled"], {MIG_CONFIG_LABEL: "all-3g.40gb"},
                   durations=FAST, running=False)  # fmt: skip
    assert m.advance(9) == [] and not m.pod_ready
    assert states(m.advance(100)) == ["pending", "success"]
    assert m.hardware == CONFIGS["all-3g.40gb"]


def test_a_pod_start_without_a_label_waits_for_one() -> None:
    m = MigManager(CONFIGS, CONFIGS["all-disabled"], {}, durations=FAST, running=False)
    assert m.advance(100) == []
    relabel(m, {MIG_CONFIG_LABEL: "all-1g.10gb"})
    assert states(m.advance(200)) == ["pending", "success"]


def test_a_busy_gpu_whose_layout_changes_fails_and_a_same_value_relabel_cannot_recover() -> None:
    m = manager()
    relabel(m, {MIG_CONFIG_LABEL: "all-1g.10gb"})
    assert states(m.advance(100, busy_gpus={1})) == ["pending", "failed"]
    assert m.hardware == (SEVEN, TWO)  # GPU 0 applied, GPU 1 held
    assert all(m.labels[key] == "true" for key in OPERAND_LABELS)  # first full run: restored
    relabel(m, {MIG_CONFIG_LABEL: "all-1g.10gb", MIG_STATE_LABEL: None})
    assert m.advance(1000) == []  # the same value: no run, no state ever again
    m.restart()
    assert states(m.advance(2000)) == ["pending", "success"]
    assert m.hardware == CONFIGS["all-1g.10gb"]


def test_a_busy_gpu_whose_layout_stays_does_not_stop_the_apply() -> None:
    m = manager("all-1g.10gb")
    relabel(m, {MIG_CONFIG_LABEL: "first-1g"})
    assert states(m.advance(100, busy_gpus={0})) == ["pending", "success"]


def test_with_reboot_a_mode_change_reboots_the_node() -> None:
    m = manager("all-disabled", with_reboot=True, mode_change_needs_reboot=True)
    relabel(m, {MIG_CONFIG_LABEL: "all-1g.10gb"})
    events = m.advance(4)
    assert states(events) == ["pending", "rebooting"]
    assert isinstance(events[-1], Reboot) and events[-1].until == 23
    assert not m.node_ready and m.advertised() == {}
    assert m.labels[DEVICE_PLUGIN_LABEL] == PAUSED  # stays paused across the reboot
    later = m.advance(200)
    assert states(later) == ["pending", "success"]
    assert next(e.time for e in later if isinstance(e, Write)) == 23 + 10 + 1  # up, pod, checks
    assert m.hardware == CONFIGS["all-1g.10gb"]


def test_without_reboot_a_mode_change_that_needs_one_fails() -> None:
    m = manager("all-disabled", mode_change_needs_reboot=True)
    relabel(m, {MIG_CONFIG_LABEL: "all-1g.10gb"})
    assert states(m.advance(100)) == ["pending", "failed"]
    assert m.hardware == CONFIGS["all-disabled"]


def test_a_mode_change_on_a_free_gpu_needs_no_reboot() -> None:
    m = manager("all-disabled", with_reboot=True)
    relabel(m, {MIG_CONFIG_LABEL: "all-1g.10gb"})
    events = m.advance(100)
    assert states(events) == ["pending", "success"]
    assert not any(isinstance(e, Reboot) for e in events)


def test_after_one_full_run_a_failure_leaves_the_operands_paused_until_a_restart() -> None:
    m = manager()
    relabel(m, {MIG_CONFIG_LABEL: "all-1g.10gb"})
    m.advance(100)
    relabel(m, {MIG_CONFIG_LABEL: "all-3g.40gb"})
    assert states(m.advance(200, busy_gpus={0, 1})) == ["pending", "failed"]
    assert m.labels[DEVICE_PLUGIN_LABEL] == PAUSED and m.advertised() == {}
    m.restart()
    assert states(m.advance(300)) == ["pending", "success"]
    assert m.labels[DEVICE_PLUGIN_LABEL] == "true"
    assert m.advertised() == {"nvidia.com/mig-3g.40gb": 4}


def test_operand_pods_that_never_stop_leave_pending_forever_until_a_restart() -> None:
    m = manager(operands_stuck=True)
    relabel(m, {MIG_CONFIG_LABEL: "all-1g.10gb"})
    assert states(m.advance(10_000)) == ["pending"]
    assert m.labels[MIG_STATE_LABEL] == "pending" and m.running_config is None
    assert m.labels[DEVICE_PLUGIN_LABEL] == PAUSED and m.advertised() == {}
    m.operands_stuck = False
    m.restart()
    # `pending` again is a no-op patch: the next change a watcher sees is `success`.
    assert states(m.advance(20_000)) == ["success"]
    assert m.advertised() == {"nvidia.com/mig-1g.10gb": 14}


def test_a_label_removed_during_a_run_runs_the_empty_value_which_fails() -> None:
    m = manager()
    relabel(m, {MIG_CONFIG_LABEL: "all-1g.10gb"})
    m.advance(0.5)
    relabel(m, {MIG_CONFIG_LABEL: None})
    assert states(m.advance(100)) == ["pending", "success", "failed"]


def test_removing_then_re_adding_the_same_value_while_idle_applies_it() -> None:
    m = manager()
    relabel(m, {MIG_CONFIG_LABEL: None})
    assert m.advance(100) == []
    relabel(m, {MIG_CONFIG_LABEL: "all-3g.40gb", MIG_STATE_LABEL: None})
    assert states(m.advance(200)) == ["success"]
