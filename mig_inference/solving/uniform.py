"""The fewest identical nodes that hold a fleet (a node pool with one MIG label).

Per node the program is the packing's: x[L] becomes the GPUs of one node that use layout L (they
sum to the node's GPUs) and every profile's capacity is multiplied by the node count N. More
identical nodes never hold less, so the search starts at a proven lower bound, tries N at
doubling steps until one holds the fleet, then bisects the last gap: a handful of probes.
"""

from __future__ import annotations

import math

from msgspec import Struct
from msgspec.structs import replace

from mig_inference.errors import MigError
from mig_inference.solving.model import Model, Problem, at_total

FIXED_LAYOUT_NODES = 200
"""Branch-and-bound nodes for the replica counts once a probe's layouts are fixed: a transport
problem for replica counts, settled at the root."""


class UniformSearch(Struct, frozen=True):
    """The outcome of the node-count search: the fewest identical nodes found, a plan for them
    (values of `model`'s variables, x[L] read as GPUs per node), and whether every smaller
    count was proven not to hold the fleet."""

    model: Model
    nodes: int
    values: list[float]
    proven: bool
    probes: int
    """Node counts tried (each one to three HiGHS solves)."""


def probe(model: Model, nodes: int, gpus_per_node: int) -> tuple[bool | None, list[float]]:
    """Do `nodes` identical nodes hold the fleet? True with an integral plan, False when HiGHS
    proved they cannot, None when it could not tell within its work limit.

    First with replica counts y continuous: a relaxation, so its infeasibility is a proof, and
    fast (only the per-node layout counts branch). A relaxed plan's layout counts are then fixed
    and the replicas solved as integers; for replica-count workloads that is a transportation
    problem with integral capacities, which an integral plan always satisfies, so this settles at
    once. Only if it fails is the full integer program solved. A demand has no such argument:
    fixed layouts may well not serve it (on the benchmark's 200 demands the fixed program spent
    its 200 nodes, 2 s of CPU, in vain), so with one the full program is solved at once."""
    milp = at_total(model, gpus_per_node, nodes)
    relaxed = replace(milp, integer=list(milp.integer))
    for var in model.y.values():
        relaxed.integer[var] = False
    first = relaxed.solve()
    if first.infeasible:
        return False, []
    if not first.values:
        return None, []
    if not model.demand_driven:
        fixed = replace(milp, lower=list(milp.lower), upper=list(milp.upper))
        for var in model.x.values():
            fixed.lower[var] = fixed.upper[var] = float(round(first.values[var]))
        second = fixed.solve(node_limit=FIXED_LAYOUT_NODES)
        if second.values:
            return True, second.values
    third = milp.solve()
    if third.values:
        return True, third.values
    return (False if third.infeasible else None), []


def _most_replicas(model: Model) -> int | None:
    """An upper bound on the replicas of any plan (each workload at its largest count on any
    profile), or None when the model does not bound them."""
    largest: dict[int, float] = {}
    for (w, _), var in model.y.items():
        largest[w] = max(largest.get(w, 0.0), model.milp.upper[var])
    total = sum(largest.values())
    return math.ceil(total) if math.isfinite(total) else None


def fewest_nodes(problem: Problem, gpus_per_node: int, low: int) -> UniformSearch:
    """The fewest identical nodes that hold the fleet, by galloping then bisection from `low`,
    a count every smaller one of which is proven too few.

    Feasibility is monotone in the node count (more copies of a node never hold less), so a
    count proven infeasible proves every smaller one, and a feasible count bounds the answer.
    If a probe stops on its work limit, the count is treated as too few (so a plan is still
    found) and the result is not claimed minimal."""
    model = problem.model()
    low = max(1, low)
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
        holds, values = probe(model, nodes, gpus_per_node)
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
            raise MigError("the solver found no uniform node layout within its work limit")
        nodes = min(cap, nodes + step)
        step *= 2
    best, best_values = nodes, values
    while best - not_enough > 1:
        middle = (not_enough + best) // 2
        probes += 1
        holds, values = probe(model, middle, gpus_per_node)
        if holds:
            best, best_values = middle, values
        else:
            not_enough = middle
            if holds is False:
                proven_below = max(proven_below, middle)
    return UniformSearch(model, best, best_values, proven_below >= best - 1, probes)
