"""`diff --deployed` against what a deployed stack exported (`pulumi stack output --json`): the
outputs are made by running the program under mocks, then edited the way an older release of
mig-inference would have written them."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from mig_inference.cli import main
from mig_inference.plan.pools.generation import generation_of
from tests.changes.test_day2 import stack, write
from tests.mocked import render_config, stack_rendering

ROOT = Path(__file__).resolve().parent.parent.parent
STACKS = sorted(p.name.removeprefix("Pulumi.").removesuffix(".yaml") for p in (ROOT / "stacks").glob("Pulumi.*.yaml"))  # fmt: skip
IDENTITY = {"gke": "cluster.nodeIdentity", "eks": "cluster.imdsHopLimit"}


def stack_outputs(tmp_path: Path, config: dict[str, Any]) -> dict[str, Any]:
    """`pulumi stack output --json` of `config` deployed by this release (as JSON has it)."""
    rendering = render_config(tmp_path, config)
    assert rendering.error is None, rendering.error
    outputs: dict[str, Any] = json.loads(json.dumps(rendering.outputs))
    return outputs


def as_older_release(outputs: dict[str, Any], cloud: str) -> dict[str, Any]:
    """The outputs as a release before the node identity joined the generation exported them:
    its inputs without that key, the generation and cloud names hashed from those."""
    older = copy.deepcopy(outputs)
    plan = older["plan"]
    for name, pool in plan["pools"].items():
        if IDENTITY[cloud] not in pool["replacement_inputs"]:
            continue
        pool["replacement_inputs"].pop(IDENTITY[cloud])
        pool["generation"] = generation_of(pool["replacement_inputs"])
        pool["physical_name"] = f"{name}-{pool['generation']}"
        older["cloudPools"][name]["name"] = pool["physical_name"]
        for service in plan["services"].values():
            if service["pool"] == name:
                service["generation"] = pool["generation"]
    return older


def diff_json(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    deployed: dict[str, Any],
    config: dict[str, Any],
) -> dict[str, Any]:
    """`diff --json` of `config` against `deployed` (its exit code 0)."""
    path = tmp_path / "deployed.json"
    path.write_text(json.dumps(deployed))
    stack_file = write(tmp_path / "Pulumi.test.yaml", config)
    argv = ["diff", "--deployed", str(path), "--stack-file", str(stack_file), "--json"]
    assert main(argv) == 0
    found: dict[str, Any] = json.loads(capsys.readouterr().out)
    return found


@pytest.mark.parametrize("cloud", ["gke", "eks", "oke"])
def test_a_stack_against_its_own_outputs_is_clean(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], cloud: str
) -> None:
    config = stack(cloud)
    found = diff_json(tmp_path, capsys, stack_outputs(tmp_path, config), config)
    assert [(p["change"], p["upgrade"]) for p in found["pools"]] == [("unchanged", None)]
    assert {s["change"] for s in found["services"]} == {"unaffected"}
    assert found["not_compared"] == [] and found["cost"]["extra_gpus_at_peak"] == 0


@pytest.mark.parametrize(
    ("cloud", "keep", "kept"),
    [
        ("gke", "`cluster.nodeServiceAccount: default` and `cluster.workloadIdentity: false`",
         {"nodeServiceAccount": "default", "workloadIdentity": False}),
        ("eks", "`cluster.imdsHopLimit: 2`", {"imdsHopLimit": 2}),
    ],
)  # fmt: skip
def test_an_upgrade_that_changes_the_generation_is_a_new_generation(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], cloud: str, keep: str, kept: dict[str, Any]
) -> None:
    config = stack(cloud)
    older = as_older_release(stack_outputs(tmp_path, config), cloud)
    found = diff_json(tmp_path, capsys, older, config)
    [pool] = found["pools"]
    assert pool["change"] == "new nodes needed"
    assert [f["key"] for f in pool["fields"]] == [IDENTITY[cloud]]
    upgrade = pool["upgrade"]
    assert upgrade["inputs"] == [IDENTITY[cloud]] and keep in upgrade["keep_old_nodes"]
    assert upgrade["deployed_generation"] == older["plan"]["pools"]["h100"]["generation"]
    assert upgrade["planned_generation"] != upgrade["deployed_generation"]
    # The simulation starts from the exported generation: new nodes next to the old ones.
    assert pool["nodes_created"] == 1 and pool["nodes_replaced"] == 1
    assert found["cost"]["extra_gpus_at_peak"] == 8
    [service] = found["services"]
    assert service["change"] == "moved" and service["replicas_started"] == 4
    # The keys named keep the running nodes.
    keeping = copy.deepcopy(config)
    keeping["cluster"].update(kept)
    found = diff_json(tmp_path, capsys, older, keeping)
    assert [(p["change"], p["upgrade"]) for p in found["pools"]] == [("unchanged", None)]
    assert found["cost"]["extra_gpus_at_peak"] == 0


def test_a_protected_pool_the_upgrade_would_replace_is_refused_with_the_key_that_keeps_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = stack()
    config["cluster"]["protect"] = True
    older = as_older_release(stack_outputs(tmp_path, config), "gke")
    path = tmp_path / "deployed.json"
    path.write_text(json.dumps(older))
    stack_file = write(tmp_path / "Pulumi.test.yaml", config)
    assert main(["diff", "--deployed", str(path), "--stack-file", str(stack_file)]) == 1
    captured = capsys.readouterr()
    assert "caused by the upgrade of mig-inference: the pool runs generation" in captured.out
    assert "error: pool h100: cluster.nodeIdentity needs new nodes, and Pulumi refuses" in (
        captured.err
    )
    assert "or keep the old nodes: set `cluster.nodeServiceAccount: default`" in captured.err


def test_an_export_without_the_generation_says_what_it_could_not_compare(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = stack()
    older = as_older_release(stack_outputs(tmp_path, config), "gke")
    pool = older["plan"]["pools"]["h100"]
    del pool["generation"], pool["legacy_inputs"]
    del older["plan"]["services"]["chat"]["pod"]
    found = diff_json(tmp_path, capsys, older, config)
    # Re-planned with this release: the upgrade's new generation cannot show, and it says so.
    assert [(p["change"], p["upgrade"]) for p in found["pools"]] == [("unchanged", None)]
    assert found["not_compared"] == [
        "pool h100: the deployed stack's export lacks generation: its generation is compared as "
        "this release plans the deployed values (a new generation the upgrade alone brings does "
        "not show)",
        "service chat: the deployed stack's export lacks pod: compared as this release plans "
        "the deployed values",
    ]


def test_an_export_without_legacy_inputs_still_compares_the_generation(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = stack()
    older = as_older_release(stack_outputs(tmp_path, config), "gke")
    del older["plan"]["pools"]["h100"]["legacy_inputs"]  # bootDiskType: pd-balanced
    found = diff_json(tmp_path, capsys, older, config)
    [pool] = found["pools"]
    assert pool["change"] == "new nodes needed"
    assert pool["upgrade"]["inputs"] == ["cluster.nodeIdentity"]
    # The disk left out of both generations is not named as a change.
    assert [f["key"] for f in pool["fields"]] == ["cluster.nodeIdentity"]
    [note] = found["not_compared"]
    assert note.startswith("pool h100: the deployed stack's export lacks legacy_inputs")


def test_a_pod_the_upgrade_renders_otherwise_rolls(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A release that renders the pod otherwise (a new engine image, say) rolls the replicas."""
    config = stack()
    outputs = stack_outputs(tmp_path, config)
    outputs["plan"]["services"]["chat"]["pod"] = "0123456789ab"
    found = diff_json(tmp_path, capsys, outputs, config)
    [service] = found["services"]
    assert service["change"] == "rescheduled"
    assert service["reason"] == (
        "pod template changed (this release renders it otherwise than the deployed one)"
    )
    assert service["replicas_started"] == 4 and service["serving_after"] == 4
    assert [p["change"] for p in found["pools"]] == ["unchanged"]


def run_cli(*argv: str) -> subprocess.CompletedProcess[str]:
    """The `mig-inference` command the package installs, as a user runs it."""
    return subprocess.run(
        [str(Path(sys.executable).with_name("mig-inference")), *argv],
        capture_output=True, text=True, cwd=ROOT, check=False, timeout=600,
    )  # fmt: skip


def test_the_command_line_reads_pulumi_stack_output(tmp_path: Path) -> None:
    """As a user runs it: the shipped GKE stack (protected), deployed by an older release."""
    outputs = json.loads(json.dumps(stack_rendering("gke-h100").outputs))
    path = tmp_path / "out.json"
    path.write_text(json.dumps(outputs))
    same = run_cli("diff", "--deployed", str(path), "--stack", "gke-h100")
    assert same.returncode == 0, same.stderr
    assert "caused by the upgrade" not in same.stdout and "not compared" not in same.stdout
    path.write_text(json.dumps(as_older_release(outputs, "gke")))
    upgraded = run_cli("diff", "--deployed", str(path), "--stack", "gke-h100", "--json")
    assert upgraded.returncode == 1 and "Traceback" not in upgraded.stderr
    found = json.loads(upgraded.stdout)  # the whole of stdout is one JSON document
    [pool] = found["pools"]
    assert pool["upgrade"]["inputs"] == ["cluster.nodeIdentity"]
    assert "keep the old nodes: set `cluster.nodeServiceAccount: default`" in found["refusals"][0]
    assert "error: pool h100-mig: cluster.nodeIdentity needs new nodes" in upgraded.stderr


@pytest.mark.parametrize("shipped", STACKS)
def test_every_shipped_stack_against_its_outputs_and_an_older_releases(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], shipped: str
) -> None:
    """Clean against its own outputs; against outputs without the node identity (the release
    before it joined the generation), every GKE and EKS GPU pool that hashes it gets a new
    generation caused by the upgrade, and OKE's and existing nodes' pools keep theirs."""
    outputs = json.loads(json.dumps(stack_rendering(shipped).outputs))
    path = tmp_path / "out.json"
    path.write_text(json.dumps(outputs))
    argv = ["diff", "--deployed", str(path), "--stack", shipped, "--json"]
    assert main(argv) == 0
    found = json.loads(capsys.readouterr().out)
    assert {p["change"] for p in found["pools"]} == {"unchanged"} and found["refusals"] == []
    assert {s["change"] for s in found["services"]} == {"unaffected"}
    assert found["not_compared"] == []
    cloud = outputs["plan"]["cloud"]
    pools = outputs["plan"]["pools"]
    hashed = {n for n, p in pools.items() if IDENTITY.get(cloud) in p["replacement_inputs"]}
    if not hashed:
        return
    path.write_text(json.dumps(as_older_release(outputs, cloud)))
    protected = any(pools[name]["protect"] for name in hashed)
    assert main(argv) == (1 if protected else 0)  # Pulumi refuses to replace a protected pool
    found = json.loads(capsys.readouterr().out)
    upgraded = {p["name"] for p in found["pools"] if p["upgrade"]}
    assert upgraded == hashed
    assert all(p["upgrade"]["keep_old_nodes"] for p in found["pools"] if p["upgrade"])


def test_an_export_of_another_shape_is_one_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = stack()
    outputs = stack_outputs(tmp_path, config)
    outputs["plan"]["pools"] = [outputs["plan"]["pools"]["h100"]]
    path = tmp_path / "deployed.json"
    path.write_text(json.dumps(outputs))
    stack_file = write(tmp_path / "Pulumi.test.yaml", config)
    assert main(["diff", "--deployed", str(path), "--stack-file", str(stack_file)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert "plan: the deployed plan's `pools` and `services` must be mappings by name" in err


def test_a_pool_entry_that_is_no_mapping_is_not_compared(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = stack("eks")
    older = as_older_release(stack_outputs(tmp_path, config), "eks")
    older["plan"]["pools"]["h100"]["replacement_inputs"] = "gpu=H100-80GB"
    found = diff_json(tmp_path, capsys, older, config)
    assert [p["change"] for p in found["pools"]] == ["unchanged"]
    assert found["not_compared"][0].startswith(
        "pool h100: the deployed stack's export lacks replacement_inputs as a mapping"
    )


def test_an_export_without_the_gateway_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    outputs = json.loads(json.dumps(stack_rendering("ephemeral-gke").outputs))
    del outputs["plan"]["gateway"]
    path = tmp_path / "out.json"
    path.write_text(json.dumps(outputs))
    assert main(["diff", "--deployed", str(path), "--stack", "ephemeral-gke", "--json"]) == 0
    found = json.loads(capsys.readouterr().out)
    assert found["not_compared"] == [
        "gateway: the deployed stack's export lacks it: compared as this release plans the "
        "deployed values"
    ]
    assert found["gateway"] == []
