"""Kubeconfigs for created clusters, authenticating through each cloud's CLI plugin."""

from __future__ import annotations

from typing import Any

import pulumi
import yaml


def _kubeconfig(name: str, server: str, ca_data: str, user: dict[str, Any]) -> str:
    return yaml.safe_dump(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {"name": name, "cluster": {"server": server, "certificate-authority-data": ca_data}}
            ],
            "contexts": [{"name": name, "context": {"cluster": name, "user": name}}],
            "current-context": name,
            "users": [{"name": name, "user": user}],
        },
        sort_keys=False,
    )


def _exec(command: str, args: list[str], hint: str) -> dict[str, Any]:
    return {
        "exec": {
            "apiVersion": "client.authentication.k8s.io/v1beta1",
            "command": command,
            "args": args,
            "interactiveMode": "Never",
            "installHint": hint,
            "provideClusterInfo": command == "gke-gcloud-auth-plugin",
        }
    }


def gke_kubeconfig(
    name: pulumi.Input[str], endpoint: pulumi.Input[str], ca: pulumi.Input[str]
) -> pulumi.Output[str]:
    return pulumi.Output.all(name, endpoint, ca).apply(
        lambda v: _kubeconfig(
            str(v[0]),
            f"https://{v[1]}",
            str(v[2]),
            _exec(
                "gke-gcloud-auth-plugin", [], "Install gke-gcloud-auth-plugin (gcloud components)"
            ),
        )
    )


def eks_kubeconfig(
    name: pulumi.Input[str], endpoint: pulumi.Input[str], ca: pulumi.Input[str], region: str
) -> pulumi.Output[str]:
    return pulumi.Output.all(name, endpoint, ca).apply(
        lambda v: _kubeconfig(
            str(v[0]),
            str(v[1]),
            str(v[2]),
            _exec(
                "aws",
                ["eks", "get-token", "--cluster-name", str(v[0]), "--region", region],
                "Install the AWS CLI v2",
            ),
        )
    )


OKE_TOKEN_VERSION = "2.0.0"
"""The only kubeconfig token version OKE generates."""


def oke_endpoint_type(public: bool) -> str:
    """Which of an OKE cluster's endpoints the kubeconfig targets."""
    return "PUBLIC_ENDPOINT" if public else "PRIVATE_ENDPOINT"


def oke_kubeconfig(
    cluster_id: pulumi.Input[str],
    endpoint: pulumi.Input[str],
    opts: pulumi.InvokeOutputOptions | None = None,
) -> pulumi.Output[str]:
    """OKE's generated kubeconfig (its user runs `oci ce cluster generate-token`), read through
    the provider `opts` names or its parent has."""
    import pulumi_oci as oci  # only OKE stacks have the OCI SDK (an extra of the package)

    return oci.containerengine.get_cluster_kube_config_output(
        cluster_id=cluster_id, endpoint=endpoint, token_version=OKE_TOKEN_VERSION, opts=opts
    ).content
