"""The re-planned stack file keeps the user's file: only the lines of the values that change
differ (comments, order, flow or block style, indentation kept), a key the file left out is
added in the style of its mapping, and an edit that would not read back as decided is refused
before anything is written."""

from __future__ import annotations

import difflib
from pathlib import Path

import pytest

from mig_inference.changes.observed import Observation
from mig_inference.changes.replan import Replan, ServiceReplan
from mig_inference.changes.replanned_stack import replanned_stack
from mig_inference.changes.transition import version_of_stack_file
from mig_inference.errors import MigError
from mig_inference.stackfile.roundtrip import Edit, edited_text
from tests.reference import ROOT

DEMAND_STACK = ROOT / "stacks" / "Pulumi.eks-p4de-demand.yaml"


def changed_lines(before: str, after: str) -> list[str]:
    return [
        line
        for line in difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="", n=0)
        if line[:1] in "+-" and not line.startswith(("+++", "---"))
    ]


def setting(index: int, key: str, value: float) -> Replan:
    observation = Observation("inference", "m", value, 60, value * 3600, 3600)
    service = ServiceReplan(index, "s", "inference", "m", key, -1, value, "test", observation)
    return Replan((service,))


def test_only_the_changed_values_lines_differ_in_the_shipped_demand_stack() -> None:
    text = DEMAND_STACK.read_text(encoding="utf-8")
    services = ("config", "mig-inference:services")
    edited = edited_text(
        text,
        [Edit((*services, 0, "requestsPerSecond"), 120), Edit((*services, 1, "requestsPerSecond"), 50.5),
         Edit((*services, 2, "replicas"), 6)],
        str(DEMAND_STACK),
    )  # fmt: skip
    assert edited.reformatted == 0
    assert changed_lines(text, edited.text) == [
        "-      requestsPerSecond: 60",
        "+      requestsPerSecond: 120",
        "-      requestsPerSecond: 200",
        "+      requestsPerSecond: 50.5",
        "-    - {name: embedder, model: BAAI/bge-large-en-v1.5, engine: tgi, memoryGiB: 3, profile: 1g.10gb, replicas: 4}",
        "+    - {name: embedder, model: BAAI/bge-large-en-v1.5, engine: tgi, memoryGiB: 3, profile: 1g.10gb, replicas: 6}",
    ]


def test_a_missing_key_is_added_in_the_style_of_its_mapping() -> None:
    text = (
        "config:\n"
        "  mig-inference:services:\n"
        "    - name: a   # the first\n"
        "      model: org/a  # its model\n"
        "    # the second, inline\n"
        "    - {name: b, model: org/b}\n"
        "    - name: c\n"
        "      model: org/c\n"
        "    # the end\n"
    )
    services = ("config", "mig-inference:services")
    edits = [Edit((*services, index, "replicas"), index + 2) for index in range(3)]
    assert edited_text(text, edits, "f").text == (
        "config:\n"
        "  mig-inference:services:\n"
        "    - name: a   # the first\n"
        "      model: org/a  # its model\n"
        "      replicas: 2\n"
        "    # the second, inline\n"
        "    - {name: b, model: org/b, replicas: 3}\n"
        "    - name: c\n"
        "      model: org/c\n"
        "      replicas: 4\n"
        "    # the end\n"
    )


def test_a_file_s_own_indentation_is_kept() -> None:
    text = "config:\n    mig-inference:services:\n    -   name: a\n        requestsPerSecond: 10\n"
    edited = edited_text(
        text, [Edit(("config", "mig-inference:services", 0, "requestsPerSecond"), 20)], "f"
    )
    assert edited.reformatted == 0
    assert edited.text == text.replace("10", "20")


def test_lines_the_editor_would_rewrite_are_counted() -> None:
    # Two indentations of lists in one file: ruamel.yaml writes every list with one.
    text = (
        "config:\n"
        "  mig-inference:services:\n"
        "    - name: a\n"
        "      requestsPerSecond: 10\n"
        "      throughput:\n"
        "      - {profile: 1g.10gb, requestsPerSecond: 9}\n"
    )
    edited = edited_text(
        text, [Edit(("config", "mig-inference:services", 0, "requestsPerSecond"), 20)], "f"
    )
    assert (edited.reformatted, edited.first_reformatted) == (1, 6)


def test_the_re_planned_stack_reads_back_as_decided(tmp_path: Path) -> None:
    path = tmp_path / "Pulumi.demand.yaml"
    path.write_text(DEMAND_STACK.read_text(encoding="utf-8"), encoding="utf-8")
    current = version_of_stack_file(path)
    replanned = replanned_stack(path, current, setting(1, "requestsPerSecond", 50))
    assert replanned.version.values["services"][1]["requestsPerSecond"] == 50
    assert replanned.version.secret_keys == current.secret_keys == {"hfToken"}
    unchanged = {k: v for k, v in replanned.version.values.items() if k != "services"}
    assert unchanged == {k: v for k, v in current.values.items() if k != "services"}
    assert "secure: v1:placeholder-set-with-pulumi-config-set-secret" in replanned.text


def test_a_value_shared_through_an_anchor_is_refused(tmp_path: Path) -> None:
    """Setting one service's key in an aliased mapping would change the other service too."""
    path = tmp_path / "Pulumi.shared.yaml"
    path.write_text(
        "config:\n"
        "  mig-inference:cloud: existing\n"
        "  mig-inference:cluster: {name: c, context: ctx}\n"
        "  mig-inference:pools:\n"
        "    - {name: p, gpu: A100-80GB, gpusPerNode: 8, nodes: 1, mig: all-1g.10gb, maxPods: 110,\n"
        "       nodeNames: [n1]}\n"
        "  mig-inference:services:\n"
        "    - &chat {name: chat, model: org/m, memoryGiB: 3, profile: 1g.10gb, replicas: 2}\n"
        "    - *chat\n",
        encoding="utf-8",
    )
    current = version_of_stack_file(path)
    with pytest.raises(MigError, match="does not read back as the re-planned values"):
        replanned_stack(path, current, setting(0, "replicas", 3))


def test_a_stack_file_without_services_to_re_plan_is_one_error(tmp_path: Path) -> None:
    path = tmp_path / "Pulumi.none.yaml"
    path.write_text("config:\n  mig-inference:cloud: eks\n", encoding="utf-8")
    current = version_of_stack_file(path)
    with pytest.raises(MigError, match="has no mig-inference:services to re-plan"):
        replanned_stack(path, current, setting(0, "replicas", 3))
