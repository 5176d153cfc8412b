"""GPU Operator Helm values built from the stack plan (pure; every key path exists in the
pinned chart's values.yaml, which the tests check against NVIDIA's file)."""

from __future__ import annotations

from typing import Any

from mig.clouds import Cloud
from mig.labels import GPU_TAINT_KEY
from mig.migparted import document, dump
from mig.plan import StackPlan

CUSTOM_CONFIG_NAME = "mig-inference-mig-parted-config"
"""ConfigMap the chart creates for custom layouts (`migManager.config.name`)."""
GKE_NVIDIA_DIR = "/home/kubernetes/bin/nvidia"

_NFD_CONTROL_PLANE = {
    "key": "node-role.kubernetes.io/control-plane",
    "operator": "Equal",
    "value": "",
    "effect": "NoSchedule",
}


def operand_tolerations(plan: StackPlan) -> list[dict[str, str]]:
    """`nvidia.com/gpu` (the chart's default) plus every taint key of the operator's pools."""
    tolerations = [{"key": GPU_TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"}]
    for pool in plan.pools:
        if not pool.operator_managed:
            continue
        for key, _value, effect in pool.taints:
            entry = {"key": key, "operator": "Exists", "effect": effect}
            if entry not in tolerations:
                tolerations.append(entry)
    return tolerations


def operator_needed(plan: StackPlan) -> bool:
    return any(pool.operator_managed for pool in plan.pools)


def custom_mig_parted_yaml(plan: StackPlan) -> str | None:
    """The mig-parted config holding every custom layout the pools use, or None when NVIDIA's
    built-in configs cover every pool."""
    configs = plan.custom_mig_configs()
    if not configs:
        return None
    # Keep NVIDIA's two generic configs so a node labelled with them still works.
    all_configs = {
        "all-disabled": [{"devices": "all", "mig-enabled": False}],
        "all-enabled": [{"devices": "all", "mig-enabled": True, "mig-devices": {}}],
        **configs,
    }
    return dump(document(all_configs))


def gpu_operator_values(plan: StackPlan) -> dict[str, Any]:
    spec = plan.spec
    operator = spec.gpu_operator
    tolerations = operand_tolerations(plan)
    mig_manager: dict[str, Any] = {"enabled": True, "env": []}
    if operator.with_reboot:
        mig_manager["env"].append({"name": "WITH_REBOOT", "value": "true"})
    custom = custom_mig_parted_yaml(plan)
    if custom is not None:
        mig_manager["config"] = {
            "name": CUSTOM_CONFIG_NAME,
            "create": True,
            "data": {"config.yaml": custom},
        }
    values: dict[str, Any] = {
        "mig": {"strategy": "mixed"},
        "migManager": mig_manager,
        "daemonsets": {"tolerations": tolerations},
        "node-feature-discovery": {"worker": {"tolerations": [_NFD_CONTROL_PLANE, *tolerations]}},
        "dcgmExporter": {"serviceMonitor": {"enabled": operator.service_monitor}},
    }
    if spec.cloud is Cloud.EKS:
        # The AL2023 NVIDIA AMI ships the driver and the container toolkit.
        values["driver"] = {"enabled": False}
        values["toolkit"] = {"enabled": False}
    elif spec.cloud is Cloud.OKE:
        # OKE GPU images ship the driver.
        values["driver"] = {"enabled": False}
    elif spec.cloud is Cloud.GKE:
        # Google's driver installer puts the driver under /home/kubernetes/bin/nvidia.
        values["driver"] = {"enabled": False}
        values["hostPaths"] = {"driverInstallDir": GKE_NVIDIA_DIR}
        values["toolkit"] = {
            "installDir": GKE_NVIDIA_DIR,
            "env": [{"name": "RUNTIME_CONFIG_SOURCE", "value": "file"}],
        }
    return values
