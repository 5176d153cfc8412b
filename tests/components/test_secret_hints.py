"""A missing secret is named with the way to add it that fits how the stack is given: a stack
file's author sets a secret config key, a program's author adds an entry to `secrets`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from mig_inference.components.stack import MigInference
from mig_inference.components.stack_args import Stack
from mig_inference.render import run_program

SERVICE_KEY = "mig-inference:services[0].hfTokenSecret"


def library_stack() -> Stack:
    return {
        "cloud": "eks",
        "cluster": {"name": "c", "region": "us-east-1", "subnet_ids": ["subnet-0000000a"]},
        "pools": [{"name": "a100", "gpu": "A100-40GB", "machine_type": "p4d.24xlarge",
                   "nodes": 1, "mig": "all-3g.20gb", "max_pods": 64}],
        "services": [{"name": "chat", "model": "org/model", "memory_gi_b": 12, "replicas": 8,
                      "hf_token_secret": "hfToken"}],
        "stack_name": "py",
    }  # fmt: skip


def test_a_program_is_told_to_add_the_secret_to_the_secrets_input(tmp_path: Path) -> None:
    empty = tmp_path / "Pulumi.test.yaml"
    empty.write_text("config: {}\n")

    def program() -> None:
        MigInference("m", library_stack())

    rendering = run_program("test", empty, program=program)
    assert rendering.error is not None and not rendering.resources
    assert rendering.error.startswith(SERVICE_KEY), rendering.error
    assert "an entry 'hfToken' of the component's `secrets` input" in rendering.error
    assert "pulumi config set" not in rendering.error


def test_a_stack_file_is_told_to_set_a_secret_config_key(tmp_path: Path) -> None:
    stack = tmp_path / "Pulumi.t.yaml"
    stack.write_text(
        "config:\n"
        "  mig-inference:cloud: eks\n"
        "  mig-inference:cluster: {name: c, region: us-east-1, subnetIds: [subnet-0000000a]}\n"
        "  mig-inference:pools:\n"
        "    - {name: a100, gpu: A100-40GB, machineType: p4d.24xlarge, nodes: 1,\n"
        "       mig: all-3g.20gb, maxPods: 64}\n"
        "  mig-inference:services:\n"
        "    - {name: chat, model: org/model, memoryGiB: 12, replicas: 8, hfTokenSecret: hfToken}\n"
    )
    run = subprocess.run(
        [sys.executable, "-m", "mig", "plan", "--stack-file", str(stack), "--json"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert run.returncode == 1, run.stderr
    errors = {e["key"]: e["message"] for e in json.loads(run.stdout)["errors"]}
    assert "`pulumi config set --secret hfToken ...`" in errors[SERVICE_KEY], errors
