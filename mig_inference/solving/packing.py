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

from mig_inference.errors import MigError
from mig_inference.gpus.catalog import GpuModel, Profile
from mig_inference.gpus.layout import Layout, Placement, maximal_layouts, place, valid_layouts
from mig_inference.gpus.migparted import config_entries, config_name_for, document
from mig_inference.names.digest import short_hash
from mig_inference.solving.milp import Milp

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

    @property
    def fewest_replicas(self) -> int:
        """Its replica count, or the fewest replicas that can serve its demand."""
        if not self.demand_driven:
            return self.replicas
        fastest = max((rate for _, rate in self.throughput), default=0.0)
        return math.ceil(float(self.requests_per_second or 0) / fastest) if fastest > 0 else 0

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
        if (
            isinstance(demand, bool)
            or not isinstance(demand, int | float)
            or not math.isfinite(demand)
            or not demand > 0
        ):
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
    plain = [p for p in gpu.profiles if not p.variant]
    if workload.profile is not None:
        try:
            wanted = gpu.profile(workload.profile)
        except MigError as error:
            raise MigError(error.message, "profile") from None
        if workload.exact or wanted.variant:
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


MAX_REPLICAS = 1_000_000
"""Most replicas one plan places. A plan lists every GPU and every replica's slice (`pack --json`
peaks at about 2.5 KiB per replica: some 2.5 GB at this limit), so the work is bounded here; a
Kubernetes cluster runs at most 150,000 pods, far below it."""


def check_fleet_size(workloads: Sequence[Workload]) -> None:
    """Refuse a fleet of more than MAX_REPLICAS replicas, naming the workload that alone
    exceeds it, else the total."""
    limit = f"more than the planner's limit of {MAX_REPLICAS:,} (a plan lists every replica)"
    for index, workload in enumerate(workloads):
        if workload.fewest_replicas > MAX_REPLICAS:
            key = "requests_per_second" if workload.demand_driven else "replicas"
            raise MigError(
                f"{workload.fewest_replicas:,} replicas, {limit}",
                f"workloads[{index}] ({workload.name}).{key}",
                value=workload.fewest_replicas,
            )
    total = sum(w.fewest_replicas for w in workloads)
    if total > MAX_REPLICAS:
        raise MigError(f"{total:,} replicas in total, {limit}", "workloads", value=total)


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
    check_unique_names(workloads)
    check_fleet_size(workloads)
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
        slots, assignments, optimal, refined_optimal = _pack_uniform(problem, gpus_per_node, lower)
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
        plan.baselines = compute_baselines(problem, gpus_per_node if uniform_nodes else None)
    plan.seconds = time.perf_counter() - started
    return plan


def _pack_uniform(
    problem: _Problem, gpus_per_node: int, lower: int
) -> tuple[list[GpuSlot], list[Assignment], bool, bool]:
    """Fewest identical nodes, each with per-node layout counts c[L] summing to
    `gpus_per_node`, whose copies hold the fleet; then, among those, fewest distinct layouts
    and least memory beyond need. Returns the GPUs, the assignments, whether the node count is
    proven minimal, and whether the preferences were proven best.

    Solved over groups of workloads (see `_grouped`): the solver's work does not grow with the
    number of workloads, only the final split of each group's replicas does."""
    grouped, members = _grouped(problem)
    search = _fewest_uniform_nodes(grouped, gpus_per_node, lower)
    values, refined = _refine_uniform(grouped, search, gpus_per_node)
    slots, assignments = _realize_uniform(problem, search.model, values, search.nodes, members)
    return slots, assignments, search.proven, refined


def _grouped(problem: _Problem) -> tuple[_Problem, list[list[int]]]:
    """The same problem with workloads of identical allowed profiles merged into one (their
    replicas summed), and the workload indexes of each group.

    Exact for replica-count workloads: which slices a plan offers is all that decides whether
    replicas fit, and the memory beyond need of a group's replicas is the memory of the slices
    they take minus the (fixed) summed need, however they are split among the group. Not for a
    single profile per workload, nor demand-driven workloads: those stay one per group."""
    workloads = problem.workloads
    if problem.single_profile or any(w.demand_driven for w in workloads):
        return problem, [[w] for w in range(len(workloads))]
    groups: dict[tuple[str, ...], list[int]] = {}
    for w, profiles in enumerate(problem.allowed):
        groups.setdefault(tuple(p.name for p in profiles), []).append(w)
    members = list(groups.values())
    merged = [
        replace(workloads[group[0]], replicas=sum(workloads[w].replicas for w in group))
        for group in members
    ]
    allowed = [problem.allowed[group[0]] for group in members]
    return replace(problem, workloads=merged, allowed=allowed), members


@dataclass(frozen=True)
class _UniformSearch:
    """The outcome of the node-count search: the fewest identical nodes found, a plan for them
    (values of `model`'s variables, x[L] read as GPUs per node), and whether every smaller
    count was proven not to hold the fleet."""

    model: _Model
    nodes: int
    values: list[float]
    proven: bool
    probes: int
    """Node counts tried (each one to three HiGHS solves)."""


def _uniform_milp(model: _Model, nodes: int, gpus_per_node: int) -> Milp:
    """`model` with x[L] read as GPUs per node of `nodes` identical nodes: x[L] sums to
    `gpus_per_node` and every capacity row scales by `nodes`. No objective (a feasibility
    question)."""
    per_node = set(model.x.values())
    base = model.milp
    milp = Milp(
        cost=[0.0] * len(base.cost),
        lower=list(base.lower),
        upper=list(base.upper),
        integer=list(base.integer),
        rows=[
            ({v: c * nodes if v in per_node else c for v, c in terms.items()}, lo, hi)
            for terms, lo, hi in base.rows
        ],
    )
    milp.constrain(dict.fromkeys(per_node, 1.0), lower=gpus_per_node, upper=gpus_per_node)
    return milp


def _probe_uniform(
    model: _Model, nodes: int, gpus_per_node: int
) -> tuple[bool | None, list[float]]:
    """Do `nodes` identical nodes hold the fleet? True with an integral plan, False when HiGHS
    proved they cannot, None when it could not tell within its time limit.

    First with replica counts y continuous: a relaxation, so its infeasibility is a proof, and
    fast (only the per-node layout counts branch). A relaxed plan's layout counts are then fixed
    and the replicas solved as integers; for replica-count workloads that is a transportation
    problem with integral capacities, which an integral plan always satisfies, so this settles at
    once. Only if it fails is the full integer program solved."""
    milp = _uniform_milp(model, nodes, gpus_per_node)
    relaxed = replace(milp, integer=list(milp.integer))
    for var in model.y.values():
        relaxed.integer[var] = False
    first = relaxed.solve(time_limit=SOLVER_SECONDS)
    if first.infeasible:
        return False, []
    if not first.values:
        return None, []
    fixed = replace(milp, lower=list(milp.lower), upper=list(milp.upper))
    for var in model.x.values():
        fixed.lower[var] = fixed.upper[var] = float(round(first.values[var]))
    second = fixed.solve(time_limit=SOLVER_SECONDS)
    if second.values:
        return True, second.values
    third = milp.solve(time_limit=SOLVER_SECONDS)
    if third.values:
        return True, third.values
    return (False if third.infeasible else None), []


def _most_replicas(model: _Model) -> int | None:
    """An upper bound on the replicas of any plan (each workload at its largest count on any
    profile), or None when the model does not bound them."""
    largest: dict[int, float] = {}
    for (w, _), var in model.y.items():
        largest[w] = max(largest.get(w, 0.0), model.milp.upper[var])
    total = sum(largest.values())
    return math.ceil(total) if math.isfinite(total) else None


def _fewest_uniform_nodes(problem: _Problem, gpus_per_node: int, lower: int) -> _UniformSearch:
    """The fewest identical nodes that hold the fleet, by galloping then bisection.

    Feasibility is monotone in the node count (more copies of a node never hold less), so a
    count proven infeasible proves every smaller one, and a feasible count bounds the answer.
    Counts below ceil(lower / gpus_per_node) hold fewer GPUs than the proven lower bound. From
    there the search tries counts at doubling steps until one holds the fleet, then bisects the
    last gap: a handful of probes instead of one per node count. If a probe times out, the count
    is treated as too few (so a plan is still found) and the result is not claimed minimal."""
    model = problem.model()
    low = max(1, math.ceil(lower / gpus_per_node))
    proven_below = low - 1  # every count up to this one is proven too few
    # A node that can serve every workload offers each profile it has at least once, so as many
    # nodes as the most replicas any plan has hold the fleet if any count does: stop there.
    most = _most_replicas(model)
    cap = max(low, most if most is not None else low * 1024)
    probes = 0
    not_enough = low - 1  # the largest count tried that did not give a plan
    step = max(1, low // 64)
    nodes = low
    while True:
        probes += 1
        holds, values = _probe_uniform(model, nodes, gpus_per_node)
        if holds:
            break
        not_enough = nodes
        if holds is False:
            proven_below = nodes
        if nodes >= cap:
            if holds is False:
                raise MigError(
                    f"no uniform node layout holds the fleet: no {gpus_per_node} GPU(s) of "
                    f"{problem.gpu.name} offer together the profiles its workloads need; plan "
                    "without uniform nodes, or with more GPUs per node"
                )
            raise MigError("the solver found no uniform node layout within its time limit")
        nodes = min(cap, nodes + step)
        step *= 2
    best, best_values = nodes, values
    while best - not_enough > 1:
        middle = (not_enough + best) // 2
        probes += 1
        holds, values = _probe_uniform(model, middle, gpus_per_node)
        if holds:
            best, best_values = middle, values
        else:
            not_enough = middle
            if holds is False:
                proven_below = max(proven_below, middle)
    return _UniformSearch(model, best, best_values, proven_below >= best - 1, probes)


def _refine_uniform(
    problem: _Problem, search: _UniformSearch, gpus_per_node: int
) -> tuple[list[float], bool]:
    """At the node count found: fewest distinct layouts per node, then least memory beyond
    need. Both stages branch on the per-node layouts only (replica counts continuous, as in the
    search, each stage within REFINE_SECONDS and starting from the previous plan, so never
    worse); then, with those layouts fixed, the replicas are solved as integers for the same
    memory objective. Returns the plan and whether it was proven best."""
    model = search.model
    milp = _uniform_milp(model, search.nodes, gpus_per_node)
    for var in model.y.values():
        milp.integer[var] = False
    used = {}
    for layout, var in model.x.items():
        used[layout] = milp.variable(cost=1.0, upper=1.0)
        milp.constrain({var: 1.0, used[layout]: -float(gpus_per_node)}, upper=0.0)
    start = search.values
    warm = list(start) + [1.0 if start[model.x[layout]] > 0.5 else 0.0 for layout in used]
    distinct_stage = milp.solve(integral_objective=True, time_limit=REFINE_SECONDS, start=warm)
    if not distinct_stage.values:
        return list(start), False
    for var in used.values():
        milp.cost[var] = 0.0
    milp.constrain(dict.fromkeys(used.values(), 1.0), upper=round(distinct_stage.objective))
    _prefer_small_slices(_Model(milp, model.x, model.y), problem)
    memory_stage = milp.solve(time_limit=REFINE_SECONDS, rel_gap=1e-4, start=distinct_stage.values)
    relaxed = memory_stage.values or distinct_stage.values
    integral = replace(
        milp, integer=list(milp.integer), lower=list(milp.lower), upper=list(milp.upper)
    )
    for var in model.y.values():
        integral.integer[var] = True
    for var in model.x.values():
        integral.lower[var] = integral.upper[var] = float(round(relaxed[var]))
    replicas_stage = integral.solve(time_limit=REFINE_SECONDS, rel_gap=1e-4)
    if not replicas_stage.values:
        return list(start), False
    proven = (
        distinct_stage.optimal
        and memory_stage.optimal
        and replicas_stage.objective
        <= memory_stage.objective + 1e-4 * abs(memory_stage.objective) + 1e-6
    )
    return list(replicas_stage.values), proven


def _realize_uniform(
    problem: _Problem,
    model: _Model,
    values: Sequence[float],
    nodes: int,
    members: Sequence[Sequence[int]],
) -> tuple[list[GpuSlot], list[Assignment]]:
    """GPUs node by node, each node repeating the same per-GPU layout sequence; replicas on
    free slices of their profile, consecutive picks on different GPUs. `model` may be over
    groups of workloads (`members` gives each group's workloads): a group's replicas of each
    profile go to its workloads in fleet order. Linear in the GPUs and replicas (one placement
    tuple per distinct layout, shared by its GPUs)."""
    gpu, workloads = problem.gpu, problem.workloads
    per_node = [layout for layout, var in model.x.items() for _ in range(round(values[var]))]
    placements = {layout: tuple(place(gpu, layout)) for layout in per_node}
    width = len(per_node)
    slots = [
        GpuSlot(n * width + i, n, layout, placements[layout])
        for n in range(nodes)
        for i, layout in enumerate(per_node)
    ]
    split: dict[tuple[int, str], int] = {}
    left = [w.replicas for w in workloads]
    for (group, name), var in model.y.items():
        count = round(values[var])
        if len(members[group]) == 1:
            split[(members[group][0], name)] = count
            continue
        for w in members[group]:
            take = min(count, left[w])
            if take:
                split[(w, name)] = take
                left[w] -= take
                count -= take
    free: dict[str, list[tuple[int, int, int]]] = defaultdict(list)
    for slot in slots:
        for rank, placement in enumerate(slot.placements):
            free[placement.profile].append((rank, slot.index, placement.start))
    for queue in free.values():
        queue.sort()
    taken: Counter[str] = Counter()
    assignments = []
    for (w, name), count in sorted(split.items(), key=lambda item: item[0][0]):
        first = taken[name]
        for _, index, start in free[name][first : first + count]:
            assignments.append(Assignment(workloads[w].name, index, name, start))
        taken[name] += count
    return slots, assignments


def compute_baselines(
    problem: _Problem, uniform_gpus_per_node: int | None = None
) -> dict[str, int]:
    """GPUs the same model needs with (a) one replica per whole GPU, no MIG, and (b) only
    homogeneous `all-<profile>` layouts, one profile per GPU, as the seed documents do.

    With `uniform_gpus_per_node` the baselines obey the same rule as the plan they are compared
    with: identical nodes of that many GPUs, counted in whole nodes. Whole GPUs are one layout,
    so (a) is rounded up to whole nodes; (b) is the fewest identical nodes whose GPUs each take
    one `all-<profile>` layout. Should no such node hold the fleet (it needs more profiles than
    a node has GPUs), (b) is the free count rounded up to whole nodes.

    Counts only, so solved over groups of workloads with identical allowed profiles."""
    problem, _ = _grouped(problem)
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
    homogeneous_problem = replace(problem, layouts=homogeneous_layouts)
    per_node = uniform_gpus_per_node
    if per_node is None:
        homogeneous, _, _, _ = _min_gpus(homogeneous_problem)
        return {"one_per_gpu": one_per_gpu, "homogeneous": homogeneous}
    try:
        search = _fewest_uniform_nodes(
            homogeneous_problem, per_node, _lower_bound(homogeneous_problem)
        )
        homogeneous = search.nodes * per_node
    except MigError:
        free, _, _, _ = _min_gpus(homogeneous_problem)
        homogeneous = math.ceil(free / per_node) * per_node
    return {
        "one_per_gpu": math.ceil(one_per_gpu / per_node) * per_node,
        "homogeneous": homogeneous,
    }
