"""MIG mode switched on from the user data before the kubelet starts (NVIDIA/gpu-operator#2415):
the rendered user data of EKS and OKE pools, run with a fake `nvidia-smi` that answers as an
H100 (the mode takes at once) or an A100 (pending until a reset), and the MIG manager model's
first run on the GPUs as that step leaves them."""

from __future__ import annotations

import base64
import email
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from mig_inference.clouds.bootstrap import (
    DRIVER_WAIT_SECONDS,
    JOIN_MARKER,
    MODE_SCRIPT,
    MODE_UNIT,
    PER_BOOT_JOIN,
    REBOOT_MARKER,
    oke_cloud_init,
)
from mig_inference.names.labels import MIG_CONFIG_LABEL, MIG_STATE_LABEL
from mig_inference.plan import plan_stack
from mig_inference.rollout.facts import _node_layout
from mig_inference.rollout.mig_manager import OPERAND_LABELS, Durations, MigManager, devices_of
from mig_inference.spec.files import load_stack
from tests.fake_apiserver import steps_of
from tests.mocked import b64, one, stack_rendering
from tests.nvidia_node import NvidiaNode

LAUNCH_TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"
NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
OKE_POOL = "oci:ContainerEngine/nodePool:NodePool"
OKE_INIT = "/var/run/oke-init.sh"
FAKE_SMI = """#!/bin/sh
echo "nvidia-smi $*" >> "$LOG"
case "$*" in
  -L) [ "$GPU" != nodriver ] || exit 9; echo "GPU 0: NVIDIA fake" ;;
  *--query-gpu=mig.mode.current,mig.mode.pending*)
    if [ "$GPU" = pending ]; then echo "Disabled, Enabled"; else echo "Enabled, Enabled"; fi ;;
  "-i ${REFUSE:-none} -mig 1") echo "GPU $REFUSE: refused" >&2; exit 6 ;;
  *"-mig 1") ;;
  *) echo "unexpected: $*" >&2; exit 3 ;;
esac
"""
RECORD = '#!/bin/sh\necho "$(basename "$0") $*" >> "$LOG"\n'


def _fake_bin(tmp_path: Path, join_log: Path) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    joined = f'#!/bin/sh\necho "oke-init $*" >> {join_log}\n'
    tools = {
        "nvidia-smi": FAKE_SMI,
        "systemctl": RECORD,
        "sleep": RECORD,
        # OKE's init script from the instance metadata: base64, as the metadata serves it.
        "curl": f'#!/bin/sh\necho "curl $*" >> "$LOG"\necho {base64.b64encode(joined.encode()).decode()}\n',
    }
    for name, body in tools.items():
        path = bin_dir / name
        path.write_text(body)
        path.chmod(0o755)
    return bin_dir


def run_user_data(
    tmp_path: Path, script: str, gpu: str, shell: str = "sh", refuse: str = ""
) -> list[str]:
    """Run a user-data script as cloud-init would, on a node whose GPUs answer as `gpu` (`on`,
    `pending` or `nodriver`); the node's paths moved under `tmp_path`. Returns what it did."""
    log = tmp_path / "log"
    bin_dir = _fake_bin(tmp_path, log) if not (tmp_path / "bin").exists() else tmp_path / "bin"
    for path in (REBOOT_MARKER, PER_BOOT_JOIN, OKE_INIT, JOIN_MARKER, MODE_SCRIPT, MODE_UNIT):
        moved = str(tmp_path / path.lstrip("/"))
        script = re.sub(rf"(?<![\w.-]){re.escape(path)}", moved.replace("\\", "\\\\"), script)
    # Nothing of this machine's own may be written: every path the script writes is moved.
    assert re.search(r"(?<![\w.-])/(var|etc)/", script) is None, script
    (tmp_path / "var/run").mkdir(parents=True, exist_ok=True)
    env = {
        **os.environ,
        "PATH": f"{bin_dir}:/usr/bin:/bin",
        "LOG": str(log),
        "GPU": gpu,
        "REFUSE": refuse,
    }
    subprocess.run([shell, "-c", script], env=env, check=True, capture_output=True, timeout=60)
    return log.read_text().splitlines() if log.exists() else []


def eks_parts(stack: str) -> list[Any]:
    [template] = stack_rendering(stack).of_type(LAUNCH_TEMPLATE)
    message = email.message_from_bytes(base64.b64decode(template.inputs["userData"]))
    return [p for p in message.walk() if not p.is_multipart()]


def mig_part(stack: str) -> str:
    [script] = [p for p in eks_parts(stack) if p.get_content_type() == "text/x-shellscript"]
    payload = script.get_payload(decode=True)
    assert isinstance(payload, bytes)
    return payload.decode()


def enabled(done: list[str]) -> list[int]:
    return [int(line.split()[2]) for line in done if line.endswith("-mig 1")]


def test_eks_switches_mig_mode_on_in_the_user_data_before_nodeadm(tmp_path: Path) -> None:
    # cloud-init runs shell parts in cloud-final, and nodeadm-run.service (which starts the
    # kubelet) is After=cloud-final.service: the part runs before the kubelet.
    assert [p.get_content_type() for p in eks_parts("eks-p5-from-zero")] == [
        "application/node.eks.aws", "text/cloud-config", "text/x-shellscript",
    ]  # fmt: skip
    done = run_user_data(tmp_path, mig_part("eks-p5-from-zero"), "on")
    assert enabled(done) == list(range(8))
    assert "systemctl reboot" not in done


def test_a_gpu_that_needs_a_reset_reboots_the_node_once_before_it_joins(tmp_path: Path) -> None:
    script = mig_part("eks-p4d")  # A100-40GB: MIG mode pending until a GPU reset
    done = run_user_data(tmp_path, script, "pending")
    assert done[-1] == "systemctl reboot"
    assert (tmp_path / REBOOT_MARKER.lstrip("/")).exists()
    (tmp_path / "log").unlink()
    again = run_user_data(tmp_path, script, "pending")
    assert "systemctl reboot" not in again  # never a second reboot


def test_a_gpu_that_refuses_leaves_the_others_switched(tmp_path: Path) -> None:
    # GPU 2 refuses MIG mode: the other seven are still switched, and the failure is said.
    script = mig_part("eks-p5-from-zero")
    done = run_user_data(tmp_path, script, "on", refuse="2")
    assert enabled(done) == list(range(8))
    assert "systemctl reboot" not in done


@pytest.mark.parametrize("cloud", ["eks", "oke"])
def test_every_later_boot_switches_mig_mode_on_before_the_kubelet(
    tmp_path: Path, cloud: str
) -> None:
    # A stop and start may land on other GPUs: cloud-init's user script does not run again, a
    # oneshot unit ordered before the kubelet's unit does, on every boot.
    script = mig_part("eks-p5-from-zero") if cloud == "eks" else oke_script("oke-h100")
    done = run_user_data(tmp_path, script, "on", shell="sh" if cloud == "eks" else "bash")
    assert "systemctl enable mig-inference-mig-mode.service" in done
    unit = (tmp_path / MODE_UNIT.lstrip("/")).read_text()
    assert "Before=nodeadm-run.service kubelet.service" in unit
    assert "Type=oneshot" in unit and "WantedBy=multi-user.target" in unit
    mode = (tmp_path / MODE_SCRIPT.lstrip("/")).read_text()
    assert f"ExecStart=/bin/sh {tmp_path / MODE_SCRIPT.lstrip('/')}" in unit
    for gpu, refuse in (("on", ""), ("on", "3"), ("pending", ""), ("on", "")):
        (tmp_path / "log").unlink()
        again = run_user_data(tmp_path, mode, gpu, refuse=refuse)  # exits 0 every time
        assert enabled(again) == list(range(8))
        assert not any(line.startswith(("systemctl", "oke-init", "curl")) for line in again)


def test_without_a_driver_the_node_joins_as_before(tmp_path: Path) -> None:
    done = run_user_data(tmp_path, mig_part("eks-p5-from-zero"), "nodriver")
    assert enabled(done) == [] and "systemctl reboot" not in done
    assert done.count("sleep 5") == DRIVER_WAIT_SECONDS // 5


def test_pools_without_mig_get_no_mig_part() -> None:
    types = [p.get_content_type() for p in eks_parts("eks-g6e-timeslice")]
    assert "text/x-shellscript" not in types


def test_eks_replaces_nodes_a_mig_mode_change_left_notready() -> None:
    # EKS node auto repair replaces a node NotReady for 30 minutes: the only cure of #2415.
    for group in stack_rendering("eks-p5-from-zero").of_type(NODE_GROUP):
        if "-system" not in group.name:
            assert group.inputs["nodeRepairConfig"] == {"enabled": True}


def oke_script(stack: str) -> str:
    pool = one(stack_rendering(stack), OKE_POOL)
    return b64(pool.inputs["nodeMetadata"]["user_data"])


def test_oke_switches_mig_mode_on_before_its_init_script_starts_the_kubelet(
    tmp_path: Path,
) -> None:
    done = run_user_data(tmp_path, oke_script("oke-h100"), "on", shell="bash")
    assert enabled(done) == list(range(8))
    joined = [i for i, line in enumerate(done) if line.startswith("oke-init")]
    last_enable = max(i for i, line in enumerate(done) if line.endswith("-mig 1"))
    assert len(joined) == 1 and joined[0] > last_enable
    assert "--register-with-taints=" in done[joined[0]]


def test_oke_joins_after_the_reboot_a_reset_needs(tmp_path: Path) -> None:
    script = oke_cloud_init([("nvidia.com/gpu", "present", "NoSchedule")], [0, 1])
    done = run_user_data(tmp_path, script, "pending", shell="bash")
    assert done[-1] == "systemctl reboot" and not any(x.startswith("oke-init") for x in done)
    per_boot = tmp_path / PER_BOOT_JOIN.lstrip("/")
    # cloud-init runs the per-boot script on the next boot: it joins once and removes itself.
    run_user_data(tmp_path, per_boot.read_text(), "on", shell="bash")
    after = (tmp_path / "log").read_text().splitlines()
    assert [x for x in after if x.startswith("oke-init")] == [
        "oke-init --kubelet-extra-args --register-with-taints=nvidia.com/gpu=present:NoSchedule"
    ]
    assert not per_boot.exists()


def test_a_rerun_after_the_reboot_does_not_join_the_node_twice(tmp_path: Path) -> None:
    # The reboot happens inside cloud-final: cloud-init never records the user script as done
    # and runs it again on the next boot, after the per-boot join (scripts_per_boot runs before
    # scripts_user). The node joins once.
    script = oke_cloud_init([("nvidia.com/gpu", "present", "NoSchedule")], [0, 1])
    run_user_data(tmp_path, script, "pending", shell="bash")
    per_boot = tmp_path / PER_BOOT_JOIN.lstrip("/")
    run_user_data(tmp_path, per_boot.read_text(), "on", shell="bash")
    run_user_data(tmp_path, script, "on", shell="bash")
    after = (tmp_path / "log").read_text().splitlines()
    assert len([x for x in after if x.startswith("oke-init")]) == 1
    # And a user script re-run before anything joined still joins.
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    done = run_user_data(fresh, script, "on", shell="bash")
    assert len([x for x in done if x.startswith("oke-init")]) == 1


FAST = Durations(pod_start=1, checks=1, operands_stop=1, operands_timeout=5, apply=1, reboot=5,
                 plugin_start=1)  # fmt: skip


def agents(model: str, wanted: Any, hardware: Any, config: str, **faults: bool) -> Any:
    """One node's MIG manager on an AL2023 node (the host's driver, #2415's fault on), in the
    simulator's model or in the one read apart from it (`tests/nvidia_node.py`)."""
    labels = {MIG_CONFIG_LABEL: config, **dict.fromkeys(OPERAND_LABELS, "true")}
    options: dict[str, Any] = {"host_gpu_clients": True, "kubelet_restart_breaks": True, **faults}
    if model == "simulator":
        return MigManager({config: wanted}, hardware, labels, durations=FAST, running=False,
                          **options)  # fmt: skip
    return NvidiaNode({config: wanted}, hardware, labels, steps=steps_of(FAST), running=False,
                      **options)  # fmt: skip


@pytest.mark.parametrize("model", ["simulator", "nvidia"])
@pytest.mark.parametrize("boot_step", [True, False])
def test_the_first_apply_changes_no_mode_on_gpus_the_user_data_prepared(
    tmp_path: Path, boot_step: bool, model: str
) -> None:
    """From the GPUs as the rendered user data leaves them, the first run only creates
    instances; without that step its mode change restarts the kubelet and the node never
    serves."""
    pool = plan_stack(load_stack("eks-p5-from-zero")).pools[0]
    wanted = _node_layout(pool)
    on = set(enabled(run_user_data(tmp_path, mig_part("eks-p5-from-zero"), "on")))
    boot = tuple(() if boot_step and i in on else None for i in range(len(wanted)))
    node = agents(model, wanted, boot, pool.config_name)
    node.advance(100)
    assert node.labels[MIG_STATE_LABEL] == "success"
    if boot_step:
        assert node.node_ready and node.advertised() == devices_of(wanted)
    else:
        assert node.kubelet_lost and not node.node_ready and node.advertised() == {}


@pytest.mark.parametrize("model", ["simulator", "nvidia"])
def test_a_failed_mode_change_restarts_the_kubelet_too(model: str) -> None:
    """A GPU that needs a reset, without WITH_REBOOT: the apply fails, and `setState` starts the
    stopped host services again (reconfigure.go L540-548), the kubelet with them."""
    wanted = (("1g.10gb",) * 7,)
    node = agents(model, wanted, (None,), "all-1g.10gb", mode_change_needs_reboot=True)
    node.advance(100)
    assert node.labels[MIG_STATE_LABEL] == "failed" and node.kubelet_lost
    healthy = agents(model, wanted, (None,), "all-1g.10gb", mode_change_needs_reboot=True,
                     kubelet_restart_breaks=False)  # fmt: skip
    healthy.advance(100)
    assert healthy.labels[MIG_STATE_LABEL] == "failed" and healthy.node_ready


def test_the_mig_part_comes_with_new_eks_nodes_as_user_data_does() -> None:
    # In the launch template, read only when a node boots: a new value is a new generation
    # (the node group created before the old one goes), as a change of `userData` is.
    pool = plan_stack(load_stack("eks-p5-from-zero")).pools[0]
    assert pool.replacement_inputs["migModeAtBoot"] == "0,1,2,3,4,5,6,7"
    assert (
        "migModeAtBoot"
        not in plan_stack(load_stack("eks-g6e-timeslice")).pools[0].replacement_inputs
    )
    # OKE applies a node pool's user data to the nodes it creates later: no new generation.
    assert "migModeAtBoot" not in plan_stack(load_stack("oke-h100")).pools[0].replacement_inputs


def _here_document(script: str, delimiter: str) -> str:
    body = script.split(f"<<'{delimiter}'\n", 1)[1].split(f"\n{delimiter}\n", 1)[0]
    assert body.startswith("#!/bin/sh\n")
    return body + "\n"


def test_the_scripts_pass_shellcheck(tmp_path: Path) -> None:
    import shutil
    import sys

    shellcheck = shutil.which("shellcheck", path=str(Path(sys.executable).parent))
    assert shellcheck is not None, "make setup installs shellcheck into the venv"
    for name, script in {
        "eks.sh": mig_part("eks-p4d"),
        "oke.sh": oke_script("oke-h100"),
        "oke-reboot.sh": oke_cloud_init([("k", "v", "NoSchedule")], [0, 1]),
        # The per-boot unit's script, a here-document in the scripts above.
        "mode.sh": _here_document(mig_part("eks-p4d"), "MIG_INFERENCE_MODE"),
    }.items():
        path = tmp_path / name
        path.write_text(script)
        subprocess.run([shellcheck, str(path)], check=True, capture_output=True, timeout=60)
