"""Node bootstrap user data: EKS AL2023 nodeadm NodeConfig and OKE cloud-init, and MIG mode
switched on before the kubelet starts.

Which max pods an EKS node's kubelet gets (read from awslabs/amazon-eks-ami at 81fec2e8):
nodeadm merges every `application/node.eks.aws` part of the user data in document order, a
later value overriding an earlier one (`nodeadm/internal/configprovider/mime.go`,
`internal/api/merge.go`: mergo `WithOverride`), and EKS appends its own NodeConfig to a managed
node group's user data after the launch template's, one that sets `maxPods` (eksctl-io/eksctl
#8037; EKS's documented cap of 110 or 250). So a NodeConfig in the user data alone loses to
EKS's value. `nodeadm-run.service` then reads a second source, `file:///etc/eks/nodeadm.d/`,
merged over the user data (`templates/al2023/runtime/rootfs/etc/systemd/system/
nodeadm-run.service`, `internal/configprovider/chain.go`; nodeadm README and doc/examples.md
"Overriding configuration with drop-in files"; AMI releases from v20251023, PR #2427), after
cloud-init has run (`After=cloud-final.service`). The user data therefore also carries a
cloud-config part that writes the same NodeConfig there: the plan's number is the one nodeadm
writes into the kubelet's configuration drop-in (`40-nodeadm.conf`, which the kubelet reads over
nodeadm's generated defaults).

MIG mode before the kubelet (NVIDIA/gpu-operator#2415, NVIDIA/mig-parted#368). With the host's
driver (the AL2023 NVIDIA AMI's, and OKE's GPU images') the GPU Operator runs the MIG manager
with `WITH_SHUTDOWN_HOST_GPU_CLIENTS=$IS_HOST_DRIVER` (gpu-operator v26.7.0
`assets/state-mig-manager/0420_configmap.yaml`), and mig-parted v0.15.0 adds the host's
`kubelet.service` to the services it stops and restarts only when `assert --mode-only` says the
MIG *mode* must change (`pkg/mig/reconfigure/reconfigure.go` `checkMigModeChangeRequired`). That
stop and start leaves containerd's state corrupt on AL2023 (cgroup v2): the node stays NotReady
until the instance is replaced. So a MIG pool's nodes switch MIG mode on for the GPUs its layout
partitions from the user data, before the kubelet first starts; the MIG manager's first run then
only creates the instances (and its CDI and host-client steps, which it skips for a layout it
finds applied: the instances are left to it). Where the kubelet starts: on EKS,
`nodeadm-run.service` (`nodeadm init`, which starts the kubelet) is ordered
`After=nodeadm-config.service cloud-final.service` (awslabs/amazon-eks-ami
`templates/al2023/runtime/rootfs/etc/systemd/system/nodeadm-run.service` at 81fec2e8), and
cloud-init runs the user data's shell parts in `cloud-final`; on OKE the user data itself runs
OKE's init script, which installs and starts the kubelet, so the MIG step goes before it. The
driver is not ordered before cloud-init on the AL2023 NVIDIA AMI (`nvidia-kmod-load.service` is
only `After=network-online.target`, `templates/al2023/runtime/gpu/`), so the step waits for
`nvidia-smi` to answer. A GPU whose mode change needs a reset (A100 and A30; H100 and newer switch
without one) reports the new mode pending: the node reboots once, before it ever joined, and
comes up with MIG mode on. On EKS nodeadm runs on the next boot by itself (cloud-init runs user
scripts once per instance); on OKE the join goes into a cloud-init per-boot script that runs on
that boot and removes itself. If the driver never answers or `nvidia-smi` refuses, the node joins
as before and the MIG manager switches the mode (the path this avoids): the step never keeps a
node from joining.
"""

from __future__ import annotations

import base64
import shlex
from collections.abc import Sequence
from email.mime.multipart import MIMEMultipart
from email.mime.text import MIMEText

import yaml

NODEADM_CONTENT_TYPE = "application/node.eks.aws"
NODEADM_DROP_IN = "/etc/eks/nodeadm.d/50-mig-inference-max-pods.yaml"
"""nodeadm merges this file over every NodeConfig of the user data, EKS's own included."""
OKE_INIT_SCRIPT_URL = "http://169.254.169.254/opc/v2/instance/metadata/oke_init_script"
DRIVER_WAIT_SECONDS = 300
"""How long the MIG step waits for the NVIDIA driver to answer before it leaves the mode to the
MIG manager."""
REBOOT_MARKER = "/var/lib/mig-inference/mig-mode-reboot"
"""Written before the one reboot a pending MIG mode takes: never a second one."""
MODE_SCRIPT = "/var/lib/mig-inference/mig-mode.sh"
MODE_UNIT = "/etc/systemd/system/mig-inference-mig-mode.service"
"""Every later boot (a stop and start may land on other hardware) switches MIG mode on again
before the kubelet: a oneshot unit ordered before nodeadm-run.service (EKS, AL2023) and
kubelet.service (OKE), running MODE_SCRIPT; idempotent, it never reboots and never fails the
boot (a GPU it cannot switch is left to the MIG manager)."""
JOIN_MARKER = "/var/lib/mig-inference/oke-joined"
"""Written once OKE's init script has joined the node: a user script cloud-init runs again (the
reboot inside cloud-final leaves it unrecorded) does not join it a second time."""
PER_BOOT_JOIN = "/var/lib/cloud/scripts/per-boot/50-mig-inference-join.sh"
"""cloud-init runs the scripts of this folder on every boot (`scripts_per_boot`): the OKE join
after the reboot, removing itself first."""


def nodeadm_node_config(max_pods: int) -> str:
    """The nodeadm NodeConfig that sets kubelet's maxPods (EKS merges its cluster details)."""
    return yaml.safe_dump(
        {
            "apiVersion": "node.eks.aws/v1alpha1",
            "kind": "NodeConfig",
            "spec": {"kubelet": {"config": {"maxPods": max_pods}}},
        },
        sort_keys=False,
    )


def nodeadm_drop_in(max_pods: int) -> str:
    """cloud-config writing the max-pods NodeConfig where nodeadm reads it last."""
    document = {
        "write_files": [
            {
                "path": NODEADM_DROP_IN,
                "owner": "root:root",
                "permissions": "0644",
                "content": nodeadm_node_config(max_pods),
            }
        ]
    }
    return "#cloud-config\n" + yaml.safe_dump(document, sort_keys=False)


def mig_mode_step(gpus: Sequence[int]) -> list[str]:
    """Shell lines defining `mig_mode`: wait for the driver, switch MIG mode on for `gpus`
    (nvidia-smi indexes, the order mig-parted's `devices` use), every one of them even when one
    refuses (each failure is said), and return 0 when it took, 2 when a GPU reports it pending
    (a reset is needed), 1 when it could not be done on some GPU (and none is pending)."""
    indexes = " ".join(str(gpu) for gpu in gpus)
    return [
        "# MIG mode on before the kubelet starts: the GPU Operator's MIG manager then changes no",
        "# mode, and never stops and restarts the host's kubelet (NVIDIA/gpu-operator#2415).",
        "mig_mode() {",
        "  waited=0",
        "  until nvidia-smi -L >/dev/null 2>&1; do",
        f'    if [ "$waited" -ge {DRIVER_WAIT_SECONDS} ]; then',
        f'      echo "mig-inference: no NVIDIA driver after {DRIVER_WAIT_SECONDS} s; the MIG'
        ' manager will switch MIG mode on" >&2',
        "      return 1",
        "    fi",
        "    sleep 5",
        "    waited=$((waited + 5))",
        "  done",
        "  pending=''",
        "  failed=''",
        "  # Every GPU is tried: one that refuses leaves the others switched.",
        f"  for gpu in {indexes}; do",
        '    if ! nvidia-smi -i "$gpu" -mig 1; then',
        '      echo "mig-inference: nvidia-smi could not switch MIG mode on for GPU $gpu; the MIG'
        ' manager will" >&2',
        '      failed="$failed $gpu"',
        "      continue",
        "    fi",
        '    if ! modes=$(nvidia-smi -i "$gpu" --query-gpu=mig.mode.current,mig.mode.pending'
        " --format=csv,noheader); then",
        '      echo "mig-inference: nvidia-smi could not read GPU $gpu\'s MIG mode" >&2',
        '      failed="$failed $gpu"',
        "      continue",
        "    fi",
        '    [ "${modes%%,*}" = "Enabled" ] || pending="$pending $gpu"',
        "  done",
        '  [ -z "$failed" ] || echo "mig-inference: MIG mode not switched on GPU$failed" >&2',
        '  [ -z "$pending" ] || {',
        '    echo "mig-inference: MIG mode pending (a GPU reset) on GPU$pending"',
        "    return 2",
        "  }",
        '  [ -z "$failed" ] || return 1',
        "  return 0",
        "}",
    ]


def _every_boot(gpus: Sequence[int]) -> list[str]:
    """Lines installing MODE_UNIT and MODE_SCRIPT, enabled for the boots after this one."""
    script = ["#!/bin/sh", *mig_mode_step(gpus), "mig_mode || true", "exit 0"]
    unit = [
        "[Unit]",
        "Description=mig-inference: MIG mode on before the kubelet starts",
        "Before=nodeadm-run.service kubelet.service",
        "[Service]",
        "Type=oneshot",
        f"ExecStart=/bin/sh {MODE_SCRIPT}",
        f"TimeoutStartSec={DRIVER_WAIT_SECONDS + 120}",
        "[Install]",
        "WantedBy=multi-user.target",
    ]
    return [
        f'mkdir -p "$(dirname {MODE_SCRIPT})" "$(dirname {MODE_UNIT})"',
        f"cat > {MODE_SCRIPT} <<'MIG_INFERENCE_MODE'",
        *script,
        "MIG_INFERENCE_MODE",
        f"cat > {MODE_UNIT} <<'MIG_INFERENCE_UNIT'",
        *unit,
        "MIG_INFERENCE_UNIT",
        "systemctl daemon-reload && systemctl enable mig-inference-mig-mode.service ||",
        '  echo "mig-inference: could not enable the per-boot MIG mode unit" >&2',
    ]


def _reboot_once(prepare: Sequence[str]) -> list[str]:
    """Lines that reboot once for a pending MIG mode (after `prepare`), and carry on otherwise."""
    return [
        "mig_status=0; mig_mode || mig_status=$?",
        f'if [ "$mig_status" -eq 2 ] && [ ! -e {REBOOT_MARKER} ]; then',
        *prepare,  # not indented: it may hold a here-document
        f'  mkdir -p "$(dirname {REBOOT_MARKER})" && touch {REBOOT_MARKER}',
        '  echo "mig-inference: rebooting once so MIG mode takes effect before the node joins"',
        "  systemctl reboot",
        "  exit 0",
        "fi",
    ]


def eks_mig_mode_script(gpus: Sequence[int]) -> str:
    """The EKS user data's shell part: MIG mode on for `gpus`, a reboot when a GPU needs one
    (nodeadm joins the node on the next boot)."""
    lines = ["#!/bin/sh", *mig_mode_step(gpus), *_every_boot(gpus), *_reboot_once(()), "exit 0"]
    return "\n".join(lines) + "\n"


def eks_user_data(max_pods: int, extra: str | None = None, mig_gpus: Sequence[int] = ()) -> str:
    """Base64 MIME multipart user data for an EKS launch template (AL2023 + nodeadm): the
    max-pods NodeConfig, and the cloud-config that writes it as a nodeadm drop-in (see the
    module's docstring for why both); for a pool with MIG, the shell part that switches MIG mode
    on for `mig_gpus` before nodeadm starts the kubelet; then the stack's own part
    (`userData`), a shell script or cloud-config, which cloud-init runs after them."""
    message = MIMEMultipart(boundary="MIGINFERENCE")
    # 7-bit text parts: plain to read in the launch template, and what nodeadm and cloud-init
    # both take.
    part = MIMEText(nodeadm_node_config(max_pods), "node.eks.aws", "us-ascii")
    part.replace_header("Content-Type", f'{NODEADM_CONTENT_TYPE}; charset="us-ascii"')
    message.attach(part)
    message.attach(MIMEText(nodeadm_drop_in(max_pods), "cloud-config", "us-ascii"))
    if mig_gpus:
        message.attach(MIMEText(eks_mig_mode_script(mig_gpus), "x-shellscript", "us-ascii"))
    if extra is not None:
        kind = "cloud-config" if extra.startswith("#cloud-config") else "x-shellscript"
        message.attach(MIMEText(extra, kind, "utf-8"))
    return base64.b64encode(message.as_bytes()).decode("ascii")


def _oke_join(taints: Sequence[tuple[str, str, str]]) -> list[str]:
    lines = [
        f'curl --fail -H "Authorization: Bearer Oracle" -L0 {OKE_INIT_SCRIPT_URL} '
        "| base64 --decode > /var/run/oke-init.sh",
    ]
    if taints:
        joined = ",".join(f"{k}={v}:{e}" if v else f"{k}:{e}" for k, v, e in taints)
        extra = shlex.quote(f"--register-with-taints={joined}")
        lines.append(f"bash /var/run/oke-init.sh --kubelet-extra-args {extra}")
    else:
        lines.append("bash /var/run/oke-init.sh")
    return lines


def oke_cloud_init(taints: Sequence[tuple[str, str, str]], mig_gpus: Sequence[int] = ()) -> str:
    """cloud-init for OKE nodes: run OKE's own init script, registering the taints (Kubernetes
    spelling) through kubelet, since OKE node pools have no taint field; for a pool with MIG,
    MIG mode on for `mig_gpus` first (OKE's init script starts the kubelet), and when a GPU
    needs a reboot for it, the join moved to a per-boot script that runs once after it; the
    join of a MIG pool runs once, whichever script gets there first (JOIN_MARKER)."""
    join = _oke_join(taints)
    lines = ["#!/bin/bash", "set -euo pipefail"]
    if mig_gpus:
        join = [
            f"if [ -e {JOIN_MARKER} ]; then",
            '  echo "mig-inference: the node has joined already"',
            "  exit 0",
            "fi",
            *join,
            f'mkdir -p "$(dirname {JOIN_MARKER})" && touch {JOIN_MARKER}',
        ]
        script = ["#!/bin/bash", "set -euo pipefail", f"rm -f {PER_BOOT_JOIN}", *join]
        heredoc = "MIG_INFERENCE_JOIN"
        prepare = [
            f'mkdir -p "$(dirname {PER_BOOT_JOIN})"',
            f"cat > {PER_BOOT_JOIN} <<'{heredoc}'",
            *script,
            heredoc,
            f"chmod 0755 {PER_BOOT_JOIN}",
        ]
        lines += [*mig_mode_step(mig_gpus), *_every_boot(mig_gpus), *_reboot_once(prepare)]
    lines += join
    return "\n".join(lines) + "\n"


def oke_user_data(taints: Sequence[tuple[str, str, str]], mig_gpus: Sequence[int] = ()) -> str:
    return base64.b64encode(oke_cloud_init(taints, mig_gpus).encode()).decode("ascii")
