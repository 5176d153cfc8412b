"""What the simulation of one `pulumi up` observed: per service, per pool, and overall."""

from __future__ import annotations

from msgspec import Struct, field

from mig_inference.rollout.steps import StepPlan


class Served(Struct):
    """One service over the transition."""

    before: int
    after: int
    least: int
    least_at: float = 0.0
    below_seconds: float = 0.0
    """Time with fewer Ready replicas than the smaller of before and after."""
    down_seconds: float = 0.0
    """Time with no Ready replica at all (services that had some before)."""
    pending_at_end: int = 0


class PoolOutcome(Struct):
    nodes_created: int = 0
    nodes_deleted: int = 0
    nodes_drained: int = 0
    nodes_relabelled: int = 0
    left_cordoned: list[str] = field(default_factory=list)
    released: list[str] = field(default_factory=list)
    """Nodes an existing pool no longer names, moved out of it by the re-partitioning Job."""
    peak_gpus: int = 0
    gpus_before: int = 0
    gpus_after: int = 0
    evicted: int = 0
    """Replicas taken off its nodes against their will (not rolling updates or scale-downs)."""
    config_missing: list[str] = field(default_factory=list)
    """Nodes whose sharing label named a key the device plugin's ConfigMap lacked at some moment
    (a plugin starting then would not start)."""
    plugin_blocked: list[str] = field(default_factory=list)
    """Nodes whose device plugin started in such a moment: it advertised nothing until the label
    named a known key."""
    most_devices_down: int = 0
    """The most devices its live nodes did not advertise at one time (layouts being applied)."""
    switched: list[str] = field(default_factory=list)
    """Nodes moved between the device plugin and NVIDIA's DRA driver, `name (allocation now)`."""
    offered_twice: list[str] = field(default_factory=list)
    """Nodes whose devices the device plugin and the DRA driver offered at one moment."""
    mig_config_missing: dict[str, tuple[str, float]] = field(default_factory=dict)
    """Nodes whose MIG config label named a config the operator's mig-parted config lacked for a
    while: node -> (the config, how long)."""
    without_plugin: list[str] = field(default_factory=list)
    """Nodes whose replicas held the device plugin's devices while the GPU Operator ran no device
    plugin at all, the node not yet switched to DRA."""
    node_update: str = ""
    """What the cloud does to the pool's nodes on an in-place update of the pool (GKE, OKE:
    `node_updates`); empty when the pool resource is not updated."""

    @property
    def extra_gpus(self) -> int:
        """GPUs beyond the larger of before and after, at the peak (both generations up)."""
        return max(0, self.peak_gpus - max(self.gpus_before, self.gpus_after))


class Outcome(Struct):
    """What one `pulumi up` does, as the simulation observed it."""

    plan: StepPlan
    services: dict[str, Served]
    pools: dict[str, PoolOutcome]
    failure: str | None
    """The step Pulumi failed at, and why (None when the update finished)."""
    seconds: float
    events: list[tuple[float, str]]
    started: dict[tuple[str, str], int] = field(default_factory=dict)
    """Replicas that started (and loaded their model) during the update, per (namespace,
    Deployment)."""

    @property
    def refused(self) -> bool:
        return bool(self.plan.refusals)
