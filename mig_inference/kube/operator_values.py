"""GPU Operator Helm values built from the stack plan (pure; every key path exists in the
pinned chart's values.yaml, which the tests check against NVIDIA's file)."""

from __future__ import annotations

from typing import Any

import yaml

from mig_inference.clouds import GPU_OPERATOR_PODS_PER_NODE, Cloud
from mig_inference.gpus.migparted import ALL_DISABLED, config_entries, document, dump, named_configs
from mig_inference.kube.monitoring import DCGM_PORT, scrape_annotations
from mig_inference.names.labels import DEVICE_PLUGIN_CONFIG_LABEL
from mig_inference.plan import StackPlan
from mig_inference.plan.sharing import SHARED_SUFFIX

MIG_PARTED_CONFIG_MAP = "mig-inference-mig-parted-config"
"""ConfigMap the chart creates from our mig-parted config (`migManager.config.name`): the MIG
manager reads it instead of generating one from the hardware, so every config name a node is
labelled with is known, and checked, before anything is deployed."""
DEVICE_PLUGIN_CONFIG_MAP = "mig-inference-device-plugin-configs"
"""ConfigMap the project owns with the device plugin's configs (`devicePlugin.config.name`; the
chart does not create it): a base holding DEVICE_PLUGIN_DEFAULT_CONFIG and one server-side apply
patch per time-sliced pool's key. NVIDIA's config manager exits when a node's label names a key
the ConfigMap lacks, so a key is added before any node is labelled with it and removed only in
Pulumi's delete phase, after the nodes were relabelled or deleted. (Named apart from the
ConfigMap the chart created before: Helm deletes that one when the release stops rendering it.)"""
DEVICE_PLUGIN_DEFAULT_CONFIG = "default"
"""The config a node without a sharing label gets (`devicePlugin.config.default`); never a pool's
key, which ends in a hash. It also keeps the ConfigMap from ever being empty, which the config
manager refuses (`no configuration files available`)."""
GKE_NVIDIA_DIR = "/home/kubernetes/bin/nvidia"

OTHER_NODES_ALLOWANCE = 100
"""Nodes outside the stack's GPU pools (system and other pools) the quota leaves room for: the
NFD worker, at system-node-critical priority, runs on every node of the cluster."""
CLUSTER_WIDE_CRITICAL_PODS = 10
"""The operator, NFD master and garbage collector (system-node-critical), with room to spare."""


OPERAND_TOLERATIONS = [{"operator": "Exists"}]
"""The operator's operands and NFD workers tolerate every taint: they are per-node agents, and a
list made of the pools' taints would change (and restart every operand, reloading the driver
where the operator owns it) whenever a pool's taint does."""


def operator_critical_pods(plan: StackPlan) -> int:
    """Pods at system-node/cluster-critical priority the operator namespace may hold on GKE.

    Every GPU node of an operator-managed pool runs the operands and the NFD worker
    (GPU_OPERATOR_PODS_PER_NODE) plus Google's driver installer; both generations of a pool run
    side by side during a blue/green roll-out, so each pool counts twice at its largest size."""
    gpu_nodes = sum(pool.max_nodes for pool in plan.pools if pool.operator_managed)
    per_gpu_node = GPU_OPERATOR_PODS_PER_NODE + 1
    return 2 * gpu_nodes * per_gpu_node + OTHER_NODES_ALLOWANCE + CLUSTER_WIDE_CRITICAL_PODS


def all_dra(plan: StackPlan) -> bool:
    """Every operator-managed pool hands its slices out through DRA: no node needs the
    operator's device plugin."""
    managed = [pool for pool in plan.pools if pool.operator_managed]
    return bool(managed) and all(pool.dra for pool in managed)


def operator_needed(plan: StackPlan) -> bool:
    return any(pool.operator_managed for pool in plan.pools)


def mig_parted_configs(plan: StackPlan) -> dict[str, list[dict[str, object]]]:
    """Every config the MIG manager may be asked for on this stack's nodes.

    When a custom ConfigMap is given, the MIG manager reads only it (the chart's values.yaml),
    so it holds NVIDIA's named configs for every GPU model of an operator-managed pool, with
    NVIDIA's content and that model's device filter, and each pool's own layout. Entries of
    one name for several GPU models sit side by side, told apart by their device filters."""
    configs: dict[str, list[dict[str, object]]] = {}

    def add(name: str, entries: list[dict[str, object]]) -> None:
        listed = configs.setdefault(name, [])
        listed.extend(entry for entry in entries if entry not in listed)

    managed = [pool for pool in plan.pools if pool.operator_managed and pool.gpu.mig_capable]
    for gpu in sorted({pool.gpu for pool in managed}, key=lambda g: g.name):
        for name, layout in named_configs(gpu).items():
            add(name, config_entries(gpu, [layout]))
    for pool in managed:
        if not pool.builtin_config:
            add(pool.config_name, pool.mig_parted_entries())
    return configs


def mig_parted_yaml(plan: StackPlan) -> str:
    """The mig-parted `version: v1` document the MIG manager reads."""
    return dump(document(mig_parted_configs(plan)))


def _plugin_config(**sections: object) -> str:
    """A device-plugin config in NVIDIA's `version: v1` format, mixed MIG strategy."""
    document = {"version": "v1", "flags": {"migStrategy": "mixed"}, **sections}
    return yaml.safe_dump(document, sort_keys=False)


def device_plugin_default_config() -> str:
    return _plugin_config()


def device_plugin_configs(plan: StackPlan) -> dict[str, str]:
    """The device plugin's config per time-sliced pool, keyed by the value its nodes carry in
    `nvidia.com/device-plugin.config`."""
    configs = {}
    for pool in plan.pools:
        if not pool.operator_managed or pool.spec.sharing is None:
            continue
        shared = [offer for offer in pool.offers if offer.shared_by > 1]
        configs[pool.node_labels[DEVICE_PLUGIN_CONFIG_LABEL]] = _plugin_config(
            sharing={
                "timeSlicing": {
                    "renameByDefault": pool.spec.sharing.rename,
                    # A pod asking for two shares of one device would get no more GPU.
                    "failRequestsGreaterThanOne": True,
                    "resources": [
                        {
                            "name": offer.resource.removesuffix(SHARED_SUFFIX),
                            "replicas": offer.shared_by,
                        }
                        for offer in shared
                    ],
                }
            }
        )
    return configs


def _dcgm_service_monitor(plan: StackPlan) -> dict[str, Any]:
    """The DCGM exporter's ServiceMonitor: on with `monitoring.prometheusOperator` (or the
    operator's own switch), labelled for a Prometheus that selects by `release`."""
    monitoring = plan.spec.monitoring
    enabled = plan.spec.gpu_operator.service_monitor or monitoring.prometheus_operator
    values: dict[str, Any] = {"enabled": enabled}
    if enabled and monitoring.release_label:
        values["additionalLabels"] = {"release": monitoring.release_label}
    return values


def _dcgm_exporter(plan: StackPlan) -> dict[str, Any]:
    values: dict[str, Any] = {"serviceMonitor": _dcgm_service_monitor(plan)}
    if plan.spec.monitoring.scrape_annotations:
        values["annotations"] = scrape_annotations(DCGM_PORT)
    return values


def gpu_operator_values(plan: StackPlan) -> dict[str, Any]:
    spec = plan.spec
    operator = spec.gpu_operator
    tolerations = OPERAND_TOLERATIONS
    mig_manager: dict[str, Any] = {"enabled": True, "env": []}
    if operator.with_reboot:
        mig_manager["env"].append({"name": "WITH_REBOOT", "value": "true"})
    mig_manager["config"] = {
        "name": MIG_PARTED_CONFIG_MAP,
        "create": True,
        "default": ALL_DISABLED,
        "data": {"config.yaml": mig_parted_yaml(plan)},
    }
    values: dict[str, Any] = {
        "mig": {"strategy": "mixed"},
        "migManager": mig_manager,
        "daemonsets": {"tolerations": tolerations},
        "node-feature-discovery": {"worker": {"tolerations": tolerations}},
        "dcgmExporter": _dcgm_exporter(plan),
    }
    # `devicePlugin.enabled` stays the chart's default (on): the stack's own patch of the
    # ClusterPolicy turns the device plugin off for all-DRA stacks, after the re-partitioning
    # Jobs switched their nodes (`kube.device_plugin_switch`).
    if device_plugin_configs(plan):
        values["devicePlugin"] = {
            "config": {
                "create": False,
                "name": DEVICE_PLUGIN_CONFIG_MAP,
                "default": DEVICE_PLUGIN_DEFAULT_CONFIG,
            }
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
