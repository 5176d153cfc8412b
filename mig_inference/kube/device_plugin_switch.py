"""The GPU Operator's device plugin for the whole cluster: on or off, and when (pure).

Facts from GPU Operator v26.7.0 (NVIDIA/gpu-operator, tag v26.7.0):

- The operator runs its device plugin as one DaemonSet whose pods select
  `nvidia.com/gpu.deploy.device-plugin=true` (`assets/state-device-plugin/0500_daemonset.yaml`).
  Its node labeller sets that label only where it is absent or empty and keeps any other value
  (`controllers/state_manager.go` `addGPUStateLabels`), so a node labelled `false` runs no plugin
  pod: the per-node switch the re-partitioning Job turns.
- The ClusterPolicy's `spec.devicePlugin.enabled` is the switch for every node: `isStateEnabled`
  (`controllers/state_manager.go`) makes `state-device-plugin` follow it, and `DaemonSet`
  (`controllers/object_controls.go`) deletes the DaemonSet of a disabled state, so its pods leave
  every node at once whatever the node's label says. Absent means on (`api/nvidia/v1/
  clusterpolicy_types.go` `DevicePluginSpec.IsEnabled`).
- The chart renders that field from `devicePlugin.enabled` (`templates/clusterpolicy.yaml`).

So the Helm release always leaves it at the chart's default (on), and the stack's own
server-side apply patch of the ClusterPolicy (field manager `FIELD_MANAGER`) sets it, ordered by
the value it sets: on, right after the operator's release and before anything that needs a
device plugin (the re-partitioning Jobs, the pools); off, only after every re-partitioning Job
has switched its nodes to DRA and every Deployment has rolled, so no node that still runs
replicas through the device plugin loses it before it is switched (or, on a new generation, left
by its replicas). A Job that stops leaves the plugin on where its labels run it. Helm never
changes the field again: its rendered value stays the chart's default, and an upgrade's patch of
a custom resource carries only what changed between the two manifests (helm v3.20.2
`pkg/kube/client.go` `createPatch`, the JSON merge patch pulumi-kubernetes's Release sends)."""

from __future__ import annotations

from typing import Any

from mig_inference.kube.operator_values import all_dra
from mig_inference.plan import StackPlan

API_VERSION = "nvidia.com/v1"
KIND = "ClusterPolicy"
CLUSTER_POLICY = "cluster-policy"
"""The ClusterPolicy the chart creates (`templates/clusterpolicy.yaml`), cluster-scoped."""
FIELD_MANAGER = "mig-inference-device-plugin"
"""The patch's field manager: it owns `spec.devicePlugin.enabled` and nothing else."""


def device_plugin_on(plan: StackPlan) -> bool:
    """Whether the operator runs its device plugin once this `pulumi up` is done: off when every
    operator-managed pool is a DRA pool (NVIDIA's setup for DRA; it also drops the validator's
    plugin step, which no DRA node passes: `spec.dra.VALIDATOR_ON_DRA_NODES`)."""
    return not all_dra(plan)


def switch_patch(on: bool) -> dict[str, Any]:
    """The ClusterPolicy patch's `metadata` and `spec`: the field forced from the chart's owner,
    with a field manager of its own."""
    return {
        "metadata": {
            "name": CLUSTER_POLICY,
            "annotations": {
                "pulumi.com/patchForce": "true",
                "pulumi.com/patchFieldManager": FIELD_MANAGER,
            },
        },
        "spec": {"devicePlugin": {"enabled": on}},
    }
