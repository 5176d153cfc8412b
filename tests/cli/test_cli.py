"""Every CLI verb, in-process for speed, and once as a real subprocess for bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from mig_inference.cli import main
from tests.reference import ROOT, mig_parted_v015_configs


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_profiles_json(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "profiles", "--gpu", "h100", "--json")
    data = json.loads(out)
    assert code == 0
    assert (data["gpu"], data["compute_slices"], data["memory_slices"]) == ("H100-80GB", 7, 8)
    first = data["profiles"][0]
    assert {
        "name",
        "compute_slices",
        "memory_slices",
        "memory_mib",
        "max_instances",
        "resource",
    } <= (set(first))
    assert first["resource"] == "nvidia.com/mig-1g.10gb"
    assert [p["name"] for p in data["profiles"]][-1] == "7g.80gb"


def test_profiles_text_marks_estimates(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "profiles", "--gpu", "a100-80gb")
    assert code == 0
    assert "~38912" in out and "conservative estimate" in out


def test_validate_valid(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(
        capsys, "validate", "--gpu", "h100", "--json", "3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"
    )
    data = json.loads(out)
    assert code == 0 and data["valid"] is True
    assert sorted((p["profile"], p["start"], p["size"]) for p in data["placements"]) == [
        ("1g.10gb", 2, 1),
        ("1g.10gb", 3, 1),
        ("2g.20gb", 0, 2),
        ("3g.40gb", 4, 4),
    ]


def test_validate_invalid(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(
        capsys, "validate", "--gpu", "h100", "--json", "4g.40gb", "3g.40gb", "1g.10gb"
    )
    assert code == 1
    assert json.loads(out)["errors"][0]["message"] == (
        "4g.40gb+3g.40gb+1g.10gb does not fit on H100-80GB: needs 8 compute slices, H100-80GB has 7"
    )
    assert err.startswith("error: ") and err.count("\n") == 1


def test_validate_text_draws_slot_bars(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "validate", "--gpu", "h100", "3g.40gb=2")
    assert code == 0 and "[3g.40gb        |3g.40gb        ]" in out


def test_config_named_and_custom(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "config", "--gpu", "h100", "all-1g.10gb")
    assert code == 0 and '"1g.10gb": 7' not in out and "1g.10gb: 7" in out
    code, out, _ = run(capsys, "config", "--gpu", "h100", "1g.10gb=2,2g.20gb=1,3g.40gb=1")
    assert code == 0 and "all-balanced:" in out
    code, out, _ = run(capsys, "config", "--gpu", "h100", "1g.10gb=3,2g.20gb=2")
    assert code == 0 and "custom-2x2g.20gb-3x1g.10gb:" in out and out.startswith("version: v1")


def test_fit_from_params_and_memory(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "fit", "--gpu", "h100", "--params", "3", "--dtype", "fp16", "--json")
    data = json.loads(out)
    assert code == 0 and data["profile"] == "1g.10gb" and data["slice_mib"] == 9984
    assert data["need_mib"] == pytest.approx(7.2e9 / 2**20, abs=0.1)
    code, out, _ = run(capsys, "fit", "--gpu", "h100", "--memory-gib", "24.5", "--json")
    assert code == 0 and json.loads(out)["profile"] == "3g.40gb"
    code, out, _ = run(
        capsys, "fit", "--gpu", "h100", "--params", "8.03", "--dtype", "bf16", "--layers", "32",
        "--kv-heads", "8", "--head-dim", "128", "--context", "4096", "--concurrency", "8",
        "--overhead", "1.1", "--json",
    )  # fmt: skip
    assert code == 0 and json.loads(out)["profile"] == "3g.40gb"


def test_fit_too_large(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "fit", "--gpu", "h100", "--memory-gib", "100", "--json")
    assert code == 1
    assert "the largest, 7g.80gb" in json.loads(out)["errors"][0]["message"]
    assert "the largest, 7g.80gb" in err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["profiles", "--gpu", "v100"], "unknown GPU 'v100'"),
        (["validate", "--gpu", "h100", "9g.90gb"], "not a MIG profile of H100-80GB"),
        (["config", "--gpu", "h100", "all-5g.50gb"], "not a named MIG config of H100-80GB"),
        (["config", "--gpu", "h100", "3g.40gb=x"], "bad layout entry"),
        (["fit", "--gpu", "h100", "--params", "7", "--dtype", "fp9"], "unknown dtype 'fp9'"),
        (["fit", "--gpu", "h100", "--params", "7", "--layers", "3"], "give all three or none"),
        (
            ["fit", "--gpu", "h100", "--memory-gib", "-2"],
            "memory must be a finite number of GiB > 0",
        ),
    ],
)
def test_bad_input_is_one_line(
    capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    code, _, err = run(capsys, *argv)
    assert code == 1
    assert err.startswith("error: ") and message in err and err.count("\n") == 1


def test_usage_errors_exit_2_with_one_line() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "mig", "fit", "--gpu", "h100"],
        capture_output=True, text=True, cwd=ROOT, check=False,
    )  # fmt: skip
    assert result.returncode == 2
    assert "Traceback" not in result.stderr and result.stderr.count("\n") == 1


def test_subprocess_bad_input_has_no_traceback() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "mig", "validate", "--gpu", "h100", "--json", "3g.40gb=3"],
        capture_output=True, text=True, cwd=ROOT, check=False,
    )  # fmt: skip
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert "exceeds its limit of 2" in json.loads(result.stdout)["errors"][0]["message"]


def test_pack_json_keys(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "fleet.yaml"
    path.write_text(
        "workloads:\n"
        "  - {name: llama-3-8b, replicas: 4, profile: 1g.20gb}\n"
        "  - {name: mistral-nemo, replicas: 2, memory_gib: 24.5}\n"
    )
    code, out, _ = run(capsys, "pack", str(path), "--gpu", "h100", "--gpus-per-node", "8", "--json")
    data = json.loads(out)
    assert code == 0
    required = {"gpus", "nodes", "lower_bound", "layouts", "assignments", "baselines", "seconds"}
    assert required <= set(data)
    assert set(data["layouts"][0]) >= {"gpu", "node", "profiles"}
    assert set(data["assignments"][0]) >= {"workload", "gpu", "profile"}
    assert set(data["baselines"]) == {"one_per_gpu", "homogeneous"}
    assert (data["gpus"], data["nodes"], data["lower_bound"]) == (2, 1, 2)
    assert data["mig_parted"]["version"] == "v1"


def test_pack_text_draws_layouts(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "fleet.yaml"
    path.write_text("workloads:\n  - {name: nemo, replicas: 4, memory_gib: 24.5}\n")
    code, out, _ = run(capsys, "pack", str(path), "--gpu", "h100")
    assert code == 0
    assert "2 x [3g.40gb        |3g.40gb        ]  2x3g.40gb" in out
    assert "proven optimal" in out


def test_pack_bad_file_names_workload_and_field(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "fleet.yaml"
    path.write_text("workloads:\n  - {name: nemo, replicas: 4, profile: 1g.5gb}\n")
    code, _, err = run(capsys, "pack", str(path), "--gpu", "h100")
    assert code == 1
    assert err.startswith("error: workloads[0] (nemo).profile: '1g.5gb' is not a MIG profile")
    code, _, err = run(capsys, "pack", str(tmp_path / "missing.yaml"), "--gpu", "h100")
    assert code == 1 and "cannot read fleet file" in err


def test_file_names_are_read_and_named_as_pathlib_spells_them(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A trailing `/`, a `./` or an empty name: every verb reads (and names) the file a Path
    of that name would, as `diff --deployed` and `throughput --out` do."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "Pulumi.gke-h100.yaml").write_text(
        (ROOT / "stacks" / "Pulumi.gke-h100.yaml").read_text(encoding="utf-8"), encoding="utf-8"
    )
    (tmp_path / "out").mkdir()
    code, _, err = run(
        capsys, "plan", "--stack-file", "Pulumi.gke-h100.yaml/", "--svg", "out/plan.svg/"
    )
    assert (code, err) == (0, "")
    assert (tmp_path / "out" / "plan.svg").read_text(encoding="utf-8").startswith("<svg")
    code, _, err = run(capsys, "plan", "--stack-file", "./Pulumi.nope.yaml")
    assert code == 1
    assert err.startswith("error: Pulumi.nope.yaml: cannot read stack file: no such file")
    code, _, err = run(capsys, "plan", "--stack-file", "")
    assert (code, err) == (1, "error: .: cannot read stack file: Is a directory\n")
    code, _, err = run(capsys, "pack", "./nope.yaml/", "--gpu", "h100")
    assert (code, err) == (
        1,
        "error: nope.yaml: cannot read fleet file: No such file or directory\n",
    )


def _mig(*argv: str) -> subprocess.CompletedProcess[str]:
    """`python -m mig ...` as a user runs it."""
    return subprocess.run(
        [sys.executable, "-m", "mig", *argv], capture_output=True, text=True, cwd=ROOT, check=False
    )


def test_blackwell_gpus_listed() -> None:
    result = _mig("gpus")
    assert result.returncode == 0
    names = [line.split()[0] for line in result.stdout.splitlines()]
    assert {"B200-180GB", "GB200", "B300-269GB", "GB300", "RTX-PRO-6000-96GB"} <= set(names)
    data = json.loads(_mig("gpus", "--json").stdout)
    rtx = next(g for g in data if g["name"] == "RTX-PRO-6000-96GB")
    assert rtx["mig"] and "nvidia-rtx-pro-6000" in rtx["aliases"]


def test_b300_profiles_say_what_is_estimated_and_derived() -> None:
    result = _mig("profiles", "--gpu", "B300")
    assert result.returncode == 0
    assert result.stdout.startswith("B300-269GB: 7 compute slices, 8 memory slices, PCI 0x318210DE")
    assert "~31360" in result.stdout and "conservative estimate" in result.stdout
    assert "placements: DERIVED (unconfirmed)" in result.stdout
    data = json.loads(_mig("profiles", "--gpu", "B300", "--json").stdout)
    assert data["placements_confirmed"] is False and "memory_slices" in data["unconfirmed"]
    assert any("estimate from B200's measured 1g.23gb" in note for note in data["notes"])
    assert all(p["memory_estimated"] for p in data["profiles"])
    assert [p["max_instances"] for p in data["profiles"]] == [7, 1, 4, 3, 2, 1, 1]


def test_rtx_pro_6000_profiles_show_its_geometry_and_variants() -> None:
    data = json.loads(_mig("profiles", "--gpu", "rtx-pro-6000", "--json").stdout)
    assert (data["compute_slices"], data["memory_slices"]) == (4, 12)
    rows = {p["name"]: p for p in data["profiles"]}
    assert rows["1g.24gb+me.all"]["resource"] == "nvidia.com/mig-1g.24gb.me.all"
    assert rows["2g.48gb-me"]["starts"] == [0, 6] and rows["2g.48gb-me"]["memory_slices"] == 6
    text = _mig("profiles", "--gpu", "rtx-pro-6000").stdout
    assert "1g.24gb+me.all       1      3    23680    1  0,3,6,9" in text


def test_validate_blackwell_layouts() -> None:
    ok = _mig("validate", "--gpu", "rtx-pro-6000", "--json", "1g.24gb+me.all", "1g.24gb-me=3")
    assert ok.returncode == 0 and json.loads(ok.stdout)["valid"] is True
    bad = _mig("validate", "--gpu", "rtx-pro-6000", "1g.24gb+me.all", "1g.24gb")
    assert bad.returncode == 1 and "Traceback" not in bad.stderr
    assert bad.stderr == (
        "error: 1g.24gb+me.all+1g.24gb does not fit on RTX-PRO-6000-96GB: 1g.24gb+me.all takes "
        "every media engine of RTX-PRO-6000-96GB, so the other instances must be -me profiles "
        "(no media engines), got 1g.24gb\n"
    )
    b300 = _mig("validate", "--gpu", "b300", "3g.135gb", "2g.67gb", "1g.34gb=2")
    assert b300.returncode == 0 and "[2g.67gb|1g |1g |3g.135gb       ]" in b300.stdout


def test_config_gb300_all_balanced_is_nvidias() -> None:
    result = _mig("config", "--gpu", "GB300", "all-balanced", "--json")
    assert result.returncode == 0
    [mine] = json.loads(result.stdout)["mig-configs"]["all-balanced"]
    [theirs] = [
        e for e in mig_parted_v015_configs()["all-balanced"] if "0x31C210DE" in e["device-filter"]
    ]
    assert mine == theirs


def test_fit_on_blackwell_says_when_the_size_is_estimated() -> None:
    result = _mig("fit", "--gpu", "B300", "--memory-gib", "25", "--json")
    data = json.loads(result.stdout)
    assert (data["profile"], data["slice_estimated"]) == ("1g.34gb", True)
    text = _mig("fit", "--gpu", "rtx-pro-6000", "--memory-gib", "25").stdout
    assert "-> 2g.48gb on RTX-PRO-6000-96GB (47,616 MiB usable)" in text


def test_pack_on_b300(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "fleet.yaml"
    path.write_text(
        "workloads:\n"
        "  - {name: big, replicas: 2, profile: 3g.135gb}\n"
        "  - {name: small, replicas: 8, profile: 1g.34gb}\n"
    )
    code, out, _ = run(capsys, "pack", str(path), "--gpu", "B300", "--json")
    data = json.loads(out)
    assert code == 0 and data["gpu_model"] == "B300-269GB"
    # 3g.135gb + 4 x 1g.34gb fill a B300's 7 compute and 8 memory slices: 2 GPUs, no fewer.
    assert (data["gpus"], data["lower_bound"], data["optimal"]) == (2, 2, True)
    for layout in data["layouts"]:
        assert sorted(layout["profiles"]) == ["1g.34gb"] * 4 + ["3g.135gb"]
