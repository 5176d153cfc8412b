"""The command line as CI uses it: every error of a stack file at once, one error shape, I/O
failures as one line, the wrong accepts refused, warnings on stderr."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from mig_inference.cli import main
from tests.reference import ROOT


def stack(**changes: Any) -> dict[str, Any]:
    config: dict[str, Any] = {
        "cloud": "gke",
        "cluster": {"name": "c", "project": "my-project", "location": "us-central1-c"},
        "pools": [{"name": "h100", "gpu": "h100", "machineType": "a3-highgpu-8g", "nodes": 1,
                   "mig": "all-3g.40gb", "maxPods": 64}],
        "services": [{"name": "chat", "model": "m", "memoryGiB": 20, "replicas": 4}],
    }  # fmt: skip
    for key, value in changes.items():
        config[key] = value
    return config


def write(tmp_path: Path, config: dict[str, Any]) -> Path:
    path = tmp_path / "Pulumi.test.yaml"
    path.write_text(
        yaml.safe_dump({"config": {f"mig-inference:{k}": v for k, v in config.items()}})
    )
    return path


def plan(capsys: pytest.CaptureFixture[str], path: Path, *extra: str) -> tuple[int, str, str]:
    code = main(["plan", "--stack-file", str(path), *extra])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_every_error_of_a_stack_file_in_one_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = stack()
    config["cluster"]["protect"] = "yes"
    config["pools"][0].update({"spot": "sometimes", "diskSizeGb": 10, "colour": "blue"})
    config["services"][0].update({"engine": "onnx", "port": 0})
    code, out, err = plan(capsys, write(tmp_path, config), "--json")
    assert code == 1
    errors = {e["key"]: e for e in json.loads(out)["errors"]}
    assert set(errors) == {
        "mig-inference:cluster.protect",
        "mig-inference:pools[0].spot",
        "mig-inference:pools[0].diskSizeGb",
        "mig-inference:pools[0].colour",
        "mig-inference:services[0].engine",
        "mig-inference:services[0].port",
    }
    assert errors["mig-inference:services[0].engine"] == {
        "key": "mig-inference:services[0].engine",
        "value": "onnx",
        "message": "'onnx' is not allowed; allowed: vllm, triton, tgi, custom",
        "allowed": ["vllm", "triton", "tgi", "custom"],
    }
    assert errors["mig-inference:pools[0].diskSizeGb"]["value"] == 10
    assert err.count("\n") == 6 and all(line.startswith("error: ") for line in err.splitlines())


def test_plan_errors_of_several_services_are_all_reported(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    services = [
        {"name": "huge", "model": "m", "memoryGiB": 200},
        {"name": "lost", "model": "m", "memoryGiB": 8, "pool": "nowhere"},
    ]
    code, _out, err = plan(capsys, write(tmp_path, stack(services=services)))
    assert code == 1
    assert "services[0].memoryGiB: needs 204,800 MiB" in err
    assert "services[1].pool: no pool named 'nowhere'" in err


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("config:\n  mig-inference:cloud: gke\n  mig-inference:cloud: eks\n",
         "error: mig-inference:cloud: key 'mig-inference:cloud' is given twice (line 3)"),
        # Named at its key path, as every other refused value is.
        ("config:\n  mig-inference:pools:\n    - name: a\n      name: b\n",
         "error: mig-inference:pools[0].name: key 'name' is given twice (line 4)"),
    ],
)  # fmt: skip
def test_a_key_given_twice_is_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, message: str
) -> None:
    path = tmp_path / "Pulumi.test.yaml"
    path.write_text(text)
    code, _out, err = plan(capsys, path)
    assert code == 1 and message in err and err.count("\n") == 1


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"cloud": "existing", "cluster": {"name": "lab", "context": "lab"},
          "pools": [{"name": "p", "gpu": "h100", "gpusPerNode": 8, "nodeNames": ["n1", "n1"],
                     "mig": "all-balanced"}]},
         "pools[0].nodeNames[1]: node 'n1' is listed twice"),
        ({"services": [{"name": "chat", "model": "m", "memoryGiB": 20,
                        "clients": [{"namespace": "Not A Namespace"}]}]},
         "services[0].clients[0].namespace: 'Not A Namespace' must be a lowercase DNS label"),
        ({"services": [{"name": "chat", "model": "m", "memoryGiB": 20, "maxModelLen": 10**7}]},
         "services[0].maxModelLen: 10,000,000 tokens cannot be checked against the slice"),
        ({"services": [{"name": "chat", "model": "m", "memoryGiB": float("nan")}]},
         "services[0].memoryGiB: nan cannot be passed to the program: Pulumi refuses the stack file"),
        ({"services": [{"name": "chat", "model": "m", "memoryGiB": 20, "replicas": 4,
                        "hpaMaxReplicas": 40}]},
         "services[0].hpaMaxReplicas: needs 40 x nvidia.com/mig-3g.40gb"),
        ({"services": [{"name": "chat", "model": "m", "params": 8, "layers": 32, "kvHeads": 8,
                        "headDim": 128, "concurrency": 0}]},
         "services[0].concurrency: must be >= 1, got 0"),
        ({"pools": [{"name": "h100", "gpu": "h100", "machineType": "a3-highgpu-8g", "nodes": 1,
                     "mig": "all-3g.40gb", "maxPods": 64, "zones": ["europe-west4-a"]}]},
         "pools[0].zones[0]: 'europe-west4-a' is not a zone of the cluster's region us-central1"),
    ],
)  # fmt: skip
def test_wrong_accepts_are_refused_with_the_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], change: dict[str, Any], message: str
) -> None:
    code, _out, err = plan(capsys, write(tmp_path, stack(**change)))
    assert code == 1 and message in err, err


def test_nodes_shared_by_two_pools_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pool = {"gpu": "h100", "gpusPerNode": 8, "mig": "all-balanced"}
    config = stack(cloud="existing", cluster={"name": "lab", "context": "lab"},
                   pools=[{**pool, "name": "a", "nodeNames": ["n1"]},
                          {**pool, "name": "b", "nodeNames": ["n1"]}])  # fmt: skip
    code, _out, err = plan(capsys, write(tmp_path, config))
    assert code == 1 and "pools[1].nodeNames[0]: node 'n1' is already in pool a" in err


def run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mig", *argv], capture_output=True, text=True,
                          cwd=ROOT, check=False, timeout=300)  # fmt: skip


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["plan", "--stack", "gke-h100", "--svg", "/nonexistent/dir/x.svg"],
         "error: /nonexistent/dir/x.svg: cannot write: No such file or directory"),
        (["render", "--stack", "gke-h100", "--out", "/proc/x"], "error: /proc/x"),
    ],
)  # fmt: skip
def test_io_failures_are_one_line(argv: list[str], message: str) -> None:
    result = run(*argv)
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr and result.stderr.count("\n") == 1
    assert result.stderr.startswith(message), result.stderr


def test_a_non_utf8_stack_file_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "Pulumi.bad.yaml"
    path.write_bytes(b"config:\n  mig-inference:cloud: g\xffke\n")
    result = run("plan", "--stack-file", str(path))
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert result.stderr == (f"error: {path}: stack file is not UTF-8 text: byte 0xff on line 2\n")


def test_warnings_go_to_stderr_and_into_the_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = stack()
    config["pools"].append({**config["pools"][0], "name": "idle"})
    config["services"][0]["pool"] = "h100"
    path = write(tmp_path, config)
    code, out, err = plan(capsys, path)
    assert code == 0 and "warning: pool idle: no service uses its 16 devices" in err
    assert "warning" not in out
    code, out, err = plan(capsys, path, "--json")
    assert "pool idle: no service uses its 16 devices" in json.loads(out)["warnings"]


@pytest.mark.parametrize(
    "argv",
    [["config", "--gpu", "h100", "all-balanced"], ["gpus"], ["profiles", "--gpu", "a30"],
     ["fit", "--gpu", "h100", "--params", "8B"], ["validate", "--gpu", "h100", "3g.40gb"]],
)  # fmt: skip
def test_json_on_every_verb(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*argv, "--json"]) == 0
    json.loads(capsys.readouterr().out)


def test_yaml_merge_keys_still_work_and_list_keys_are_one_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "Pulumi.test.yaml"
    path.write_text(
        "config:\n"
        "  mig-inference:cloud: gke\n"
        "  mig-inference:cluster: {name: c, project: my-project, location: us-central1-c}\n"
        "  mig-inference:pools:\n"
        "    - &base {name: a, gpu: h100, machineType: a3-highgpu-8g, nodes: 1, mig: all-balanced}\n"
        "    - {<<: *base, name: b}\n"
    )
    code, _out, err = plan(capsys, path)
    assert code == 0, err
    path.write_text("config:\n  ? [a, b]\n  : 1\n")
    code, _out, err = plan(capsys, path)
    assert code == 1 and "a key must be a plain value" in err and "Traceback" not in err


def test_duplicates_are_named_at_their_place_in_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pool = {"gpu": "h100", "machineType": "a3-highgpu-8g", "nodes": 1, "mig": "all-balanced"}
    config = stack(pools=[{**pool, "name": "x", "gpu": "v100"}, {**pool, "name": "a"},
                          {**pool, "name": "a"}])  # fmt: skip
    code, _out, err = plan(capsys, write(tmp_path, config))
    assert code == 1
    assert "pools[0].gpu: unknown GPU 'v100'" in err
    assert "pools[2].name: duplicate pool name 'a'" in err


def test_a_secret_named_like_a_stack_key_is_refused_at_the_service(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = stack()
    config["services"][0]["hfTokenSecret"] = "cloud"
    code, _out, err = plan(capsys, write(tmp_path, config))
    assert code == 1
    assert "services[0].hfTokenSecret: 'cloud' is a key of the stack itself" in err
    assert "mig-inference:cloud: is named by" not in err


def test_several_bad_values_of_one_pool_and_one_service_are_all_reported(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = stack(
        cloud="eks",
        cluster={"name": "c", "region": "us-east-1", "subnetIds": ["subnet-00000005"]},
        pools=[{"name": "p", "gpu": "v100", "nodes": 1, "spot": "maybe", "rollout": "sideways"}],
        services=[{"name": "s", "model": "m", "memoryGiB": 4, "tensorParallelSize": 2,
                   "healthPath": "health", "hpaMaxReplicas": 0}],
    )  # fmt: skip
    code, out, _err = plan(capsys, write(tmp_path, config), "--json")
    assert code == 1
    keys = [e["key"].removeprefix("mig-inference:") for e in json.loads(out)["errors"]]
    assert keys == [
        "pools[0].gpu", "pools[0].machineType", "pools[0].rollout", "pools[0].spot",
        "services[0].tensorParallelSize", "services[0].healthPath",
        "services[0].hpaMaxReplicas",
    ]  # fmt: skip
