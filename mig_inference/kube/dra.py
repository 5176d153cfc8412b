"""NVIDIA's DRA driver for GPUs: its chart values, the DeviceClasses that bridge MIG profiles to
extended resources, and the CEL selectors a claim picks its slice with (pure).

Facts from the driver at v0.4.1 (`shared/reference/dra/dra-examples/NOTES.md`): it publishes
every MIG slice as a device of driver `gpu.nvidia.com` with the attributes `type` (`mig`, or `gpu`
for a whole GPU), `profile` (NVML's name, e.g. `3g.40gb`, `1g.10gb+me`) and the capacity `memory`
(the slice's usable MiB, in bytes); its chart installs the DeviceClasses `mig.nvidia.com` and
`gpu.nvidia.com`, and refuses the `default` namespace and to run beside a device plugin unless
`gpuResourcesEnabledOverride` says the device plugin is kept away (this project does that with a
node label per DRA pool)."""

from __future__ import annotations

import math
import re
from typing import Any

from msgspec import Struct

from mig_inference.clouds import Cloud
from mig_inference.kube.operator_values import GKE_NVIDIA_DIR, OPERAND_TOLERATIONS
from mig_inference.names.labels import (
    CLIENT_DEPLOY_LABEL,
    DRA_DRIVER,
    DRA_NODE_LABEL,
    GPU_DEVICE_CLASS,
    MIG_DEVICE_CLASS,
)
from mig_inference.plan import StackPlan
from mig_inference.plan.model import WHOLE_GPU, Offer, PoolPlan, ServicePlan
from mig_inference.spec import Allocation, DraSpec
from mig_inference.versions import DRA_DRIVER_VERSION

CLAIM_NAME = "gpu-device"
"""The pod-level name of a replica's claim, which its containers reference."""
REQUEST_NAME = "slice"
"""The one request of every claim template."""
OPERATOR_DRIVER_ROOT = "/run/nvidia/driver"
"""Where the GPU Operator installs the driver when it owns it (the DRA driver's docs/install.md)."""
HOST_DRIVER_ROOT = "/"
"""EKS's NVIDIA AMI and OKE's GPU images ship the driver on the host."""
FEATURE_DYNAMIC_MIG = "DynamicMIG"
CLIENT_LABEL_OPERATOR = (26, 7, 0)
"""The first GPU Operator that sets `nvidia.com/gpu.deploy.client=true` on GPU nodes and ships a
MIG manager (v0.15.0) that pauses it around a MIG change."""


def driver_root(cloud: Cloud) -> str:
    """Where the nodes' NVIDIA driver lives (where the GPU Operator's values put it)."""
    if cloud is Cloud.GKE:
        return GKE_NVIDIA_DIR
    if cloud in (Cloud.EKS, Cloud.OKE):
        return HOST_DRIVER_ROOT
    return OPERATOR_DRIVER_ROOT


def uses_dra(plan: StackPlan) -> bool:
    return any(pool.dra for pool in plan.pools)


def dra_settings(plan: StackPlan) -> DraSpec:
    assert plan.spec.dra is not None, "the spec reads a dra section whenever a pool uses DRA"
    return plan.spec.dra


def plugin_follows_mig_manager(plan: StackPlan) -> bool:
    """The kubelet plugin is scheduled by `nvidia.com/gpu.deploy.client=true`, so the GPU
    Operator's MIG manager stops it before it applies a layout and starts it again after, and the
    new plugin discovers the new slices: with GPU Operator v26.7.0 or later (mig-manager
    v0.15.0), and not with DynamicMIG, where no MIG manager runs on the DRA pools' nodes. With an
    older operator nothing sets the label (the plugin would never be scheduled), and the
    project's Jobs restart the plugin themselves."""
    if dra_settings(plan).dynamic_mig:
        return False
    found = re.match(r"^v(\d+)\.(\d+)\.(\d+)$", plan.spec.gpu_operator.version)
    if found is None:
        return False
    return tuple(int(part) for part in found.groups()) >= CLIENT_LABEL_OPERATOR


def driver_values(plan: StackPlan) -> dict[str, Any]:
    """The driver chart's values: GPUs only (no ComputeDomains), its kubelet plugin on the DRA
    pools' nodes only (where the GPU Operator's device plugin is kept off, so the override of
    the chart's device-plugin guard holds), the resource API the cluster serves, and the
    driver root of the cloud's nodes. Where the GPU Operator's MIG manager restarts the plugin
    around a MIG change, the plugin also selects `nvidia.com/gpu.deploy.client=true`."""
    settings = dra_settings(plan)
    selector = {DRA_NODE_LABEL: Allocation.DRA.value}
    if plugin_follows_mig_manager(plan):
        selector[CLIENT_DEPLOY_LABEL] = "true"
    values: dict[str, Any] = {
        "nvidiaDriverRoot": driver_root(plan.spec.cloud),
        "gpuResourcesEnabledOverride": True,
        "resourceApiVersion": "resource.k8s.io/v1",
        "resources": {"gpus": {"enabled": True}, "computeDomains": {"enabled": False}},
        "kubeletPlugin": {
            "nodeSelector": selector,
            # A per-node agent, like the operator's operands: a list of the pools' taints would
            # restart it (and drop every published slice) whenever a taint changes.
            "tolerations": OPERAND_TOLERATIONS,
            # The chart's own affinity (NFD's NVIDIA PCI labels, which the GPU Operator's NFD
            # sets on every GPU node) holds too.
        },
    }
    if settings.dynamic_mig:
        values["featureGates"] = {FEATURE_DYNAMIC_MIG: True}
    return values


DRIVER_CLUSTER_WIDE_PODS = 10
"""The driver's controller and webhook (off here, but counted), with room to spare."""


def driver_critical_pods(plan: StackPlan) -> int:
    """Pods at system-node/cluster-critical priority the driver's namespace may hold on GKE:
    its kubelet plugin on every node of a DRA pool (the chart's `kubeletPlugin.
    priorityClassName: system-node-critical`), both generations of a pool counted during a
    blue/green roll-out. The priority is kept, and the quota GKE asks for made, rather than
    cleared as the upstream GKE demo does (`demo/clusters/gke/install-dra-driver-gpu.sh`,
    shared/reference/dra/NOTES-0.5.md section 3): the plugin must not be preempted off a
    node whose slices it publishes."""
    nodes = sum(pool.max_nodes for pool in plan.pools if pool.dra)
    return 2 * nodes + DRIVER_CLUSTER_WIDE_PODS


def bridged(plan: StackPlan) -> bool:
    """Pods of DRA pools keep their extended-resource requests (1.36+ DeviceClass bridge)."""
    return uses_dra(plan) and dra_settings(plan).extended_resources


class ProfileClass(Struct, frozen=True):
    """A DeviceClass mapping one MIG profile to its extended resource (KEP-5004)."""

    name: str
    profile: str
    extended_resource: str
    expression: str


def profile_class_name(resource: str) -> str:
    """`nvidia.com/mig-1g.10gb.me` -> `mig-1g.10gb.me.mig-inference.io` (a DNS subdomain)."""
    return f"{resource.removeprefix('nvidia.com/')}.mig-inference.io"


def profile_classes(plan: StackPlan) -> list[ProfileClass]:
    """One DeviceClass per MIG profile the DRA pools offer, when the bridge is on. Whole GPUs
    need none: the chart's `gpu.nvidia.com` class maps `nvidia.com/gpu` itself."""
    if not bridged(plan):
        return []
    offers = {
        offer.resource: offer
        for pool in plan.pools
        if pool.dra
        for offer in pool.offers
        if offer.profile != WHOLE_GPU
    }
    return [
        ProfileClass(
            profile_class_name(resource),
            offers[resource].profile,
            resource,
            f"{_is_driver()} && {_attribute('type')} == 'mig' && "
            f"{_attribute('profile')} == '{offers[resource].profile}'",
        )
        for resource in sorted(offers)
    ]


def _is_driver() -> str:
    return f"device.driver == '{DRA_DRIVER}'"


def _attribute(name: str) -> str:
    return f"device.attributes['{DRA_DRIVER}'].{name}"


def device_class(offer: Offer) -> str:
    return GPU_DEVICE_CLASS if offer.profile == WHOLE_GPU else MIG_DEVICE_CLASS


def slice_selector(offer: Offer, need_mib: float | None) -> str:
    """The CEL expression a claim's request selects its device with: the planned profile (the
    node's pool already fixes the GPU model), and the slice's memory against what the model
    needs, so a slice NVML sizes smaller than the catalog says is never taken."""
    terms = [] if offer.profile == WHOLE_GPU else [f"{_attribute('profile')} == '{offer.profile}'"]
    if need_mib is not None:
        terms.append(
            f"device.capacity['{DRA_DRIVER}'].memory.compareTo(quantity('{math.ceil(need_mib)}Mi'))"
            " >= 0"
        )
    return " && ".join(terms) or "true"


def claim_template_name(plan: ServicePlan) -> str:
    return f"{plan.name}-{CLAIM_NAME}"


def claims_needed(service: ServicePlan, plan: StackPlan) -> bool:
    """The service's pods claim their device through a ResourceClaimTemplate (a DRA pool
    without the extended-resource bridge)."""
    return service.pool.dra and not bridged(plan)


def allocation_text(pool: PoolPlan, plan: StackPlan) -> str:
    """How the pool's devices reach pods, in a line of the plan."""
    if not pool.dra:
        return "device plugin (extended resources)"
    settings = dra_settings(plan)
    how = (
        "pods keep nvidia.com/mig-* requests, a DeviceClass per profile maps them"
        if settings.extended_resources
        else "each replica claims its slice through a ResourceClaimTemplate"
    )
    dynamic = (
        "; DynamicMIG (alpha): the driver creates slices per claim" if pool.dynamic_mig else ""
    )
    return (
        f"NVIDIA DRA driver {DRA_DRIVER_VERSION} (Kubernetes {settings.kubernetes_version}): "
        f"{how}{dynamic}"
    )


def claim_json(service: ServicePlan, plan: StackPlan) -> dict[str, str] | None:
    """The claim a service's pods make (None: they request the extended resource)."""
    if not claims_needed(service, plan):
        return None
    return {
        "template": claim_template_name(service),
        "device_class": device_class(service.offer),
        "selector": slice_selector(service.offer, service.spec.need_mib),
    }
