"""The populate Job's script, run for real with /bin/sh against a stand-in `hf` (or
`huggingface-cli`) that writes a small model the way `hf download --local-dir` does."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mig_inference.kube.scripts import load

FAKE_HF = """import json, os, sys
from pathlib import Path
argv = sys.argv[1:]
with open(os.environ["FAKE_HF_CALLS"], "a") as calls:
    calls.write(json.dumps([os.environ["FAKE_HF_NAME"], *argv]) + "\\n")
if os.environ.get("FAKE_HF_MODE") == "fail":
    sys.exit(2)
assert argv[0] == "download", argv
target = Path(argv[argv.index("--local-dir") + 1])
target.mkdir(parents=True, exist_ok=True)
if os.environ.get("FAKE_HF_MODE") != "empty":
    (target / "config.json").write_text(json.dumps({"revision": argv[argv.index("--revision") + 1]}))
    (target / "model.safetensors").write_bytes(b"\\0" * 1024)
(target / ".cache" / "huggingface").mkdir(parents=True, exist_ok=True)
(target / ".cache" / "huggingface" / "download.lock").write_text("")
"""


def _run(
    tmp_path: Path, target: Path, staging: Path, *, command: str = "hf", mode: str = ""
) -> subprocess.CompletedProcess[str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    (tmp_path / "fake_hf.py").write_text(FAKE_HF)
    tool = bin_dir / command
    tool.write_text(
        f'#!/bin/sh\nFAKE_HF_NAME={command} exec "{sys.executable}" "{tmp_path / "fake_hf.py"}" "$@"\n'
    )
    tool.chmod(0o755)
    env = {
        "PATH": f"{bin_dir}:/usr/bin:/bin",
        "MODEL": "org/tiny-model",
        "REVISION": "0123abcd",
        "TARGET": str(target),
        "STAGING": str(staging),
        "FAKE_HF_CALLS": str(tmp_path / "calls.jsonl"),
        "FAKE_HF_MODE": mode,
    }
    return subprocess.run(
        ["/bin/sh", "-c", load("populate.sh")], env=env, capture_output=True, text=True,
        timeout=60, check=False,
    )  # fmt: skip


def _calls(tmp_path: Path) -> list[list[str]]:
    path = tmp_path / "calls.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_a_file_system_fill_renames_the_download_into_place(tmp_path: Path) -> None:
    target = tmp_path / "models" / "org" / "tiny-model" / "0123abcd"
    result = _run(tmp_path, target, Path(f"{target}.partial"))
    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in target.iterdir()) == [
        ".mig-inference-complete", "config.json", "model.safetensors",
    ]  # fmt: skip
    assert json.loads((target / "config.json").read_text()) == {"revision": "0123abcd"}
    assert not Path(f"{target}.partial").exists()
    [call] = _calls(tmp_path)
    assert call == ["hf", "download", "org/tiny-model", "--revision", "0123abcd", "--local-dir",
                    f"{target}.partial"]  # fmt: skip


def test_a_bucket_fill_copies_new_files_and_leaves_no_staging(tmp_path: Path) -> None:
    target = tmp_path / "bucket" / "org" / "tiny-model" / "0123abcd"
    staging = tmp_path / "staging" / "model"
    result = _run(tmp_path, target, staging, command="huggingface-cli")
    assert result.returncode == 0, result.stderr
    assert (target / "model.safetensors").stat().st_size == 1024
    assert (target / ".mig-inference-complete").exists()
    assert not staging.exists()
    assert _calls(tmp_path)[0][0] == "huggingface-cli"


def test_a_filled_revision_is_not_downloaded_again(tmp_path: Path) -> None:
    target = tmp_path / "models" / "rev"
    assert _run(tmp_path, target, Path(f"{target}.partial")).returncode == 0
    again = _run(tmp_path, target, Path(f"{target}.partial"))
    assert again.returncode == 0
    assert "already in the cache" in again.stdout
    assert len(_calls(tmp_path)) == 1


@pytest.mark.parametrize(("mode", "message"), [("fail", ""), ("empty", "downloaded no files")])
def test_a_failed_download_leaves_no_marker(tmp_path: Path, mode: str, message: str) -> None:
    target = tmp_path / "models" / "rev"
    target.mkdir(parents=True)
    (target / "half.safetensors").write_text("left by an earlier run")
    result = _run(tmp_path, target, Path(f"{target}.partial"), mode=mode)
    assert result.returncode != 0
    assert message in result.stderr
    assert not (target / ".mig-inference-complete").exists()
    # The next run (the Job's retry) starts over and fills it.
    assert _run(tmp_path, target, Path(f"{target}.partial")).returncode == 0
    assert not (target / "half.safetensors").exists()
    assert (target / ".mig-inference-complete").exists()


def test_without_a_downloader_it_says_so(tmp_path: Path) -> None:
    target = tmp_path / "models" / "rev"
    result = subprocess.run(
        ["/bin/sh", "-c", load("populate.sh")],
        env={"PATH": "/usr/bin:/bin", "MODEL": "m/n", "REVISION": "main", "TARGET": str(target),
             "STAGING": f"{target}.partial", "HOME": os.environ.get("HOME", "/tmp")},
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert result.returncode != 0
    assert "neither hf nor huggingface-cli" in result.stderr
