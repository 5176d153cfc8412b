"""Every CLI verb, in-process for speed, and once as a real subprocess for bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from mig_inference.cli import main
from tests.reference import ROOT


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
