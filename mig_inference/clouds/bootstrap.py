"""Node bootstrap user data: EKS AL2023 nodeadm NodeConfig and OKE cloud-init.

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


def eks_user_data(max_pods: int, extra: str | None = None) -> str:
    """Base64 MIME multipart user data for an EKS launch template (AL2023 + nodeadm): the
    max-pods NodeConfig, and the cloud-config that writes it as a nodeadm drop-in (see the
    module's docstring for why both); then the stack's own part (`userData`), a shell script or
    cloud-config, which cloud-init runs after them."""
    message = MIMEMultipart(boundary="MIGINFERENCE")
    # 7-bit text parts: plain to read in the launch template, and what nodeadm and cloud-init
    # both take.
    part = MIMEText(nodeadm_node_config(max_pods), "node.eks.aws", "us-ascii")
    part.replace_header("Content-Type", f'{NODEADM_CONTENT_TYPE}; charset="us-ascii"')
    message.attach(part)
    message.attach(MIMEText(nodeadm_drop_in(max_pods), "cloud-config", "us-ascii"))
    if extra is not None:
        kind = "cloud-config" if extra.startswith("#cloud-config") else "x-shellscript"
        message.attach(MIMEText(extra, kind, "utf-8"))
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
