"""Pack an inference fleet onto the fewest GPUs of one model.

Phrased over the valid layouts of one GPU (a few dozen), the problem is a small integer program
(see `model`): how many GPUs take each layout, and how many replicas of each workload sit on
each profile. A demand-driven workload states requests per second and the throughput one
replica reaches on each profile; the same program chooses how many replicas of which profiles
serve it, together with the layouts of every GPU: one optimisation, not a choice per workload
followed by a packing.

HiGHS proves the fewest GPUs (or identical nodes, see `uniform`); among the plans with that
count the preferences (see `preferences`) choose the one to build. Every stage stops on work,
never on time, so a plan is a function of its input alone. Baselines use the same model with the
layout set restricted.
"""

from __future__ import annotations

import math
import time
from collections import Counter, defaultdict
from collections.abc import Sequence
from typing import Any

from msgspec import Struct, field
from msgspec.structs import replace

from mig_inference.errors import MigError
from mig_inference.gpus.catalog import GpuModel
from mig_inference.gpus.layout import Layout, is_valid
from mig_inference.gpus.migparted import config_entries, config_name_for, document
from mig_inference.names.digest import short_hash
from mig_inference.solving.model import (
    Problem,
    at_total,
    candidate_layouts,
    fewest_gpus,
    grouped,
    lower_bound,
)
from mig_inference.solving.placement import Assignment, GpuSlot, pad_last_node, realize
from mig_inference.solving.preferences import Preferred, Stage, one_layout, prefer
from mig_inference.solving.uniform import fewest_nodes
from mig_inference.solving.workload import (
    MAX_REPLICAS,
    Workload,
    allowed_profiles,
    check_fleet_size,
    check_unique_names,
)

__all__ = [
    "MAX_REPLICAS",
    "Assignment",
    "DemandMet",
    "GpuSlot",
    "PackPlan",
    "Workload",
    "allowed_profiles",
    "check_fleet_size",
    "check_unique_names",
    "compute_baselines",
    "pack",
]


class DemandMet(Struct, frozen=True):
    """How a plan serves one demand-driven workload."""

    workload: str
    requests_per_second: float
    served: float
    """Summed throughput of its replicas (requests per second)."""
    replicas: dict[str, int]
    """Replicas per profile: one Deployment each, behind one Service."""


class PackPlan(Struct):
    """The packing of a fleet onto GPUs of one model."""

    gpu_model: GpuModel
    gpus: list[GpuSlot]
    assignments: list[Assignment]
    lower_bound: int
    optimal: bool
    """The GPU count is proven minimal."""
    gpus_per_node: int | None
    uniform_nodes: bool = False
    baselines: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0
    """Wall-clock time of the solve (moves with the machine's load)."""
    cpu_seconds: float = 0.0
    """CPU time the process spent on the solve (what the solve costs, however loaded the
    machine; no stage's result depends on either)."""
    refined_optimal: bool = False
    """The preferences among minimal plans (fewest GPUs re-partitioned, fewest distinct
    layouts, least memory beyond need) were each proven best within their work limit."""
    workloads: Sequence[Workload] = ()
    """The fleet packed."""
    kept_gpus: int | None = None
    """With a deployed node layout: GPUs of each node that keep their deployed layout."""
    preferences: tuple[Stage, ...] = ()
    """Each preference stage's value and proven bound (per node with identical nodes)."""

    def demand_met(self) -> list[DemandMet]:
        """Per demand-driven workload: its replicas per profile and the throughput they serve."""
        per_workload: dict[str, Counter[str]] = defaultdict(Counter)
        for a in self.assignments:
            per_workload[a.workload][a.profile] += 1
        met = []
        for workload in self.workloads:
            if not workload.demand_driven:
                continue
            replicas = per_workload[workload.name]
            served = sum(workload.throughput_on(name) * n for name, n in replicas.items())
            met.append(
                DemandMet(workload.name, float(workload.requests_per_second or 0), served,
                          dict(sorted(replicas.items())))
            )  # fmt: skip
        return met

    @property
    def gpu_count(self) -> int:
        """GPUs the fleet needs (spare GPUs on a partly used node not counted)."""
        return sum(1 for g in self.gpus if not g.spare)

    @property
    def node_count(self) -> int:
        return 1 + max((g.node for g in self.gpus), default=-1)

    def distinct_layouts(self) -> list[Layout]:
        return list(dict.fromkeys(g.layout for g in self.gpus))

    def node_layouts(self) -> list[list[Layout]]:
        per_node: list[list[Layout]] = [[] for _ in range(self.node_count)]
        for gpu in self.gpus:
            per_node[gpu.node].append(gpu.layout)
        return per_node

    def node_config_names(self) -> list[str]:
        """The `nvidia.com/mig.config` label value of each node."""
        return [self._config_name(layouts) for layouts in self.node_layouts()]

    def _config_name(self, layouts: Sequence[Layout]) -> str:
        distinct = list(dict.fromkeys(layouts))
        if len(distinct) == 1:
            return config_name_for(self.gpu_model, distinct[0])
        key = "|".join(str(layout) for layout in layouts)
        return "custom-mixed-" + short_hash(key, 10)

    def mig_parted_config(self) -> dict[str, Any]:
        """A mig-parted v1 document with one config per distinct node."""
        configs: dict[str, list[dict[str, Any]]] = {}
        for layouts in self.node_layouts():
            configs[self._config_name(layouts)] = config_entries(self.gpu_model, list(layouts))
        return document(configs)

    def capacity(self) -> Counter[str]:
        """Slices per profile across the plan."""
        total: Counter[str] = Counter()
        for gpu in self.gpus:
            total.update(gpu.layout.as_dict())
        return total

    def stranded_mib(self) -> int:
        """Memory on the plan's GPUs not inside a slice assigned to a replica."""
        assigned = sum(self.gpu_model.profile(a.profile).memory_mib for a in self.assignments)
        return self.gpu_count * self.gpu_model.full_profile.memory_mib - assigned


def pack(
    gpu: GpuModel,
    workloads: Sequence[Workload],
    *,
    gpus_per_node: int | None = None,
    uniform_nodes: bool = False,
    single_profile: bool = False,
    baselines: bool = True,
    deployed: Sequence[Layout] = (),
) -> PackPlan:
    """The fewest GPUs of `gpu` that hold every replica, with valid layouts.

    `gpus_per_node` groups GPUs into nodes (the last node's spare GPUs get a layout too);
    `uniform_nodes` makes every node identical, as a node pool with one MIG label needs;
    `single_profile` serves every workload from one profile (one Deployment, one resource);
    `deployed` is the layout of each GPU of a deployed node (identical nodes only): among the
    plans with the fewest nodes, the one that re-partitions the fewest of its GPUs wins.
    """
    if not gpu.mig_capable:
        raise MigError(
            f"{gpu.name} has no MIG: the planner packs MIG slices; share whole GPUs with a pool's "
            "`sharing` instead",
            value=gpu.name,
        )
    started, cpu_started = time.perf_counter(), time.process_time()
    if not workloads:
        raise MigError("no workloads to place")
    if gpus_per_node is not None and gpus_per_node <= 0:
        raise MigError(f"gpus per node must be > 0, got {gpus_per_node}")
    if uniform_nodes and not gpus_per_node:
        raise MigError("uniform nodes need gpus per node")
    if deployed and not uniform_nodes:
        raise MigError("a deployed node layout applies to identical nodes only")
    demand_driven = [w.name for w in workloads if w.demand_driven]
    check_unique_names(workloads)
    check_fleet_size(workloads)
    allowed = []
    for index, workload in enumerate(workloads):
        try:
            allowed.append(allowed_profiles(gpu, workload))
        except MigError as error:
            raise error.at(f"workloads[{index}] ({workload.name})") from None
    layouts = candidate_layouts(gpu, [p for a in allowed for p in a])
    # A deployed layout is a candidate too (kept, its GPUs need no re-partitioning), even when
    # no longer maximal for the profiles asked now.
    extra = dict.fromkeys(deployed)
    layouts += [layout for layout in extra if layout not in layouts and is_valid(gpu, layout)]
    problem = Problem(
        gpu, workloads, allowed, layouts, single_profile, whole_replica_compute=not uniform_nodes
    )
    lower = lower_bound(problem)
    if uniform_nodes:
        assert gpus_per_node is not None
        plan = _pack_uniform(problem, gpus_per_node, lower, deployed)
    else:
        plan = _pack_free(problem, gpus_per_node, lower)
    if baselines and not demand_driven:
        # The baselines serve replica counts; a demand has none until the plan chose them.
        plan.baselines = compute_baselines(problem, gpus_per_node if uniform_nodes else None)
    plan.seconds = time.perf_counter() - started
    plan.cpu_seconds = time.process_time() - cpu_started
    return plan


def _pack_free(problem: Problem, gpus_per_node: int | None, lower: int) -> PackPlan:
    """The fewest GPUs, then the preferences among plans with that many; solved over groups
    of workloads (see `model.grouped`), so the solver's work does not grow with the number of
    workloads."""
    merged, members = grouped(problem)
    model = merged.model()
    at_lower = at_total(model, lower)
    # One layout holding the fleet on its lower bound of GPUs proves that count as well: then
    # no plan at the bound is searched for (on ParvaGPU's SLO5 fleet with MPS, about 40 ms of CPU).
    single = one_layout(merged, model, at_lower, lower, fleet=True)
    if isinstance(single, Preferred):
        chosen, proven = single, True
    else:
        fewest = fewest_gpus(merged, lower, model)
        if fewest.gpus == lower:
            chosen = prefer(merged, model, at_lower, lower, fewest.values, at_least=single)
        else:
            at_fewest = at_total(model, fewest.gpus)
            chosen = prefer(merged, model, at_fewest, fewest.gpus, fewest.values)
        proven = fewest.proven
    slots, assignments = realize(
        problem, model, chosen.values, gpus_per_node=gpus_per_node, members=members
    )
    return PackPlan(
        gpu_model=problem.gpu,
        gpus=pad_last_node(problem.gpu, slots, gpus_per_node),
        assignments=assignments,
        lower_bound=lower,
        optimal=proven,
        gpus_per_node=gpus_per_node,
        refined_optimal=chosen.proven,
        workloads=tuple(problem.workloads),
        preferences=chosen.stages,
    )


def _pack_uniform(
    problem: Problem, gpus_per_node: int, lower: int, deployed: Sequence[Layout]
) -> PackPlan:
    """Fewest identical nodes, each with per-node layout counts c[L] summing to
    `gpus_per_node`, whose copies hold the fleet; then the preferences among those.

    Solved over groups of workloads (see `model.grouped`): the solver's work does not grow with
    the number of workloads, only the final split of each group's replicas does. The search
    starts from the fewest GPUs without the identical-node rule, proven first: no fewer nodes
    can hold them."""
    merged, members = grouped(problem)
    free = fewest_gpus(merged)
    low = max(math.ceil(lower / gpus_per_node), math.ceil(free.bound / gpus_per_node))
    search = fewest_nodes(merged, gpus_per_node, low)
    model = search.model
    keep = Counter(deployed) if len(deployed) == gpus_per_node else None
    chosen = prefer(
        merged,
        model,
        at_total(model, gpus_per_node, search.nodes),
        gpus_per_node,
        search.values,
        keep,
    )
    slots, assignments = realize(
        problem, model, chosen.values, nodes=search.nodes, members=members, deployed=deployed
    )
    return PackPlan(
        gpu_model=problem.gpu,
        gpus=slots,
        assignments=assignments,
        lower_bound=lower,
        optimal=search.proven,
        gpus_per_node=gpus_per_node,
        uniform_nodes=True,
        refined_optimal=chosen.proven,
        workloads=tuple(problem.workloads),
        kept_gpus=chosen.kept,
        preferences=chosen.stages,
    )


def compute_baselines(problem: Problem, uniform_gpus_per_node: int | None = None) -> dict[str, int]:
    """GPUs the same model needs with (a) one replica per whole GPU, no MIG, and (b) only
    homogeneous `all-<profile>` layouts, one profile per GPU, as the seed documents do.

    With `uniform_gpus_per_node` the baselines obey the same rule as the plan they are compared
    with: identical nodes of that many GPUs, counted in whole nodes. Whole GPUs are one layout,
    so (a) is rounded up to whole nodes; (b) is the fewest identical nodes whose GPUs each take
    one `all-<profile>` layout. Should no such node hold the fleet (it needs more profiles than
    a node has GPUs), (b) is the free count rounded up to whole nodes.

    Counts only, so solved over groups of workloads with identical allowed profiles."""
    problem, _ = grouped(problem)
    gpu = problem.gpu
    full = gpu.full_profile
    whole = replace(
        problem,
        allowed=[[full] for _ in problem.workloads],
        layouts=[Layout.of(gpu, {full.name: 1})],
        single_profile=False,
    )
    one_per_gpu = fewest_gpus(whole).gpus
    profiles = dict.fromkeys(p for a in problem.allowed for p in a)
    homogeneous_layouts = [Layout.of(gpu, {p.name: p.max_instances}) for p in profiles]
    homogeneous_problem = replace(problem, layouts=homogeneous_layouts)
    per_node = uniform_gpus_per_node
    if per_node is None:
        homogeneous = fewest_gpus(homogeneous_problem).gpus
        return {"one_per_gpu": one_per_gpu, "homogeneous": homogeneous}
    try:
        search = fewest_nodes(
            homogeneous_problem, per_node, math.ceil(lower_bound(homogeneous_problem) / per_node)
        )
        homogeneous = search.nodes * per_node
    except MigError:
        free = fewest_gpus(homogeneous_problem).gpus
        homogeneous = math.ceil(free / per_node) * per_node
    return {
        "one_per_gpu": math.ceil(one_per_gpu / per_node) * per_node,
        "homogeneous": homogeneous,
    }
