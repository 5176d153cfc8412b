"""Node bootstrap user data: EKS AL2023 nodeadm NodeConfig and OKE cloud-init."""

from __future__ import annotations

import base64
import shlex
from collections.abc import Sequence
from email.mime.multipart import MIMEMultipart
from email.mime.text import MIMEText

import yaml

NODEADM_CONTENT_TYPE = "application/node.eks.aws"
OKE_INIT_SCRIPT_URL = "http://169.254.169.254/opc/v2/instance/metadata/oke_init_script"


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


def eks_user_data(max_pods: int) -> str:
    """Base64 MIME multipart user data for an EKS launch template (AL2023 + nodeadm)."""
    message = MIMEMultipart(boundary="MIGINFERENCE")
    # 7-bit text, not base64: nodeadm reads parts with Go's mime/multipart, which does not
    # decode a base64 transfer encoding.
    part = MIMEText(nodeadm_node_config(max_pods), "node.eks.aws", "us-ascii")
    part.replace_header("Content-Type", f'{NODEADM_CONTENT_TYPE}; charset="us-ascii"')
    message.attach(part)
    return base64.b64encode(message.as_bytes()).decode("ascii")


def oke_cloud_init(taints: Sequence[tuple[str, str, str]]) -> str:
    """cloud-init for OKE nodes: run OKE's own init script, registering the taints (Kubernetes
    spelling) through kubelet, since OKE node pools have no taint field."""
    lines = [
        "#!/bin/bash",
        "set -euo pipefail",
        f'curl --fail -H "Authorization: Bearer Oracle" -L0 {OKE_INIT_SCRIPT_URL} '
        "| base64 --decode > /var/run/oke-init.sh",
    ]
    if taints:
        joined = ",".join(f"{k}={v}:{e}" if v else f"{k}:{e}" for k, v, e in taints)
        extra = shlex.quote(f"--register-with-taints={joined}")
        lines.append(f"bash /var/run/oke-init.sh --kubelet-extra-args {extra}")
    else:
        lines.append("bash /var/run/oke-init.sh")
    return "\n".join(lines) + "\n"


def oke_user_data(taints: Sequence[tuple[str, str, str]]) -> str:
    return base64.b64encode(oke_cloud_init(taints).encode()).decode("ascii")
