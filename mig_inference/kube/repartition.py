"""In-place re-partitioning: the POSIX shell script a Job runs to move a pool's nodes to a new
MIG config one batch (`maxUnavailable` nodes) at a time.

NVIDIA's MIG manager does not evict user pods, and it applies a layout only when the value of
`nvidia.com/mig.config` changes (or its pod starts). So, per batch, the script:

- stops before any change when a pod holding a GPU can never be evicted (owned by a DaemonSet),
  when one has no controller (an eviction deletes it for good: refused as `kubectl drain` refuses
  it, unless `pools[i].evictUnmanagedPods`), and, on `existing` pools, when a named node does not
  exist; and when a switch between the device plugin and DRA would strand replicas of the pool's
  services: their pods, on a node whose plugin would switch, ask for a slice only the plugin
  being turned off serves until their Deployments roll after the Job (a `nvidia.com/mig-*`
  request reaches DRA only through the extended-resource bridge, `SWITCH_KEEPS_REQUESTS`; a
  resource claim never reaches the device plugin, which serves requests whatever the stack
  says now);
- cordons the nodes, marking its own cordons (`mig-inference.io/cordoned-for=<config>`), so a
  later run resumes a node an interrupted one left cordoned; a node someone else cordoned is
  re-partitioned and left cordoned;
- restores, first, the PodDisruptionBudgets of the pool's services an earlier run left relaxed
  (marked `mig-inference.io/relaxed-from`: its restore failed, or it was killed), whether or not
  it has a node to switch;
- takes the emptiest nodes first (fewest pods holding GPU devices), so that nodes with room are
  switched early;
- relaxes the budgets of the stack's services on the pool (one replica at a time otherwise) to
  `maxUnavailable: 100%` only for a batch's drain and only for the services whose replicas there
  outnumber the free devices of what they hold on the nodes already switched, marking each with
  the value to restore, and restores them once the drain is over and on every way out (an EXIT
  trap); the other services' replicas leave one at a time onto the switched nodes' free devices
  (a strict budget still refusing at the drain's deadline is relaxed then, once, for one more
  drain timeout), unless a replica of the pool's services is Pending, waiting for the Job to end
  (every budget of the batch relaxed then: the Job takes no longer than it must);
- evicts the pods that hold GPU or MIG devices through the Eviction API (PodDisruptionBudgets
  decide) until the drain deadline; a drain that cannot finish uncordons the nodes it never
  relabelled and names the pods and the refusals;
- relabels in one patch that also clears `nvidia.com/mig.config.state`, conditional on the node
  being unchanged since the Job read it; a failed patch is followed by a fresh read, and a node
  that already carries the target (an answer lost after the change was made) is not patched again
  (that would clear the state its MIG manager wrote since); or, when the label is the
  target already (a `failed` from an earlier run), clears the state and restarts the node's MIG
  manager pod, the re-trigger NVIDIA's source supports;
- switches each node of the batch to the pool's allocation when it has the other one (the
  device plugin <-> NVIDIA's DRA driver; `allocation` changes in place with the extended-resource
  bridge, `plan.pools.generation.allocation_moves_in_place`), never letting both offer the
  node's slices: to DRA, `nvidia.com/gpu.deploy.device-plugin=false` first, then, once the
  node's allocatable holds no GPU device any more, `mig-inference.io/allocation=dra` (the DRA
  kubelet plugin starts there and publishes the slices); back, the allocation label goes first,
  then, once no kubelet-plugin pod runs there and no ResourceSlice of the driver names the
  node, the device plugin's label is `true` again. A node on the target layout is not
  relabelled: only its plugins change;
- waits, until the reconfiguration deadline, for `success` while the label still names the target
  and for the node to advertise the plan's devices (hardware evidence), then uncordons;
- before the next batch, waits (up to the reconfiguration deadline) until the pool's services
  settle on the nodes just done: none of their replicas there still loading, none Pending that a
  free device there could take.

On an `existing` pool, a node on the target gets the pool's label from the Job (Pulumi's patch
applies it after the Job), and nodes that still carry the pool's label but are no longer named by
`pools[i].nodeNames` are released last: cordoned, their GPU pods evicted (they move to the pool's
nodes), the pool label removed, uncordoned. Pulumi deletes their patches (the layout and taint
labels) at the end of the update, once no pod holds their GPUs.

A node `pending` for `PENDING_LIMIT_SECONDS` (the MIG manager's known wedge, NVIDIA/gpu-operator
#2833) gets its MIG manager pod restarted once, said in the output; a second such wait stops it.
A node NotReady with its run ended for as long (NVIDIA/gpu-operator#2415) stops it with the cure
(a new instance; nothing on the node can be restarted). It stops at `failed` (naming #2415 when
the node is NotReady too), a `pending` that does not move after that restart, or a deadline, naming
the node (which stays cordoned, with the way back) and the nodes left untouched. Every API read
fails closed: a read that fails after its retries stops the Job before any change to that node.
"""

from __future__ import annotations

from msgspec import Struct, field

from mig_inference.kube.dra import plugin_follows_mig_manager
from mig_inference.kube.gate import PENDING_LIMIT_SECONDS, devices_value, node_selector
from mig_inference.kube.scripts import load
from mig_inference.names.digest import short_hash
from mig_inference.names.labels import POOL_LABEL
from mig_inference.plan import PoolPlan, StackPlan
from mig_inference.plan.pools.generation import allocation_moves_in_place
from mig_inference.spec import Rollout

MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGED_BY = "mig-inference"
"""With the pool label, what the stack's PodDisruptionBudgets on a pool carry: the budgets the Job
relaxes while it runs (strict, one replica, the rest of the time)."""
ADVERTISE_TIMEOUT_SECONDS = 300
"""How long after `success` the node may take to advertise the planned devices (the MIG manager
restores the device plugin's label last; the plugin then starts and registers with the kubelet).
An assumption: only a real node measures it."""


class RepartitionTarget(Struct, frozen=True):
    """One in-place pool: its nodes, the config they move to, and how many at once."""

    pool: str
    config: str
    selector: str | None
    """Label selector of the pool's nodes (cloud pools)."""
    node_names: tuple[str, ...]
    """The pool's nodes by name (existing clusters, whose pool label may not be set yet)."""
    max_unavailable: int
    max_nodes: int
    capacity: dict[str, int] = field(default_factory=dict)
    """The GPU devices a node advertises once the config is applied."""
    node_names_key: str = ""
    """The stack key naming `node_names` (`pools[i].nodeNames`), for the Job's messages."""
    dra: bool = False
    """The pool's devices are published by NVIDIA's DRA driver: its kubelet plugin is restarted
    on a node once the layout is applied, and the slices are read from ResourceSlices."""
    dra_namespace: str = ""
    """Where the DRA driver's kubelet plugins run."""
    plugin_bounced: bool = False
    """The GPU Operator's MIG manager stops and restarts the DRA kubelet plugin around the change
    (`nvidia.com/gpu.deploy.client`, mig-manager v0.15.0): the Job waits for the new slices
    without restarting the plugin itself."""
    evict_unmanaged: bool = False
    """GPU pods no controller owns are evicted too (deleted for good) instead of stopping the
    Job (`pools[i].evictUnmanagedPods`)."""
    unmanaged_key: str = ""
    """The stack key that allows it, for the Job's refusal."""
    switch_keeps_requests: bool = False
    """A DRA pool whose replicas keep their `nvidia.com/mig-*` requests when a node switches to
    it from the device plugin (the extended-resource bridge on, DynamicMIG off:
    `allocation_moves_in_place`). Without it the Job refuses, before touching any node, to
    switch nodes such replicas run on. (Back to the device plugin the pods decide: one that
    holds a resource claim is refused whatever the stack says now.)"""

    @property
    def fingerprint(self) -> str:
        text = f"{self.pool}|{self.config}|{self.selector}|{' '.join(self.node_names)}"
        # The allocation joins only on DRA pools, so every other pool's Job keeps its name.
        return short_hash(text + ("|dra" if self.dra else ""), 8)

    def env(self, timeout_seconds: int, operator_namespace: str) -> dict[str, str]:
        """The script's environment: the drain and the reconfiguration of a batch each get
        `timeout_seconds`."""
        return {
            "REPARTITION_SELECTOR": self.selector or "",
            "REPARTITION_NODES": " ".join(self.node_names),
            "REPARTITION_NODES_KEY": self.node_names_key,
            "NAMED_POOL": self.pool if self.node_names else "",
            "TARGET_CONFIG": self.config,
            "CAPACITY_PER_NODE": devices_value(self.capacity),
            "MAX_UNAVAILABLE": str(self.max_unavailable),
            "OPERATOR_NAMESPACE": operator_namespace,
            "DRAIN_TIMEOUT_SECONDS": str(timeout_seconds),
            "RECONFIGURE_TIMEOUT_SECONDS": str(timeout_seconds),
            "PENDING_LIMIT_SECONDS": str(PENDING_LIMIT_SECONDS),
            "ADVERTISE_TIMEOUT_SECONDS": str(ADVERTISE_TIMEOUT_SECONDS),
            "UNMANAGED_KEY": self.unmanaged_key,
            "BUDGET_SELECTOR": f"{POOL_LABEL}={self.pool},{MANAGED_BY_LABEL}={MANAGED_BY}",
            **({"EVICT_UNMANAGED": "1"} if self.evict_unmanaged else {}),
            **({"SWITCH_KEEPS_REQUESTS": "1"} if self.switch_keeps_requests else {}),
            # Only on DRA pools: the Job of every other pool stays as it was.
            **({"DRA_POOL": "1", "DRA_NAMESPACE": self.dra_namespace} if self.dra else {}),
            **({"DRA_PLUGIN_BOUNCED": "1"} if self.dra and self.plugin_bounced else {}),
        }

    def budget_seconds(self, timeout_seconds: int) -> int:
        """The whole Job's time: per batch, its drain (twice: a strict budget still refusing at
        the drain's deadline gets one more), its reconfiguration, the wait for the devices to be
        advertised and the services' settling before the next batch."""
        batches = -(-max(self.max_nodes, 1) // self.max_unavailable)
        return batches * (4 * timeout_seconds + ADVERTISE_TIMEOUT_SECONDS)


def repartition_targets(plan: StackPlan) -> list[RepartitionTarget]:
    """Operator-managed pools whose layout changes in place."""
    return [_target(plan, pool) for pool in plan.pools if _in_place(pool)]


def _in_place(pool: PoolPlan) -> bool:
    # GPUs without MIG have nothing to re-partition (and no MIG manager to report success).
    return pool.mig_manager_applies and pool.rollout is Rollout.IN_PLACE


def _target(plan: StackPlan, pool: PoolPlan) -> RepartitionTarget:
    names = pool.spec.node_names
    index = [p.name for p in plan.spec.pools].index(pool.name)
    return RepartitionTarget(
        pool=pool.name,
        config=pool.config_name,
        selector=None if names else node_selector(pool),
        node_names=names,
        max_unavailable=pool.max_unavailable,
        max_nodes=pool.max_nodes,
        capacity=pool.capacity_per_node(),
        node_names_key=f"pools[{index}].nodeNames" if names else "",
        dra=pool.dra,
        dra_namespace=plan.spec.dra.namespace if pool.dra and plan.spec.dra else "",
        plugin_bounced=pool.dra and plugin_follows_mig_manager(plan),
        evict_unmanaged=pool.spec.evict_unmanaged_pods,
        unmanaged_key=f"pools[{index}].evictUnmanagedPods",
        switch_keeps_requests=pool.dra and allocation_moves_in_place(plan.spec, pool.spec),
    )


def repartition_script() -> str:
    return load("repartition.sh")
