"""Run the Jobs' shell scripts for real with /bin/sh against the fake kubectl."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

FAKE = Path(__file__).resolve().parent / "fake_kubectl.py"


def run_script(
    tmp_path: Path, script: str, state: dict[str, Any], env: dict[str, str]
) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    """Run `script` with `kubectl` on PATH being the fake over `state`; returns the result and
    the state afterwards (with its `log` of changes)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    kubectl = bin_dir / "kubectl"
    kubectl.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{FAKE}" "$@"\n')
    kubectl.chmod(0o755)
    state_file = tmp_path / "state.json"
    state_file.write_text(json.dumps({"pods": [], **state}))
    result = subprocess.run(
        ["/bin/sh", "-c", script],
        env={**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}",
             "FAKE_KUBECTL_STATE": str(state_file), **env},
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    return result, json.loads(state_file.read_text())
