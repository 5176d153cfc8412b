"""Which of the plans with the fewest GPUs (or identical nodes) to build, stage by stage:

1. with a deployed layout, the fewest GPUs re-partitioned: as many GPUs as possible keep the
   layout they run (a layout change evicts the replicas of the GPUs it changes);
2. the fewest distinct layouts (fewer mig-parted configs): one layout on every GPU when one
   does it, tried layout by layout;
3. the least memory handed out beyond what replicas need.

Each stage is solved to a proof within a fixed number of branch-and-bound nodes (work, not
time), and the next one keeps what it found as a constraint. Ties go to the first layout in the
candidates' fixed order, or to HiGHS's deterministic search: the same fleet gives the same plan
on any machine, however loaded.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from msgspec import Struct
from msgspec.structs import replace

from mig_inference.gpus.layout import Layout
from mig_inference.solving.milp import Milp, Solution
from mig_inference.solving.model import Model, Problem, holds_by_counting, memory_costs

REFINE_NODES = 1_000
"""Branch-and-bound nodes each preference stage may explore; what is found within them is kept
(never worse than the previous stage's plan), and `proven` says whether it was proven best."""


class Stage(Struct, frozen=True):
    """What one preference stage found and what it proved: `value` is the chosen plan's,
    `bound` a proven bound no plan beats (equal to `value` when proven best)."""

    name: str
    value: int
    bound: int
    proven: bool


KEPT = "GPUs keeping their layout"
DISTINCT = "distinct layouts"
MEMORY = "memory beyond need on those layouts (MiB, +10 per compute slice)"


class Preferred(Struct, frozen=True):
    """The plan chosen among those with the fewest GPUs: values of the stage milp's variables
    (x[L] and y[w,p] read through the model)."""

    values: list[float]
    proven: bool
    """Every stage was proven best."""
    kept: int | None = None
    """GPUs of one unit (the fleet, or a node) that keep their deployed layout."""
    stages: tuple[Stage, ...] = ()
    """Each stage run, in order."""


def prefer(
    problem: Problem,
    model: Model,
    milp: Milp,
    total: int,
    start: Sequence[float],
    keep: Mapping[Layout, int] | None = None,
    at_least: int | None = None,
) -> Preferred:
    """The preferred plan among the points of `milp` (`model`'s rows with the unit's GPUs fixed
    at `total`), starting from the feasible point `start`. `keep` is the deployed layout of one
    unit, as GPUs per layout. `at_least` is what `one_layout` already proved on the same
    `milp` (no single layout holds the fleet): that stage is then not run again."""
    milp = milp.copy()
    stages = []
    kept = None
    values = list(start)
    if keep:
        kept, keep_stage, values = _keep(model, milp, total, values, keep)
        stages.append(keep_stage)
    if at_least is None:
        single = one_layout(problem, model, milp, total)
        if isinstance(single, Preferred):
            stages += single.stages
            return Preferred(single.values, all(s.proven for s in stages), kept, tuple(stages))
        at_least = single
    costs = memory_costs(problem, model)
    distinct, distinct_stage = _fewest_layouts(model, milp, total, values, at_least)
    memory, memory_stage = _least_memory(model, milp, costs, distinct, distinct_stage.proven)
    stages += [distinct_stage, memory_stage]
    return Preferred(memory, all(s.proven for s in stages), kept, tuple(stages))


def one_layout(
    problem: Problem, model: Model, milp: Milp, total: int, fleet: bool = False
) -> Preferred | int:
    """The preferred plan when one layout on every GPU of the unit holds the fleet (see
    `_single_layout`); otherwise the fewest distinct layouts it proved (2, or 1 when a layout
    stopped on its work limit). It needs no feasible point to start from: a plan it finds with
    the fleet's lower bound of GPUs proves that count too, before any search for one. With
    `fleet` (the unit is the whole fleet), a layout whose copies cannot hold it by counting
    (see `holds_by_counting`) is ruled out without an LP: 10 of the 12 on ParvaGPU's SLO6 fleet
    with MPS."""
    counted = [
        layout for layout in model.x if not fleet or holds_by_counting(problem, layout, total)
    ]
    single = _single_layout(model, milp, total, memory_costs(problem, model), counted)
    if isinstance(single, int):
        return single
    values, memory_stage = single
    return Preferred(values, memory_stage.proven, None, (Stage(DISTINCT, 1, 1, True), memory_stage))


def _stage(name: str, solution: Solution, value: float, trivial: int, sign: int = 1) -> Stage:
    """A stage's outcome from its solve: proven, or the bound HiGHS proved before its work
    limit (`trivial` when it proved none). `sign` -1 for a stage that maximizes: its program
    minimizes the negated count, so its bound is an upper one."""
    if solution.optimal:
        return Stage(name, round(value), round(value), True)
    if not math.isfinite(solution.bound):
        return Stage(name, round(value), trivial, False)
    bound = math.ceil(solution.bound - 1e-6) if sign > 0 else math.floor(-solution.bound + 1e-6)
    # Whole-number objectives: a bound that reaches the value proves it, limit or not.
    return Stage(name, round(value), bound, bound * sign >= round(value) * sign)


def _finished(solution: Solution) -> bool:
    """Proven best, or proven impossible: a stop on the work limit is neither."""
    return solution.optimal or solution.infeasible


def _keep(
    model: Model, milp: Milp, total: int, start: list[float], keep: Mapping[Layout, int]
) -> tuple[int, Stage, list[float]]:
    """The most GPUs of a unit that keep a deployed layout (at most as many as had it), added to
    `milp` as a row. The deployed layouts themselves are tried first: when they still hold the
    fleet nothing is re-partitioned."""
    kept_layouts = [layout for layout in keep if layout in model.x]
    if sum(keep.values()) == total and len(kept_layouts) == len(keep):
        unchanged = milp.copy()
        for layout, var in model.x.items():
            unchanged.lower[var] = unchanged.upper[var] = float(keep.get(layout, 0))
        solution = unchanged.solve(node_limit=REFINE_NODES)
        if solution.values:
            for layout, var in model.x.items():
                milp.lower[var] = milp.upper[var] = float(keep.get(layout, 0))
            return total, Stage(KEPT, total, total, True), solution.values
    keeps = {}
    for layout in kept_layouts:
        keeps[layout] = milp.variable(cost=-1.0, upper=float(keep[layout]), integer=False)
        milp.constrain({keeps[layout]: 1.0, model.x[layout]: -1.0}, upper=0.0)
    warm = start + [min(start[model.x[layout]], float(keep[layout])) for layout in keeps]
    solution = milp.solve(
        integral_objective=True, node_limit=REFINE_NODES, start=warm, heuristics=False
    )
    for var in keeps.values():
        milp.cost[var] = 0.0
    best = solution.values or warm
    kept = round(sum(best[var] for var in keeps.values()))
    milp.constrain(dict.fromkeys(keeps.values(), 1.0), lower=float(kept))
    return kept, _stage(KEPT, solution, kept, total, sign=-1), list(best)


def _single_layout(
    model: Model, milp: Milp, total: int, costs: Mapping[int, float], layouts: Sequence[Layout]
) -> tuple[list[float], Stage] | int:
    """The plan with one layout on every GPU of the unit and the least memory beyond need; or,
    when no single layout holds the fleet, the fewest distinct layouts proven (2 when every
    layout was ruled out, 1 when one stopped on its work limit). Each layout's LP relaxation,
    solved first, bounds what it can achieve: a layout whose relaxation is infeasible, or whose
    bound cannot beat the best plan so far, is not solved as an integer program. Ties go to the
    first layout in the candidates' order. Only `layouts` are tried: the others are ruled out."""
    priced = milp.copy(cost=[costs.get(var, 0.0) for var in range(len(milp.cost))])
    variants: list[tuple[int, dict[int, tuple[float, float]]]] = []
    for index, (layout, var) in enumerate(model.x.items()):
        if layout not in layouts:
            continue
        others = [other for other in model.x.values() if other != var]
        if priced.upper[var] < total or any(priced.lower[other] > 0 for other in others):
            continue  # an earlier stage fixed the unit's layouts otherwise
        only = {other: (0.0, 0.0) for other in others}
        only[var] = (float(total), float(total))
        variants.append((index, only))
    relaxed = priced.relaxed_objectives([only for _, only in variants])
    # A relaxation that proved nothing (-inf) leaves its layout in, bounded by 0: costs are >= 0.
    bounds = [
        (math.ceil(objective - 1e-6) if math.isfinite(objective) else 0, index, only)
        for (index, only), objective in zip(variants, relaxed, strict=True)
        if objective is not None
    ]
    best: tuple[int, int, list[float]] | None = None
    proven = True
    least = math.inf  # the least memory a layout not solved to the end might still reach
    for bound, index, only in sorted(bounds, key=lambda item: item[:2]):
        if best is not None and (bound, index) > best[:2]:
            break
        solution = priced.with_bounds(only).solve(integral_objective=True, node_limit=REFINE_NODES)
        if not _finished(solution):
            proven = False
            dual = solution.bound if math.isfinite(solution.bound) else bound
            least = min(least, max(bound, math.ceil(dual - 1e-6)))
        if solution.values:
            found = (round(solution.objective), index, solution.values)
            if best is None or found[:2] < best[:2]:
                best = found
    if best is None:
        return 2 if proven else 1
    return best[2], Stage(MEMORY, best[0], best[0] if proven else min(best[0], int(least)), proven)


def _fewest_layouts(
    model: Model, milp: Milp, total: int, start: list[float], at_least: int
) -> tuple[list[float], Stage]:
    """A plan with the fewest distinct layouts (when no single one does it): a binary per
    layout that its GPUs switch on. `at_least` is what the single-layout stage proved."""
    distinct = milp.copy()
    used = {}
    for layout, var in model.x.items():
        used[layout] = distinct.variable(cost=1.0, upper=1.0)
        distinct.constrain({var: 1.0, used[layout]: -float(total)}, upper=0.0)
    warm = start + [1.0 if start[model.x[layout]] > 0.5 else 0.0 for layout in used]
    solution = distinct.solve(
        integral_objective=True, node_limit=REFINE_NODES, start=warm, heuristics=False
    )
    best = solution.values or warm
    stage = _stage(DISTINCT, solution, sum(best[var] for var in used.values()), at_least)
    return best[: len(milp.cost)], replace(stage, bound=max(stage.bound, at_least))


def _least_memory(
    model: Model,
    milp: Milp,
    costs: Mapping[int, float],
    start: list[float],
    every_layout_used: bool = False,
) -> tuple[list[float], Stage]:
    """The least memory beyond need among plans that use only the layouts of `start`. With
    `every_layout_used` (their number is proven the fewest) each of them takes a GPU at least:
    a plan leaving one out would have fewer. Stated as bounds, that spares HiGHS work (on
    ParvaGPU's SLO6 fleet with MPS, 21 ms of CPU instead of 28)."""
    memory = milp.copy(cost=[costs.get(var, 0.0) for var in range(len(milp.cost))])
    for var in model.x.values():
        if start[var] < 0.5:
            memory.upper[var] = 0.0
        elif every_layout_used:
            memory.lower[var] = max(memory.lower[var], 1.0)
    solution = memory.solve(
        integral_objective=True, node_limit=REFINE_NODES, start=start, heuristics=False
    )
    best = solution.values or start
    value = sum(costs.get(var, 0.0) * best[var] for var in range(len(best)))
    return best, _stage(MEMORY, solution, value, 0)
