"""Profiling runs: a Job per candidate profile, the script it runs (against a fake engine),
and `mig-inference throughput` turning their logs into a throughput file the planner reads."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from mig_inference.errors import MigError, MigErrors
from mig_inference.kube.profiling_results import throughput_table
from mig_inference.kube.scripts import THROUGHPUT_MARKER, load
from mig_inference.plan import plan_stack
from mig_inference.plan.demand import demand_served
from mig_inference.spec import parse_stack
from mig_inference.versions import GPU_OPERATOR_VERSION
from tests.mocked import stack_rendering

FAKE = Path(__file__).resolve().parent.parent / "fake_vllm.py"


def jobs() -> dict[str, dict[str, Any]]:
    rendering = stack_rendering("eks-p4de-demand")
    return {
        j.inputs["metadata"]["name"]: j.inputs
        for j in rendering.of_type("kubernetes:batch/v1:Job")
        if j.inputs["metadata"]["labels"].get("app.kubernetes.io/component") == "profiling"
    }


def test_a_job_per_candidate_profile_on_the_services_pool() -> None:
    found = jobs()
    assert sorted(name.rsplit("-", 1)[0] for name in found) == [
        "chat-profile-1g-10gb", "chat-profile-3g-40gb"]  # fmt: skip
    for job in found.values():
        profile = job["metadata"]["labels"]["mig-inference.io/profile"]
        pod = job["spec"]["template"]["spec"]
        [container] = pod["containers"]
        assert container["resources"]["limits"][f"nvidia.com/mig-{profile}"] == "1"
        assert pod["restartPolicy"] == "Never" and job["spec"]["backoffLimit"] == 0
        assert job["metadata"]["annotations"] == {"pulumi.com/skipAwait": "true"}
        env = {e["name"]: e for e in container["env"]}
        assert (
            env["PROFILE"]["value"] == profile
            and env["MODEL"]["value"] == "Qwen/Qwen2.5-1.5B-Instruct"
        )
        assert env["HF_TOKEN"]["valueFrom"]["secretKeyRef"]["name"] == "chat-1g-10gb-credentials"
        assert container["command"][:2] == ["sh", "-c"] and "--model" in container["command"]
        [term] = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
            "nodeSelectorTerms"
        ]
        assert {
            "key": "mig-inference.io/pool",
            "operator": "In",
            "values": ["a100-balanced"],
        } in term["matchExpressions"]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def run_profile(tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    vllm = bin_dir / "vllm"
    vllm.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{FAKE}" "$@"\n')
    vllm.chmod(0o755)
    python3 = bin_dir / "python3"
    python3.write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    python3.chmod(0o755)
    # The fake engine answers within a second: the script's 5-second health polls are cut to a
    # fifth of a second rather than waited out (its deadline stays in real seconds).
    sleep = bin_dir / "sleep"
    sleep.write_text(f"#!/bin/sh\nexec {shutil.which('sleep')} 0.2\n")
    sleep.chmod(0o755)
    settings = {
        "PATH": f"{bin_dir}:{os.environ['PATH']}", "MODEL": "org/model", "PROFILE": "1g.10gb",
        "PORT": str(free_port()), "STARTUP_SECONDS": "30", "NUM_PROMPTS": "20",
        "INPUT_TOKENS": "64", "OUTPUT_TOKENS": "16", "MAX_CONCURRENCY": "4",
        "RESULT_DIR": str(tmp_path), "FAKE_VLLM_CALLS": str(tmp_path / "calls"),
        "FAKE_VLLM_RATE": "11.25", **env,
    }  # fmt: skip
    return subprocess.run(
        ["/bin/sh", "-c", load("profile.sh"), "profile", "--model", "org/model", "--port",
         settings["PORT"]],
        env={**os.environ, **settings}, capture_output=True, text=True, timeout=60,
    )  # fmt: skip


def test_the_script_serves_benchmarks_and_prints_one_result_line(tmp_path: Path) -> None:
    result = run_profile(tmp_path)
    assert result.returncode == 0, result.stderr
    calls = [json.loads(line) for line in (tmp_path / "calls").read_text().splitlines()]
    assert calls[0] == ["serve", "--model", "org/model", "--port", calls[0][-1]]
    bench = calls[1]
    assert bench[:2] == ["bench", "serve"]
    assert bench[bench.index("--max-concurrency") + 1] == "4"
    assert bench[bench.index("--num-prompts") + 1] == "20"
    [line] = [line for line in result.stdout.splitlines() if line.startswith(THROUGHPUT_MARKER)]
    assert json.loads(line.removeprefix(THROUGHPUT_MARKER)) == {
        "profile": "1g.10gb", "requestsPerSecond": 11.25, "latencyMs": 812.5, "batch": 4,
        "measured": True,
    }  # fmt: skip


def test_the_script_fails_when_the_engine_dies(tmp_path: Path) -> None:
    result = run_profile(tmp_path, FAKE_VLLM_MODE="crash")
    assert result.returncode == 1 and "the engine exited before it answered" in result.stderr


def log_line(profile: str, rate: float) -> str:
    point = {"profile": profile, "requestsPerSecond": rate, "latencyMs": 900, "batch": 16,
             "measured": True}  # fmt: skip
    return f"2026-11-22T10:00:00Z {THROUGHPUT_MARKER} {json.dumps(point)}"


def test_logs_become_a_throughput_file_the_planner_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    Path("a.log").write_text(
        f"loading...\n{log_line('1g.10gb', 8.5)}\n{log_line('1g.10gb', 9.5)}\n"
    )
    Path("b.log").write_text(log_line("3g.40gb", 27.0) + "\n")
    found = subprocess.run(
        [sys.executable, "-m", "mig", "throughput", "a.log", "b.log", "--out", "chat.yaml"],
        capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(Path(__file__).parent.parent.parent)},
    )  # fmt: skip
    assert found.returncode == 0, found.stderr
    table = yaml.safe_load(Path("chat.yaml").read_text())
    assert [(p["profile"], p["requestsPerSecond"]) for p in table["throughput"]] == [
        ("1g.10gb", 9.5), ("3g.40gb", 27.0)]  # fmt: skip
    values = {
        "cloud": "eks", "cluster": {"name": "c", "region": "us-east-1", "subnetIds": ["subnet-00000005"]},
        "pools": [{"name": "a100", "gpu": "A100-80GB", "machineType": "p4de.24xlarge", "nodes": 1,
                   "mig": "all-balanced", "maxPods": 110}],
        "services": [{"name": "chat", "model": "m", "memoryGiB": 3, "requestsPerSecond": 50,
                      "throughputFile": "chat.yaml"}],
    }  # fmt: skip
    plan = plan_stack(parse_stack("t", values, pinned_operator_version=GPU_OPERATOR_VERSION))
    [served] = demand_served(plan.services)
    assert served.source == "chat.yaml" and all(p.measured for p in served.parts)
    assert served.served >= 50


def test_a_log_without_a_result_or_with_a_bad_one_is_named(tmp_path: Path) -> None:
    empty = tmp_path / "empty.log"
    empty.write_text("the engine exited before it answered\n")
    with pytest.raises(MigError, match="no result line") as raised:
        throughput_table([empty])
    assert raised.value.path == str(empty)
    bad = tmp_path / "bad.log"
    bad.write_text(f'x\n{THROUGHPUT_MARKER} {{"profile": "1g.10gb", "requestsPerSecond": 0}}\n')
    with pytest.raises(MigError, match="requestsPerSecond is 0") as raised:
        throughput_table([bad])
    assert raised.value.path == f"{bad}:2"


def stack_with(profiling: dict[str, Any], engine: str = "vllm") -> dict[str, Any]:
    return {
        "cloud": "eks", "cluster": {"name": "c", "region": "us-east-1", "subnetIds": ["subnet-00000005"]},
        "pools": [{"name": "a100", "gpu": "A100-80GB", "machineType": "p4de.24xlarge", "nodes": 1,
                   "mig": "all-1g.10gb", "maxPods": 110}],
        "services": [{"name": "chat", "model": "m", "memoryGiB": 3, "replicas": 2,
                      "engine": engine, "profiling": profiling}],
    }  # fmt: skip


@pytest.mark.parametrize(
    ("profiling", "engine", "key", "message"),
    [
        ({"profiles": ["3g.40gb"]}, "vllm", "profiling.profiles[0]", "offers no unshared 3g.40gb"),
        ({"profiles": ["1g.10gb"]}, "tgi", "profiling", "needs engine vllm"),
        ({}, "vllm", "profiling.profiles", "is required"),
        ({"profiles": ["1g.10gb"], "numPrompts": 0}, "vllm", "profiling.numPrompts", ">= 1"),
    ],
)
def test_bad_profiling_is_named(
    profiling: dict[str, Any], engine: str, key: str, message: str
) -> None:
    with pytest.raises(MigErrors) as raised:
        plan_stack(parse_stack("t", stack_with(profiling, engine),
                               pinned_operator_version=GPU_OPERATOR_VERSION))  # fmt: skip
    found = [(e.path, e.message) for e in raised.value.errors]
    assert any(p == f"mig-inference:services[0].{key}" and message in m for p, m in found), found


def test_job_names_stay_within_kubernetes_limits(tmp_path: Path) -> None:
    from tests.mocked import render_config

    long_name = "a-very-long-service-name-of-forty-chars"
    values = stack_with({"profiles": ["1g.10gb"]})
    values["services"][0]["name"] = long_name
    rendering = render_config(tmp_path, values)
    assert rendering.error is None, rendering.error
    [job] = [j for j in rendering.of_type("kubernetes:batch/v1:Job")
             if j.inputs["metadata"]["labels"].get("app.kubernetes.io/component") == "profiling"]  # fmt: skip
    assert len(job.inputs["metadata"]["name"]) <= 63


def _selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in (selector.get("matchLabels") or {}).items())


def test_profiling_pods_take_no_traffic_and_reach_only_dns_and_https() -> None:
    objects = stack_rendering("eks-p4de-demand").kubernetes_objects()
    jobs = [o for o in objects if o["kind"] == "Job"
            and o["metadata"]["labels"].get("app.kubernetes.io/component") == "profiling"]  # fmt: skip
    policies = [o for o in objects if o["kind"] == "NetworkPolicy"]
    assert jobs
    for job in jobs:
        pod_labels = job["spec"]["template"]["metadata"]["labels"]
        [policy] = [
            p for p in policies
            if p["metadata"]["namespace"] == job["metadata"]["namespace"]
            and _selects(p["spec"]["podSelector"], pod_labels)
        ]  # fmt: skip
        spec = policy["spec"]
        assert spec["policyTypes"] == ["Ingress", "Egress"] and not spec.get("ingress")
        ports = sorted(
            (port["protocol"], port["port"]) for rule in spec["egress"] for port in rule["ports"]
        )
        assert ports == [("TCP", 53), ("TCP", 443), ("UDP", 53)]


def test_a_candidate_too_small_for_the_weights_is_named_at_its_place_in_the_list() -> None:
    values = stack_with({"profiles": ["3g.40gb", "1g.10gb"]})
    values["pools"][0]["mig"] = "all-balanced"
    values["services"][0] = {
        "name": "chat", "model": "meta-llama/Llama-3.1-8B-Instruct", "params": 8.03,
        "dtype": "bf16", "layers": 32, "kvHeads": 8, "headDim": 128, "context": 4096,
        "concurrency": 8, "profile": "3g.40gb", "replicas": 1,
        "profiling": {"profiles": ["3g.40gb", "1g.10gb"]},
    }  # fmt: skip
    with pytest.raises(MigErrors) as raised:
        plan_stack(parse_stack("t", values, pinned_operator_version=GPU_OPERATOR_VERSION))
    [error] = raised.value.errors
    # The candidate is the list item itself (a string), not a key under it.
    assert error.path == "mig-inference:services[0].profiling.profiles[1]", error.path
    assert "leave no room for a KV cache" in error.message
