"""The packing problem as an integer program over the valid layouts of one GPU.

    x[L]    GPUs that use layout L           (integer)
    y[w,p]  replicas of workload w on slices of profile p   (integer)

    sum_p y[w,p] = replicas[w]                      every replica placed once, or
    sum_p thr[w,p] * y[w,p] >= demand[w]            a demand met (requests/s per slice)
    sum_w y[w,p] <= sum_L count(L,p) * x[L]         no profile over-subscribed

The same rows serve every stage: fewest GPUs (cost 1 per GPU), and, with the GPU count fixed
(`at_total`), the preferences that choose among the plans with that count.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from functools import cache

from msgspec import Struct
from msgspec.structs import replace

from mig_inference.errors import MigError
from mig_inference.gpus.catalog import GpuModel, Profile
from mig_inference.gpus.layout import Layout, maximal_layouts, valid_layouts
from mig_inference.solving.milp import Milp
from mig_inference.solving.workload import Workload, need_mib


def candidate_layouts(gpu: GpuModel, profiles: Sequence[Profile]) -> list[Layout]:
    """The maximal layouts of `profiles`, in the catalog's enumeration order (a fixed order:
    every tie between layouts is broken by it)."""
    names = tuple(
        sorted({p.name for p in profiles}, key=lambda n: gpu.profiles.index(gpu.profile(n)))
    )
    return maximal_layouts(valid_layouts(gpu, names))


class Model(Struct):
    milp: Milp
    x: dict[Layout, int]
    """The variable of each candidate layout, in the candidates' order."""
    y: dict[tuple[int, str], int]
    """The variable of each (workload, profile) pair."""
    demand_driven: bool = False
    """Some workload states a demand (its replicas are chosen) rather than a replica count."""


class Problem(Struct, frozen=True):
    """One packing problem: the GPU model, the fleet, the profiles each workload may use, and
    the layouts a GPU may take."""

    gpu: GpuModel
    workloads: Sequence[Workload]
    allowed: Sequence[Sequence[Profile]]
    layouts: Sequence[Layout]
    single_profile: bool = False
    whole_replica_compute: bool = False
    """Each demand's compute row holds the fewest compute slices of a mix of whole replicas (see
    `fewest_compute_slices`) instead of the fractional fewest rounded up. Both rows are valid;
    the stronger one lets the LP relaxations of a free pack's stages rule out layouts (on
    ParvaGPU's SLO6 fleet with MPS, every single layout), but the identical-node search does
    without it: with it, the work-limited fewest-layouts stage of the benchmark's 200-demand
    fleet stopped on 5-7 distinct layouts per node instead of 4."""

    def model(self) -> Model:
        """The program minimizing GPUs."""
        return build(self)


def build(problem: Problem) -> Model:
    workloads, allowed, single_profile = problem.workloads, problem.allowed, problem.single_profile
    milp = Milp()
    x = {layout: milp.variable(cost=1.0) for layout in problem.layouts}
    y: dict[tuple[int, str], int] = {}
    for w, workload in enumerate(workloads):
        if workload.demand_driven:
            _demand(milp, y, w, workload, allowed[w], problem.whole_replica_compute)
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
    return Model(milp, x, y, any(w.demand_driven for w in workloads))


def _demand(
    milp: Milp,
    y: dict[tuple[int, str], int],
    w: int,
    workload: Workload,
    allowed: Sequence[Profile],
    whole_replica_compute: bool,
) -> None:
    """Replicas of any mix of `allowed` profiles whose summed throughput meets the demand (a
    Deployment per profile, so no single-profile rule).

    Three rows more state what every integral mix must hold: at least as many replicas, and as
    many compute and memory slices, as the fewest that can serve the demand, rounded up (a
    replica counts whole; with `whole_replica_compute`, the compute row holds the fewest of
    any mix of whole replicas). They cut off the fractional mixes the demand row alone lets
    the LP relaxation take, which is what makes the fewest GPUs of a large demand fleet
    provable."""
    demand = float(workload.requests_per_second or 0.0)
    for profile in allowed:
        rate = workload.throughput_on(profile.name)
        y[(w, profile.name)] = milp.variable(upper=math.ceil(demand / rate))
    mine = {p.name: y[(w, p.name)] for p in allowed}
    milp.constrain({mine[p.name]: workload.throughput_on(p.name) for p in allowed}, lower=demand)
    milp.constrain(dict.fromkeys(mine.values(), 1.0), lower=workload.fewest_replicas)
    fewest = {
        per: math.ceil(replicas_lower_bound(workload, allowed, per) - 1e-9)
        for per in ("compute", "memory")
    }
    order = ("compute", "memory")
    if whole_replica_compute:
        fewest["compute"] = fewest_compute_slices(workload, tuple(allowed))
        # The order of rows steers HiGHS's search (the same proofs, other paths): this one
        # proves the fewest distinct layouts of ParvaGPU's SLO6 fleet with MPS in 31 ms of CPU
        # instead of 45.
        order = ("memory", "compute")
    for per in order:
        milp.constrain({mine[p.name]: float(_size(p, per)) for p in allowed}, lower=fewest[per])


@cache
def fewest_compute_slices(workload: Workload, allowed: tuple[Profile, ...]) -> int:
    """The fewest compute slices of any integral mix of `allowed` replicas that serves the
    demand of `workload`: at least the fractional bound rounded up, and exactly that when the
    best mix of one profile alone reaches it; otherwise counted (`_fewest_compute_counted`), or,
    when a mix falls short of the demand by less than HiGHS's tolerance, proven by HiGHS on
    this workload alone, started from that mix (a few variables and one row: a millisecond).

    A replica counts whole, so this may exceed the rounded bound. On ParvaGPU's SLO6 fleet with
    MPS it does by one slice: 104 of the 105 compute slices of 15 GPUs instead of 103, and with
    that slack gone the LP relaxations of the later stages rule out most layouts outright."""
    rounded = math.ceil(replicas_lower_bound(workload, allowed, "compute") - 1e-9)
    demand = float(workload.requests_per_second or 0.0)
    one_profile = {p: math.ceil(demand / workload.throughput_on(p.name)) for p in allowed}
    best = min(allowed, key=lambda p: one_profile[p] * p.compute)
    if one_profile[best] * best.compute <= rounded:
        return rounded
    counted = _fewest_compute_counted(workload, allowed, demand)
    if counted is not None:
        return counted
    alone = Milp()
    mix = [alone.variable(cost=float(p.compute), upper=float(one_profile[p])) for p in allowed]
    alone.constrain(
        {var: workload.throughput_on(p.name) for var, p in zip(mix, allowed, strict=True)},
        lower=demand,
    )
    start = [float(one_profile[p]) if p is best else 0.0 for p in allowed]
    solution = alone.solve(integral_objective=True, start=start, heuristics=False)
    return round(solution.objective) if solution.optimal else rounded


MIX_TOLERANCE = 1e-5
"""How close to a demand (relative, at least 1e-5 requests/s) a mix of replicas may fall short
and still count as serving it within HiGHS's feasibility tolerance (1e-6): a mix that close is
left to HiGHS to decide."""


def _fewest_compute_counted(
    workload: Workload, allowed: Sequence[Profile], demand: float
) -> int | None:
    """The fewest compute slices of a mix of whole replicas serving `demand`, by counting:
    `most[c]`, the most requests per second any mix of at most `c` compute slices serves, for
    c = 0, 1, ... until it reaches the demand (a few dozen steps). The same integer HiGHS
    proves (about a millisecond per workload), unless the best mix of one slice fewer falls
    short by less than HiGHS's feasibility tolerance, which HiGHS might accept: then None."""
    rates = [(p.compute, workload.throughput_on(p.name)) for p in allowed]
    most = [0.0]
    while most[-1] < demand:
        slices = len(most)
        reach = [most[slices - size] + rate for size, rate in rates if size <= slices]
        most.append(max([most[-1], *reach]))
    if demand - most[-2] <= MIX_TOLERANCE * max(1.0, demand):
        return None
    return len(most) - 1


def _size(profile: Profile, per: str) -> int:
    return profile.memory if per == "memory" else profile.compute


def replicas_lower_bound(workload: Workload, allowed: Sequence[Profile], per: str) -> float:
    """The fewest memory (`per="memory"`) or compute slices the workload's replicas take, as a
    fraction: fixed replicas on their smallest profile, or the demand at the best rate per
    slice."""
    if not workload.demand_driven:
        return float(workload.replicas * min(_size(p, per) for p in allowed))
    demand = float(workload.requests_per_second or 0.0)
    return min(demand / workload.throughput_on(p.name) * _size(p, per) for p in allowed)


def lower_bound(problem: Problem) -> int:
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


def holds_by_counting(problem: Problem, layout: Layout, gpus: int) -> bool:
    """Whether `gpus` copies of `layout` may hold the fleet as far as counting tells: every
    workload has a profile of the layout, and the fewest replicas, compute slices and memory
    slices the workloads need on those profiles, each rounded up (a replica counts whole), fit
    in what the copies offer. False proves that no plan of that layout alone exists."""
    offered = layout.as_dict()
    replicas = compute = memory = 0
    for workload, allowed in zip(problem.workloads, problem.allowed, strict=True):
        mine = [p for p in allowed if p.name in offered]
        if not mine:
            return False
        if workload.demand_driven:
            fastest = max(workload.throughput_on(p.name) for p in mine)
            replicas += math.ceil(float(workload.requests_per_second or 0.0) / fastest - 1e-9)
        else:
            replicas += workload.replicas
        compute += math.ceil(replicas_lower_bound(workload, mine, "compute") - 1e-9)
        memory += math.ceil(replicas_lower_bound(workload, mine, "memory") - 1e-9)
    sizes = [(problem.gpu.profile(name), count) for name, count in offered.items()]
    return (
        replicas <= gpus * sum(offered.values())
        and compute <= gpus * sum(p.compute * count for p, count in sizes)
        and memory <= gpus * sum(p.memory * count for p, count in sizes)
    )


COMPUTE_SLICE_MIB = 10
"""What a compute slice weighs in the memory preference: among slices of equal memory, the one
with less compute wins."""


def memory_costs(problem: Problem, model: Model) -> dict[int, float]:
    """The cost of one replica on each (workload, profile) variable: the slice's memory beyond
    the replica's need, in whole MiB, plus COMPUTE_SLICE_MIB per compute slice. Whole numbers,
    so HiGHS proves the least total exactly (no tolerance decides between two plans)."""
    costs = {}
    for (w, name), var in model.y.items():
        profile = problem.gpu.profile(name)
        excess = profile.memory_mib - need_mib(problem.workloads[w], problem.gpu)
        costs[var] = float(round(max(excess, 0.0)) + COMPUTE_SLICE_MIB * profile.compute)
    return costs


def at_total(model: Model, total: int, scale: int = 1) -> Milp:
    """`model` with the GPUs of one unit fixed at `total`: the whole fleet (`scale` 1), or one
    of `scale` identical nodes, whose x[L] then count per node and every capacity row multiplies
    them by the node count. No objective: the stages set their own."""
    columns = set(model.x.values())
    base = model.milp
    milp = Milp(
        cost=[0.0] * len(base.cost),
        lower=list(base.lower),
        upper=list(base.upper),
        integer=list(base.integer),
        rows=[
            ({v: c * scale if v in columns else c for v, c in terms.items()}, lo, hi)
            for terms, lo, hi in base.rows
        ],
    )
    milp.constrain(dict.fromkeys(model.x.values(), 1.0), lower=total, upper=total)
    return milp


def grouped(problem: Problem) -> tuple[Problem, list[list[int]]]:
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


class Fewest(Struct, frozen=True):
    """The fewest GPUs that hold a fleet, as far as the work limit let HiGHS prove it."""

    gpus: int
    """GPUs of the best plan found."""
    proven: bool
    bound: int
    """A proven lower bound on the GPUs (`gpus` itself when proven)."""
    values: list[float]
    model: Model


def fewest_gpus(problem: Problem, lower: int | None = None, model: Model | None = None) -> Fewest:
    """The fewest GPUs. With `lower`, a proven lower bound (see `lower_bound`), a plan with
    exactly that many GPUs is looked for first: any feasible point proves it optimal, and
    HiGHS finds one without the root cuts it separates to close the gap of the full program
    (on ParvaGPU's SLO6 fleet with MPS, 20 ms of CPU instead of 42). `model` is the problem's
    program when already built."""
    model = problem.model() if model is None else model
    if lower is not None:
        at_bound = at_total(model, lower).solve()
        if at_bound.values:
            return Fewest(lower, True, lower, at_bound.values, model)
    solution = model.milp.solve(integral_objective=True)
    if not solution.values:
        raise MigError("the solver found no plan within its work limit")
    gpus = round(solution.objective)
    bound = gpus if solution.optimal else math.ceil(solution.bound - 1e-6)
    return Fewest(gpus, solution.optimal, bound, solution.values, model)
