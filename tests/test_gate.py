"""The gate Job's wait loop, run for real with /bin/sh against a fake kubectl."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest

from mig.gate import gate_script


def run_gate(
    tmp_path: Path, listing: str, pools: str, timeout: int = 30
) -> subprocess.CompletedProcess[str]:
    fake = tmp_path / "kubectl"
    # Prints "<node> <state>" lines for the pool named in the -l selector, like the jsonpath does.
    data = tmp_path / "nodes.txt"
    data.write_text(listing)
    fake.write_text(
        "#!/bin/sh\n"
        'if [ "$1" = get ] && [ "$3" = -l ]; then\n'
        "  pool=${4#*=}\n"
        f"  awk -v p=\"$pool\" '$1 == p {{print $2, $3}}' {data}\n"
        "fi\n"
    )
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    env = {**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}", "GATE_POOLS": pools,
           "GATE_TIMEOUT_SECONDS": str(timeout), "GATE_POLL_SECONDS": "0"}  # fmt: skip
    return subprocess.run(
        ["/bin/sh", "-c", gate_script()],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_succeeds_when_every_pool_reports_success(tmp_path: Path) -> None:
    listing = "a n1 success\na n2 success\nb n3 success\n"
    result = run_gate(tmp_path, listing, "a=2 b=1")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "MIG ready: a:2/2 b:1/1" in result.stdout


def test_fails_fast_naming_the_failed_node(tmp_path: Path) -> None:
    listing = "a n1 success\na n2 failed\n"
    result = run_gate(tmp_path, listing, "a=2")
    assert result.returncode == 1
    assert (
        "MIG config failed on node n2 (pool a): nvidia.com/mig.config.state=failed" in result.stdout
    )


def test_times_out_when_nodes_stay_pending(tmp_path: Path) -> None:
    listing = "a n1 pending\n"
    result = run_gate(tmp_path, listing, "a=1", timeout=0)
    assert result.returncode == 1
    assert "timed out waiting for nvidia.com/mig.config.state=success: a:0/1" in result.stdout


@pytest.mark.parametrize("listing", ["", "a n1 rebooting\n"])
def test_keeps_waiting_while_not_ready(tmp_path: Path, listing: str) -> None:
    result = run_gate(tmp_path, listing, "a=1", timeout=0)
    assert result.returncode == 1 and "a:0/1" in result.stdout
