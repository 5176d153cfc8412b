"""Pack an inference fleet onto the fewest GPUs of one model.

Phrased over the valid layouts of one GPU (a few dozen), the problem is a small integer program:

    x[L]    GPUs that use layout L           (integer)
    y[w,p]  replicas of workload w on slices of profile p   (integer)

    sum_p y[w,p] = replicas[w]                      every replica placed once, or
    sum_p thr[w,p] * y[w,p] >= demand[w]            a demand met (requests/s per slice)
    sum_w y[w,p] <= sum_L count(L,p) * x[L]         no profile over-subscribed

A demand-driven workload states requests per second and the throughput one replica reaches on
each profile; the same program chooses how many replicas of which profiles serve it, together
with the layouts of every GPU: one optimisation, not a choice per workload followed by a packing.

HiGHS solves it lexicographically: (1) fewest GPUs, proven optimal; (2) among those, fewest
distinct layouts (fewer mig-parted configs); (3) then the least memory handed out beyond what
replicas need. Baselines use the same model with the layout set restricted.
"""

from __future__ import annotations

import math
import time
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from mig_inference.catalog import GpuModel, Profile
from mig_inference.digest import short_hash
from mig_inference.errors import MigError
from mig_inference.layout import Layout, Placement, maximal_layouts, place, valid_layouts
from mig_inference.migparted import config_entries, config_name_for, document
from mig_inference.milp import Milp

SOLVER_SECONDS = 30.0
"""Time limit for proving the fewest GPUs (a plan that hits it says it is not proven)."""
REFINE_SECONDS = 0.4
"""Time budget for each preference stage (fewest layouts, least memory beyond need); the best
plan found in that time is kept and `refined_optimal` says whether it was proven best."""


@dataclass(frozen=True)
class Workload:
    """Replicas of one model, each needing one slice."""

    name: str
    """Workload name, unique in the fleet."""
    replicas: int
    """Replicas to place (one slice each)."""
    profile: str | None = None
    """A fixed slice size; a larger profile containing it may serve unless `exact`."""
    memory_mib: float | None = None
    """Memory need of one replica; any profile whose usable memory holds it may serve."""
    exact: bool = False
    """With `profile`: only that profile, never a larger one."""
    requests_per_second: float | None = None
    """Demand to meet instead of a replica count (`replicas` is then 0)."""
    throughput: tuple[tuple[str, float], ...] = ()
    """Requests per second one replica serves on each profile it may use (demand-driven)."""

    @property
    def demand_driven(self) -> bool:
        return self.requests_per_second is not None

    def throughput_on(self, profile: str) -> float:
        return dict(self.throughput).get(profile, 0.0)

    def __post_init__(self) -> None:
        if not self.name:
            raise MigError("a workload needs a name")
        if self.demand_driven:
            self._check_demand()
            return
        if isinstance(self.replicas, bool) or not isinstance(self.replicas, int):
            raise MigError(
                f"replicas must be a whole number > 0, got {self.replicas!r}", "replicas"
            )
        if self.replicas <= 0:
            raise MigError(f"replicas must be > 0, got {self.replicas}", "replicas")
        if (self.profile is None) == (self.memory_mib is None):
            raise MigError("give exactly one of profile or memory_gib", "profile")
        if self.memory_mib is not None and not self.memory_mib > 0:
            raise MigError(f"memory must be > 0, got {self.memory_mib!r}", "memory_gib")
        if self.throughput:
            raise MigError("throughput only applies with requests_per_second", "throughput")

    def _check_demand(self) -> None:
        demand = self.requests_per_second
        if isinstance(demand, bool) or not isinstance(demand, int | float) or not demand > 0:
            raise MigError(f"must be a number > 0, got {demand!r}", "requests_per_second")
        if self.replicas:
            raise MigError(
                "give replicas or requests_per_second, not both: the planner chooses the replicas "
                "that meet a demand",
                "replicas",
            )
        if self.profile is not None or self.memory_mib is not None:
            raise MigError(
                "a demand-driven workload runs on the profiles of its throughput table; give no "
                "profile or memory_gib",
                "profile" if self.profile is not None else "memory_gib",
            )
        serving = [(name, rate) for name, rate in self.throughput if rate > 0]
        if not serving:
            raise MigError(
                "no profile serves this workload within its latency target: the throughput table "
                "is empty (or every rate is 0)",
                "throughput",
            )


def allowed_profiles(gpu: GpuModel, workload: Workload) -> list[Profile]:
    """Profiles that may serve one replica of `workload`, smallest first."""
    if workload.demand_driven:
        serving = []
        for name, rate in workload.throughput:
            try:
                profile = gpu.profile(name)
            except MigError as error:
                raise MigError(error.message, f"throughput.{name}") from None
            if rate > 0:
                serving.append(profile)
        return sorted(serving, key=lambda p: (p.memory_mib, p.memory, p.compute))
    plain = [p for p in gpu.profiles if not p.media_extensions]
    if workload.profile is not None:
        try:
            wanted = gpu.profile(workload.profile)
        except MigError as error:
            raise MigError(error.message, "profile") from None
        if workload.exact or wanted.media_extensions:
            return [wanted]
        return sorted(
            [wanted, *(p for p in plain if p != wanted and p.contains(wanted))],
            key=lambda p: (p.memory_mib, p.memory, p.compute),
        )
    assert workload.memory_mib is not None
    fitting = [p for p in plain if p.memory_mib >= workload.memory_mib]
    if not fitting:
        largest = max(plain, key=lambda p: p.memory_mib)
        raise MigError(
            f"needs {workload.memory_mib:,.0f} MiB, more than any MIG slice of {gpu.name} "
            f"(the largest, {largest.name}, has {largest.memory_mib:,} MiB)",
            "memory_gib",
        )
    return sorted(fitting, key=lambda p: (p.memory_mib, p.memory, p.compute))


def _need_mib(workload: Workload, gpu: GpuModel) -> float:
    if workload.memory_mib is not None:
        return workload.memory_mib
    if workload.demand_driven:
        return float(min(allowed_profiles(gpu, workload), key=lambda p: p.memory_mib).memory_mib)
    assert workload.profile is not None
    return float(gpu.profile(workload.profile).memory_mib)


@dataclass(frozen=True)
class GpuSlot:
    """One GPU of the plan."""

    index: int
    node: int
    layout: Layout
    placements: tuple[Placement, ...]
    spare: bool = False
    """A GPU the plan does not need, on a node that has it anyway; it gets a layout too."""


@dataclass(frozen=True)
class Assignment:
    workload: str
    gpu: int
    profile: str
    start: int


@dataclass(frozen=True)
class DemandMet:
    """How a plan serves one demand-driven workload."""

    workload: str
    requests_per_second: float
    served: float
    """Summed throughput of its replicas (requests per second)."""
    replicas: dict[str, int]
    """Replicas per profile: one Deployment each, behind one Service."""


@dataclass
class PackPlan:
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
    refined_optimal: bool = False
    """The fewest distinct layouts (then least memory beyond need) among minimal plans was
    proven within the time budget."""
    workloads: Sequence[Workload] = ()
    """The fleet packed."""

    def demand_met(self) -> list[DemandMet]:
        """Per demand-driven workload: its replicas per profile and the throughput they serve."""
        met = []
        for workload in self.workloads:
            if not workload.demand_driven:
                continue
            replicas = Counter(a.profile for a in self.assignments if a.workload == workload.name)
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


def _candidate_layouts(gpu: GpuModel, profiles: Sequence[Profile]) -> list[Layout]:
    names = tuple(
        sorted({p.name for p in profiles}, key=lambda n: gpu.profiles.index(gpu.profile(n)))
    )
    return maximal_layouts(valid_layouts(gpu, names))


@dataclass
class _Model:
    milp: Milp
    x: dict[Layout, int]
    y: dict[tuple[int, str], int]


@dataclass(frozen=True)
class _Problem:
    """One packing problem: the GPU model, the fleet, the profiles each workload may use, and
    the layouts a GPU may take."""

    gpu: GpuModel
    workloads: Sequence[Workload]
    allowed: Sequence[Sequence[Profile]]
    layouts: Sequence[Layout]
    single_profile: bool = False

    def model(self) -> _Model:
        return _build(self)


def _build(problem: _Problem) -> _Model:
    workloads, allowed, single_profile = problem.workloads, problem.allowed, problem.single_profile
    milp = Milp()
    x = {layout: milp.variable(cost=1.0) for layout in problem.layouts}
    y: dict[tuple[int, str], int] = {}
    for w, workload in enumerate(workloads):
        if workload.demand_driven:
            _demand(milp, y, w, workload, allowed[w])
            continue
        for profile in allowed[w]:
            y[(w, profile.name)] = milp.variable(upper=workload.replicas)
        milp.constrain(
            {y[(w, p.name)]: 1.0 for p in allowed[w]},
            lower=workload.replicas,
            upper=workload.replicas,
        )
        if single_profile and len(allowed[w]) > 1:
            # One Deployment requests one resource: pick exactly one profile per workload.
            chosen = {p.name: milp.variable(upper=1.0) for p in allowed[w]}
            milp.constrain(dict.fromkeys(chosen.values(), 1.0), lower=1.0, upper=1.0)
            for name, pick in chosen.items():
                milp.constrain({y[(w, name)]: 1.0, pick: -float(workload.replicas)}, upper=0.0)
    by_profile: dict[str, list[int]] = defaultdict(list)
    for (_, name), var in y.items():
        by_profile[name].append(var)
    for name, demand in by_profile.items():
        terms: dict[int, float] = dict.fromkeys(demand, 1.0)
        for layout, var in x.items():
            if layout.count(name):
                terms[var] = -float(layout.count(name))
        milp.constrain(terms, upper=0.0)
    return _Model(milp, x, y)


def _demand(
    milp: Milp,
    y: dict[tuple[int, str], int],
    w: int,
    workload: Workload,
    allowed: Sequence[Profile],
) -> None:
    """Replicas of any mix of `allowed` profiles whose summed throughput meets the demand (a
    Deployment per profile, so no single-profile rule)."""
    demand = float(workload.requests_per_second or 0.0)
    for profile in allowed:
        rate = workload.throughput_on(profile.name)
        y[(w, profile.name)] = milp.variable(upper=math.ceil(demand / rate))
    milp.constrain({y[(w, p.name)]: workload.throughput_on(p.name) for p in allowed}, lower=demand)


def replicas_lower_bound(workload: Workload, allowed: Sequence[Profile], per: str) -> float:
    """The fewest memory (`per="memory"`) or compute slices the workload's replicas take, as a
    fraction: fixed replicas on their smallest profile, or the demand at the best rate per
    slice."""

    def size(p: Profile) -> int:
        return p.memory if per == "memory" else p.compute

    if not workload.demand_driven:
        return float(workload.replicas * min(size(p) for p in allowed))
    demand = float(workload.requests_per_second or 0.0)
    return min(demand / workload.throughput_on(p.name) * size(p) for p in allowed)


def _min_gpus(problem: _Problem) -> tuple[int, bool, list[float], _Model]:
    model = problem.model()
    solution = model.milp.solve(integral_objective=True, time_limit=SOLVER_SECONDS)
    if not solution.values:
        raise MigError("the solver found no plan within its time limit")
    return round(solution.objective), solution.optimal, solution.values, model


def _lower_bound(problem: _Problem) -> int:
    """Ceiling of the LP relaxation, and of the memory-slot and compute counting bounds."""
    gpu, workloads, allowed = problem.gpu, problem.workloads, problem.allowed
    relaxed = problem.model().milp.solve(relax=True)
    slots = sum(
        replicas_lower_bound(w, a, "memory") for w, a in zip(workloads, allowed, strict=True)
    )
    compute = sum(
        replicas_lower_bound(w, a, "compute") for w, a in zip(workloads, allowed, strict=True)
    )
    counting = max(
        math.ceil(slots / gpu.memory_slices - 1e-9), math.ceil(compute / gpu.compute_slices - 1e-9)
    )
    return max(counting, math.ceil(relaxed.objective - 1e-6))


def _prefer_small_slices(model: _Model, problem: _Problem) -> None:
    """Cost each replica's memory beyond its need (GiB); a compute slice weighs 0.01 GiB, so
    among slices of equal memory the one with less compute wins."""
    for (w, name), var in model.y.items():
        profile = problem.gpu.profile(name)
        excess = profile.memory_mib - _need_mib(problem.workloads[w], problem.gpu)
        model.milp.cost[var] = max(excess, 0.0) / 1024 + 0.01 * profile.compute


def _refine(problem: _Problem, gpus: int, start: Sequence[float]) -> tuple[list[float], bool]:
    """Among plans with `gpus` GPUs: fewest distinct layouts, then least memory beyond need.

    Starts from the stage-one plan `start`, so it never returns anything worse."""
    model = problem.model()
    milp = model.milp
    for var in model.x.values():
        milp.cost[var] = 0.0
    milp.constrain(dict.fromkeys(model.x.values(), 1.0), lower=gpus, upper=gpus)
    used = {}
    for layout, var in model.x.items():
        used[layout] = milp.variable(cost=1.0, upper=1.0)
        milp.constrain({var: 1.0, used[layout]: -float(gpus)}, upper=0.0)
    warm = list(start) + [1.0 if start[model.x[layout]] > 0.5 else 0.0 for layout in used]
    stage_two = milp.solve(integral_objective=True, time_limit=REFINE_SECONDS, start=warm)
    if not stage_two.values:
        return list(start), False
    distinct = round(stage_two.objective)
    for var in used.values():
        milp.cost[var] = 0.0
    milp.constrain({var: 1.0 for var in used.values()}, upper=distinct)
    _prefer_small_slices(model, problem)
    stage_three = milp.solve(time_limit=REFINE_SECONDS, rel_gap=1e-4, start=stage_two.values)
    best = stage_three.values or stage_two.values
    proven = stage_two.optimal and stage_three.optimal
    return list(best), proven


def _realize(
    problem: _Problem, model: _Model, values: Sequence[float], gpus_per_node: int | None
) -> tuple[list[GpuSlot], list[Assignment]]:
    gpu, workloads = problem.gpu, problem.workloads
    counts = {layout: round(values[var]) for layout, var in model.x.items()}
    ordered = [layout for layout, count in counts.items() for _ in range(count)]
    per_node = gpus_per_node or len(ordered) or 1
    slots = [
        GpuSlot(i, i // per_node, layout, tuple(place(gpu, layout)))
        for i, layout in enumerate(ordered)
    ]
    # Free slices per profile, ordered so that consecutive picks land on different GPUs.
    free: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for slot in slots:
        for rank, placement in enumerate(slot.placements):
            free[placement.profile].append((rank, slot.index))
    queues = {name: sorted(items) for name, items in free.items()}
    starts = {
        (slot.index, rank): pl.start for slot in slots for rank, pl in enumerate(slot.placements)
    }
    assignments = []
    for (w, name), var in model.y.items():
        for _ in range(round(values[var])):
            rank, index = queues[name].pop(0)
            assignments.append(Assignment(workloads[w].name, index, name, starts[(index, rank)]))
    return slots, assignments


def _pad_last_node(gpu: GpuModel, slots: list[GpuSlot], gpus_per_node: int | None) -> list[GpuSlot]:
    """A node has all its GPUs: spare GPUs on the last node repeat its most common layout."""
    if not gpus_per_node or not slots or len(slots) % gpus_per_node == 0:
        return slots
    last_node = slots[-1].node
    common = Counter(s.layout for s in slots if s.node == last_node).most_common(1)[0][0]
    padded = list(slots)
    while len(padded) % gpus_per_node:
        padded.append(
            GpuSlot(len(padded), last_node, common, tuple(place(gpu, common)), spare=True)
        )
    return padded


def check_unique_names(workloads: Sequence[Workload]) -> None:
    seen: set[str] = set()
    for index, workload in enumerate(workloads):
        if workload.name in seen:
            raise MigError(f"duplicate workload name {workload.name!r}", f"workloads[{index}].name")
        seen.add(workload.name)


def pack(
    gpu: GpuModel,
    workloads: Sequence[Workload],
    *,
    gpus_per_node: int | None = None,
    uniform_nodes: bool = False,
    single_profile: bool = False,
    baselines: bool = True,
) -> PackPlan:
    """The fewest GPUs of `gpu` that hold every replica, with valid layouts.

    `gpus_per_node` groups GPUs into nodes (the last node's spare GPUs get a layout too);
    `uniform_nodes` makes every node identical, as a node pool with one MIG label needs;
    `single_profile` serves every workload from one profile (one Deployment, one resource).
    """
    if not gpu.mig_capable:
        raise MigError(
            f"{gpu.name} has no MIG: the planner packs MIG slices; share whole GPUs with a pool's "
            "`sharing` instead",
            value=gpu.name,
        )
    started = time.perf_counter()
    if not workloads:
        raise MigError("no workloads to place")
    if gpus_per_node is not None and gpus_per_node <= 0:
        raise MigError(f"gpus per node must be > 0, got {gpus_per_node}")
    if uniform_nodes and not gpus_per_node:
        raise MigError("uniform nodes need gpus per node")
    demand_driven = [w.name for w in workloads if w.demand_driven]
    if demand_driven and uniform_nodes:
        raise MigError(
            f"demand-driven workloads ({', '.join(demand_driven)}) are planned without uniform "
            "nodes so far; pack them freely, or give replicas per profile"
        )
    check_unique_names(workloads)
    allowed = []
    for index, workload in enumerate(workloads):
        try:
            allowed.append(allowed_profiles(gpu, workload))
        except MigError as error:
            raise error.at(f"workloads[{index}] ({workload.name})") from None
    layouts = _candidate_layouts(gpu, [p for a in allowed for p in a])
    problem = _Problem(gpu, workloads, allowed, layouts, single_profile)
    lower = _lower_bound(problem)
    refined_optimal = False
    if uniform_nodes:
        assert gpus_per_node is not None
        slots, assignments, optimal = _pack_uniform(problem, gpus_per_node, lower)
    else:
        gpus, optimal, values, model = _min_gpus(problem)
        refined, refined_optimal = _refine(problem, gpus, values)
        slots, assignments = _realize(problem, model, refined, gpus_per_node)
        slots = _pad_last_node(gpu, slots, gpus_per_node)
    plan = PackPlan(
        gpu_model=gpu,
        gpus=slots,
        assignments=assignments,
        lower_bound=lower,
        optimal=optimal,
        gpus_per_node=gpus_per_node,
        uniform_nodes=uniform_nodes,
        refined_optimal=refined_optimal,
        workloads=tuple(workloads),
    )
    if baselines and not demand_driven:
        # The baselines serve replica counts; a demand has none until the plan chose them.
        plan.baselines = compute_baselines(problem)
    plan.seconds = time.perf_counter() - started
    return plan


def _pack_uniform(
    problem: _Problem, gpus_per_node: int, lower: int
) -> tuple[list[GpuSlot], list[Assignment], bool]:
    """Fewest identical nodes: for N = ceil(lower / gpus_per_node), N+1, ... find per-node
    layout counts c[L] (summing to gpus_per_node) whose N copies hold the fleet."""
    gpu = problem.gpu
    total = sum(w.replicas for w in problem.workloads)
    nodes = max(1, math.ceil(lower / gpus_per_node))
    proven = True
    while nodes <= total:
        model = problem.model()
        milp = model.milp
        # Reinterpret x[L] as GPUs per node: capacity rows scale by the node count.
        for row_index, (terms, lo, hi) in enumerate(milp.rows):
            scaled = {v: c * nodes if v in model.x.values() else c for v, c in terms.items()}
            milp.rows[row_index] = (scaled, lo, hi)
        for var in model.x.values():
            milp.cost[var] = 0.0
        _prefer_small_slices(model, problem)
        # Fewest distinct layouts first: each layout used costs more than any memory excess.
        layout_weight = 1.0 + sum(
            w.replicas * max(p.memory_mib for p in a) / 1024
            for w, a in zip(problem.workloads, problem.allowed, strict=True)
        )
        for var in model.x.values():
            used = milp.variable(cost=layout_weight, upper=1.0)
            milp.constrain({var: 1.0, used: -float(gpus_per_node)}, upper=0.0)
        milp.constrain(
            dict.fromkeys(model.x.values(), 1.0), lower=gpus_per_node, upper=gpus_per_node
        )
        solution = milp.solve(time_limit=SOLVER_SECONDS, rel_gap=1e-4)
        if solution.values:
            per_node = [
                layout
                for layout, var in model.x.items()
                for _ in range(round(solution.values[var]))
            ]
            ordered_x = {layout: per_node.count(layout) * nodes for layout in model.x}
            values = list(solution.values)
            for layout, var in model.x.items():
                values[var] = ordered_x[layout]
            slots, assignments = _realize(problem, model, values, None)
            # Lay the GPUs out node by node, each node repeating the same per-GPU sequence.
            relaid = [
                GpuSlot(n * gpus_per_node + i, n, layout, tuple(place(gpu, layout)))
                for n in range(nodes)
                for i, layout in enumerate(per_node)
            ]
            by_layout: dict[Layout, list[int]] = defaultdict(list)
            for slot in relaid:
                by_layout[slot.layout].append(slot.index)
            old_to_new: dict[int, int] = {}
            for slot in slots:
                old_to_new[slot.index] = by_layout[slot.layout].pop(0)
            moved = [
                Assignment(a.workload, old_to_new[a.gpu], a.profile, a.start) for a in assignments
            ]
            return relaid, moved, proven
        if not solution.optimal:
            proven = False  # a time-out, not a proof of infeasibility
        nodes += 1
    raise MigError("no uniform node layout holds the fleet")


def compute_baselines(problem: _Problem) -> dict[str, int]:
    """GPUs the same model needs with (a) one replica per whole GPU, no MIG, and (b) only
    homogeneous `all-<profile>` layouts, one profile per GPU, as the seed documents do."""
    gpu = problem.gpu
    full = gpu.full_profile
    whole = replace(
        problem,
        allowed=[[full] for _ in problem.workloads],
        layouts=[Layout.of(gpu, {full.name: 1})],
        single_profile=False,
    )
    one_per_gpu, _, _, _ = _min_gpus(whole)
    profiles = {p for a in problem.allowed for p in a}
    homogeneous_layouts = [Layout.of(gpu, {p.name: p.max_instances}) for p in profiles]
    homogeneous, _, _, _ = _min_gpus(replace(problem, layouts=homogeneous_layouts))
    return {"one_per_gpu": one_per_gpu, "homogeneous": homogeneous}
