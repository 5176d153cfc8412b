"""A small demand change keeps a `mig: auto` pool's layout: among the plans with the fewest
nodes the one re-partitioning the fewest GPUs of the deployed layout (`migPrefer`, filled by
`plan --deployed`) wins, never at the cost of a node."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from msgspec.structs import replace

from mig_inference.errors import MigError
from mig_inference.gpus.catalog import resolve_gpu
from mig_inference.gpus.layout import Layout, parse_custom_layout
from mig_inference.solving import preferences
from mig_inference.solving.bench import demand_fleet, llm_fleet
from mig_inference.solving.packing import Workload, pack
from mig_inference.solving.throughput import parvagpu_scenarios
from mig_inference.spec.files import load_stack_file
from tests.solving.test_packing import check_plan

ROOT = Path(__file__).resolve().parent.parent.parent
H100 = resolve_gpu("H100-80GB")


def pool_plan(fleet: list[Workload], deployed: list[Layout] | None = None):  # type: ignore[no-untyped-def]
    return pack(
        H100, fleet, gpus_per_node=8, uniform_nodes=True, single_profile=True, baselines=False,
        deployed=deployed or (),
    )  # fmt: skip


def moved(before: list[Layout], after: list[Layout]) -> int:
    return sum(1 for old, new in zip(before, after, strict=True) if old != new)


def nudged(fleet: list[Workload]) -> list[tuple[str, list[Workload]]]:
    """Every fleet one replica more or less of one workload."""
    out = []
    for index, workload in enumerate(fleet):
        for step in (1, -1):
            if workload.replicas + step > 0:
                changed = list(fleet)
                changed[index] = replace(workload, replicas=workload.replicas + step)
                out.append((f"{workload.name}{step:+d}", changed))
    return out


def test_a_one_replica_change_keeps_most_of_the_deployed_layout() -> None:
    deployed = pool_plan(llm_fleet()).node_layouts()[0]
    reshuffled = 0
    for name, fleet in nudged(llm_fleet()):
        alone, kept = pool_plan(fleet), pool_plan(fleet, deployed)
        check_plan(kept, fleet)
        assert kept.node_count == alone.node_count, name  # never a node more
        after = kept.node_layouts()[0]
        assert kept.kept_gpus == 8 - moved(deployed, after), name
        assert moved(deployed, after) <= moved(deployed, alone.node_layouts()[0]), name
        reshuffled += moved(deployed, alone.node_layouts()[0]) - moved(deployed, after)
    # Without the preference these changes re-partition most GPUs of the node.
    assert reshuffled >= 40


def test_the_deployed_layout_is_kept_whole_when_it_still_holds_the_fleet() -> None:
    deployed = pool_plan(llm_fleet()).node_layouts()[0]
    fewer = [
        replace(w, replicas=w.replicas - 1) if w.name == "embedder" else w for w in llm_fleet()
    ]
    plan = pool_plan(fewer, deployed)
    assert plan.kept_gpus == 8 and plan.node_layouts()[0] == deployed
    assert plan.refined_optimal


def test_layouts_parse_as_they_print() -> None:
    for text in ("3g.40gb+2x2g.20gb", "2x1g.20gb+4x1g.10gb", "7g.80gb"):
        assert str(parse_custom_layout(H100, text)) == text


def stack(
    tmp_path: Path, name: str, bump: str | None = None, pool: dict[str, object] | None = None
) -> Path:
    base = yaml.safe_load((ROOT / "stacks" / "Pulumi.eks-p5-auto.yaml").read_text())
    config = base["config"]
    config.pop("mig-inference:hfToken")
    config["mig-inference:pools"][0].update(pool or {})
    config["mig-inference:services"] = [
        {"name": w.name.replace(".", "-"), "model": f"example/{w.name}", "engine": "tgi",
         "memoryGiB": round((w.memory_mib or 0) / 1024, 3), "pool": "h100-auto",
         "replicas": w.replicas + (1 if w.name == bump else 0)}
        for w in llm_fleet()
    ]  # fmt: skip
    path = tmp_path / f"Pulumi.{name}.yaml"
    path.write_text(yaml.safe_dump(base))
    return path


def plan_json(*argv: str) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-m", "mig", "plan", *argv, "--json"], cwd=ROOT, capture_output=True,
        text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def auto_of(plan: dict[str, object]) -> dict[str, object]:
    pools = plan["pools"]
    assert isinstance(pools, list)
    return pools[0]["auto"]  # type: ignore[no-any-return]


def test_plan_deployed_keeps_the_layout_and_pinning_it_plans_the_same(tmp_path: Path) -> None:
    deployed = stack(tmp_path, "deployed")
    changed = stack(tmp_path, "changed", bump="embedder")
    before = auto_of(plan_json("--stack-file", str(deployed)))["mig_prefer"]
    alone = auto_of(plan_json("--stack-file", str(changed)))
    assert isinstance(before, list) and alone["mig_prefer"] != before
    kept = auto_of(plan_json("--stack-file", str(changed), "--deployed", str(deployed)))
    assert kept["mig_prefer"] == before and kept["kept_gpus_per_node"] == 8
    # What `pulumi up` plans once the printed line is in the stack file.
    pinned = stack(tmp_path, "pinned", bump="embedder", pool={"migPrefer": before})
    assert auto_of(plan_json("--stack-file", str(pinned)))["mig_prefer"] == before


@pytest.mark.parametrize(
    ("pool", "path", "message"),
    [
        ({"mig": "all-3g.40gb", "nodes": 1, "migPrefer": ["3g.40gb"]}, "pools[0].migPrefer",
         "only applies to mig: auto"),
        ({"migPrefer": ["7g.80gb", "8g.90gb"]}, "pools[0].migPrefer[1]", "8g.90gb"),
        ({"migPrefer": ["7g.80gb"] * 3}, "pools[0].migPrefer", "lists 3 GPU layout(s)"),
    ],
)  # fmt: skip
def test_bad_mig_prefer_is_named_by_key(
    tmp_path: Path, pool: dict[str, object], path: str, message: str
) -> None:
    from mig_inference.plan import plan_stack

    with pytest.raises(MigError) as raised:
        plan_stack(load_stack_file(stack(tmp_path, "bad", pool=pool)))
    [error] = raised.value.errors
    assert error.path == f"mig-inference:{path}" and message in error.message


def test_preference_stages_state_what_they_found_and_what_they_proved(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Stopped on a tiny work limit, each preference stage still says what it proved: a bound
    that the fully proven answer never beats, reached by the value exactly when proven. (SLO5
    and SLO6 with MPS are proven within one node; on the seeded 20-demand fleet the limit
    stops the fewest-layouts stage.)"""
    gpu = resolve_gpu("A100-80GB")
    fleets = [s.workloads for s in parvagpu_scenarios("mps")[4:]] + [demand_fleet(20, seed=1)]
    proven = [pack(gpu, fleet).preferences for fleet in fleets]
    monkeypatch.setattr(preferences, "REFINE_NODES", 1)
    limited = [pack(gpu, fleet).preferences for fleet in fleets]
    assert all(stage.proven and stage.value == stage.bound for s in proven for stage in s)
    assert any(not stage.proven for stages in limited for stage in stages)
    for full, stages in zip(proven, limited, strict=True):
        assert all(stage.proven == (stage.value == stage.bound) for stage in stages)
        assert all(stage.bound <= stage.value for stage in stages)
        distinct = [s for s in stages if s.name == preferences.DISTINCT]
        best = [s for s in full if s.name == preferences.DISTINCT]
        assert distinct[0].bound <= best[0].value <= distinct[0].value
