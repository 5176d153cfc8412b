"""The Job scripts run on the fake cluster's clock (tests/fake_apiserver.py `_script_clock`):
`date +%s` reads it, `sleep` moves it on and returns at once, each API request takes the
cluster's `step` of it. A script's deadline is then reached after the same requests and sleeps
on any machine, and a test of a deadline waits no real second for it."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

from mig_inference.kube.gate import GateTarget, gate_script, gate_targets_value
from mig_inference.names.labels import GENERATION_LABEL, POOL_LABEL
from tests.fake_apiserver import EPOCH, FakeCluster, run_script

TWO = ("3g.40gb", "3g.40gb")
SEVEN = ("1g.10gb",) * 7
CONFIGS = {"all-3g.40gb": (TWO, TWO), "all-1g.10gb": (SEVEN, SEVEN)}


def run_gate(
    cluster: FakeCluster, tmp_path: Path, timeout: int, poll: int
) -> subprocess.CompletedProcess[str]:
    """The gate waiting for pool `a` to carry all-3g.40gb on one node, with the deadline and
    the poll given (simulated seconds), within a real minute."""
    target = GateTarget(
        "a", f"{GENERATION_LABEL}=g1,{POOL_LABEL}=a", "all-3g.40gb", 1,
        {"nvidia.com/mig-3g.40gb": 4},
    )  # fmt: skip
    env = {"GATE_TARGETS": gate_targets_value([target]), "GATE_TIMEOUT_SECONDS": str(timeout),
           "GATE_POLL_SECONDS": str(poll), "KUBECTL_REQUEST_TIMEOUT": "1s",
           "OPERATOR_NAMESPACE": "gpu-operator", "KUBECTL_RETRY_SECONDS": "0"}  # fmt: skip
    return run_script(cluster, tmp_path, gate_script(), env, timeout=60)


def test_date_reads_and_sleep_moves_the_cluster_s_clock(tmp_path: Path) -> None:
    cluster = FakeCluster(CONFIGS, step=2.0)
    cluster.clock = 100.0
    script = (
        "a=$(date +%s)\nsleep 600\nb=$(date +%s)\n"
        "kubectl get nodes -o name >/dev/null\nc=$(date +%s)\n"
        'echo "$a $b $c"\ndate -u +%Y\n'
    )
    result = run_script(cluster, tmp_path, script, {}, timeout=60)
    assert result.returncode == 0, result.stderr
    before, slept, requested = (int(t) for t in result.stdout.split()[:3])
    assert before == EPOCH + 100
    assert slept - before == 600
    assert requested - slept == 2  # one request, one step
    assert cluster.clock == 702.0  # the script's sleep is the cluster's time afterwards too
    year = result.stdout.split()[3]
    assert year == time.strftime("%Y", time.gmtime()), "date with another format is the real one"


def test_a_deadline_of_an_hour_is_reached_without_waiting_for_it(tmp_path: Path) -> None:
    """The gate waits for a node that never reports the target: its hour-long deadline passes
    in simulated time (polls of a minute), within the run's real-time limit of a minute."""
    cluster = FakeCluster(CONFIGS)
    labels = {POOL_LABEL: "a", GENERATION_LABEL: "g1"}
    cluster.add_node("n1", "all-1g.10gb", state="success", labels=labels)
    result = run_gate(cluster, tmp_path, timeout=3600, poll=60)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "timed out" in result.stdout, result.stdout
    assert cluster.clock >= 3600
    assert len(cluster.requests) <= 3600 / 60 + 1, "each poll slept its minute of the clock"


def test_failed_requests_take_their_time_too(tmp_path: Path) -> None:
    """An API that answers every request with an error still runs a deadline out: each failed
    request takes its step of the clock, so a script polling without sleeping ends."""
    cluster = FakeCluster(CONFIGS)
    cluster.fail("GET", "/api/v1/nodes", times=-1)
    result = run_gate(cluster, tmp_path, timeout=30, poll=0)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "injected API error" in result.stdout
    assert 30 <= cluster.clock <= 30 + len(cluster.requests)
