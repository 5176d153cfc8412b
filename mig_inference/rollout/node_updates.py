"""What a cloud does to a pool's nodes when Pulumi updates the pool resource in place.

A change the provider cannot update replaces the pool (`force_new`), and the program makes every
change that must reach running nodes a new generation (`plan.pools.generation`). What is left is
an update of the pool resource, and each cloud applies each of its inputs in one of these ways:

GKE (node pool updates, `projects.locations.clusters.nodePools.update`):
- Kubernetes labels and taints reach the running nodes, none recreated (GKE, "Update Kubernetes
  node labels and taints for node pools": "without re-creating the node pool and disrupting
  running workloads"); resource labels (the nodes' cloud tags) annotate the node VMs, for which
  the API names no upgrade operation;
- machine type, disk type and size "initiate an upgrade operation that migrates the nodes"
  (`UpdateNodePoolRequest`), image type and version are a node upgrade, and the metadata server
  mode recreates the nodes too: a surge upgrade of every node. The program changes none of these
  in place (each is a generation key), so no surge upgrade runs during `pulumi up`: GKE's own
  auto-upgrades (the pools set no `version`) run outside it, in maintenance windows;
- size and zones add or remove nodes; management, drain and upgrade settings are the pool's own.

OKE (Oracle, "Modifying Node Pool and Worker Node Properties"; pulumi-oci `NodePool`:
`initial_node_labels` are added "to nodes after they join", `node_metadata` "on launch"): every
node property an update changes (labels, Kubernetes version, image, shape, cloud-init, node tags,
pod networking, placement) reaches only nodes OKE creates later; running nodes keep what they
were created with until they are replaced. Node cycling (`node_pool_cycling_details`) would
replace them, and the program does not enable it (docs/changing-a-stack.md says why). Size adds
or removes nodes; the pool's own tags and eviction settings touch no node.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum

from msgspec import Struct, field

from mig_inference.names.labels import MIG_CONFIG_LABEL
from mig_inference.rollout.node_pools import GKE_POOL, OKE_POOL
from mig_inference.rollout.steps import path_under


class Reach(StrEnum):
    RUNNING = "applied to the running nodes, none recreated"
    NEW_NODES = "kept for nodes created later"
    RECREATED = "every node recreated"
    SIZE = "nodes added or removed"
    POOL = "the pool's own settings, no node touched"


REACH: dict[str, tuple[tuple[str, Reach, str], ...]] = {
    GKE_POOL: (
        ("nodeConfig.labels", Reach.RUNNING, "node labels"),
        ("nodeConfig.taints", Reach.RUNNING, "node taints"),
        ("nodeConfig.resourceLabels", Reach.RUNNING, "the nodes' cloud labels"),
        ("nodeConfig.machineType", Reach.RECREATED, "machine type"),
        ("nodeConfig.diskSizeGb", Reach.RECREATED, "disk size"),
        ("nodeConfig.diskType", Reach.RECREATED, "disk type"),
        ("nodeConfig.imageType", Reach.RECREATED, "image type"),
        ("nodeConfig.workloadMetadataConfig", Reach.RECREATED, "metadata server"),
        ("version", Reach.RECREATED, "node version"),
        ("nodeCount", Reach.SIZE, "node count"),
        ("autoscaling", Reach.SIZE, "autoscaling bounds"),
        ("nodeLocations", Reach.SIZE, "zones"),
        ("management", Reach.POOL, "auto-repair and auto-upgrade"),
        ("nodeDrainConfigs", Reach.POOL, "drain settings"),
        ("upgradeSettings", Reach.POOL, "upgrade settings"),
    ),
    OKE_POOL: (
        ("initialNodeLabels", Reach.NEW_NODES, "node labels"),
        ("kubernetesVersion", Reach.NEW_NODES, "Kubernetes version"),
        ("nodeShape", Reach.NEW_NODES, "shape"),
        ("nodeShapeConfig", Reach.NEW_NODES, "shape"),
        ("nodeSourceDetails", Reach.NEW_NODES, "image and boot volume"),
        ("nodeMetadata", Reach.NEW_NODES, "cloud-init (the taints)"),
        ("nodeConfigDetails.size", Reach.SIZE, "size"),
        ("nodeConfigDetails.freeformTags", Reach.NEW_NODES, "node tags"),
        ("nodeConfigDetails.definedTags", Reach.NEW_NODES, "node tags"),
        ("nodeConfigDetails.nodePoolPodNetworkOptionDetails", Reach.NEW_NODES, "pod networking"),
        ("nodeConfigDetails.placementConfigs", Reach.NEW_NODES, "placement"),
        ("nodeConfigDetails", Reach.NEW_NODES, "node configuration"),
        ("freeformTags", Reach.POOL, "the pool's tags"),
        ("definedTags", Reach.POOL, "the pool's tags"),
        ("nodeEvictionNodePoolSettings", Reach.POOL, "eviction settings"),
        ("nodePoolCyclingDetails", Reach.POOL, "cycling settings"),
    ),
}
"""Per pool type: input paths (a path and everything under it; the first match decides), how
the cloud applies a change of them, and what `diff` calls them."""

GKE_SURGE = (
    "GKE recreates every node in a surge upgrade (no upgrade settings: maxSurge 1, "
    "maxUnavailable 0; PodDisruptionBudgets honoured for up to an hour, then the node is "
    "drained regardless) - not simulated"
)
"""GKE, "Surge upgrades" and "Standard cluster upgrades" (the drain's one-hour limit)."""


class NodeUpdate(Struct, frozen=True):
    """How one update of a pool resource reaches the pool's nodes."""

    cloud: str
    reach: Mapping[Reach, tuple[str, ...]] = field(default_factory=dict)
    """What changed (as `diff` names it), by how the cloud applies it."""
    unknown: tuple[str, ...] = ()
    """Changed paths no rule covers."""

    def describe(self, running: int) -> str:
        """One line for `diff`: what the cloud does, given the pool's `running` nodes."""
        parts = []
        for reach, fields in self.reach.items():
            what = ", ".join(fields)
            if reach is Reach.RECREATED:
                parts.append(f"{what}: {GKE_SURGE}")  # only GKE's rules recreate nodes
            elif reach is Reach.NEW_NODES:
                parts.append(
                    f"{what}: only nodes {self.cloud.upper()} creates from now on get it; the "
                    f"{running} running node(s) keep the old value until they are replaced "
                    "(node cycling is not enabled)"
                )
            else:
                parts.append(f"{what}: {reach.value}")
        if self.unknown:
            parts.append(f"{', '.join(self.unknown)}: not known what the cloud does")
        return "; ".join(parts)


def node_update(
    type_token: str,
    changed: tuple[str, ...],
    old_labels: Mapping[str, str] | None = None,
    new_labels: Mapping[str, str] | None = None,
) -> NodeUpdate | None:
    """How the cloud applies these changed input paths of a pool resource (None: a pool type
    without rules: EKS, whose launch-template rolls `cloud_pools.EksRoll` models)."""
    rules = REACH.get(type_token)
    if rules is None:
        return None
    reach: dict[Reach, list[str]] = {}
    unknown: list[str] = []

    def add(how: Reach, name: str) -> None:
        if name not in reach.setdefault(how, []):
            reach[how].append(name)

    for path in changed:
        rule = next(((r, n) for p, r, n in rules if path_under(path, p)), None)
        if rule is None:
            unknown.append(path)
        elif path_under(path, "initialNodeLabels"):
            # A list of key/value pairs to the provider: name the label keys that changed.
            old, new = old_labels or {}, new_labels or {}
            for key in sorted(k for k in {*old, *new} if old.get(k) != new.get(k)):
                if key == MIG_CONFIG_LABEL:
                    # In place, the re-partitioning Job relabels the running nodes itself.
                    add(Reach.RUNNING, f"{key} (by the re-partitioning Job)")
                else:
                    add(Reach.NEW_NODES, f"node label {key}")
        else:
            add(*rule)
    cloud = "gke" if type_token == GKE_POOL else "oke"
    ordered = {r: tuple(reach[r]) for r in Reach if r in reach}
    return NodeUpdate(cloud, ordered, tuple(unknown))
