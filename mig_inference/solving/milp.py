"""A small adapter over the HiGHS MILP solver (highspy's compiled core): variables, linear rows,
solve.

The planner states its model in these terms; HiGHS proves optimality (or reports the gap).

Every solve stops on work, never on time: HiGHS runs on one thread with its fixed random seed
and a limit on branch-and-bound nodes, so the same model gives the same answer however loaded
the machine is (HiGHS's single-threaded runs give the same output across compilers, ISAs and
operating systems: ERGO-Code/HiGHS#1928). A wall-clock limit would let the machine's load
decide which of several plans is returned, and a flipped `mig: auto` layout is a new pool
generation.
"""

from __future__ import annotations

import math
import os
import sys
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from functools import cache
from typing import Any

from msgspec import Struct, field

from mig_inference.solving.highs_core import highs_core

_STDOUT_LOCK = threading.Lock()

PROOF_NODES = 20_000
"""Branch-and-bound nodes a solve may explore by default: enough to prove every benchmark
fleet, and a bound on the work (not the time) a pathological one may take."""


@contextmanager
def _native_stdout_silenced() -> Iterator[None]:
    """Send what native code writes to file descriptor 1 to /dev/null meanwhile.

    HiGHS prints a banner from its C++ constructor (highspy 1.16), before any option such as
    `output_flag` can be set, and straight to the descriptor, where Python's `sys.stdout`
    redirection cannot see it. The CLI's `--json` answers go to stdout, so the descriptor itself
    is pointed elsewhere while HiGHS runs. The lock keeps two solves in threads from restoring
    each other's descriptor."""
    with _STDOUT_LOCK:
        sys.stdout.flush()
        saved = os.dup(1)
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            try:
                os.dup2(devnull, 1)
            finally:
                os.close(devnull)
            yield
        finally:
            os.dup2(saved, 1)
            os.close(saved)


class Solution(Struct, frozen=True):
    optimal: bool
    """True when HiGHS proved the objective optimal (within the gaps asked for)."""
    values: list[float]
    objective: float
    bound: float
    """HiGHS's proven lower bound on the objective (the objective itself when optimal)."""
    infeasible: bool = False
    """True when HiGHS proved that no point satisfies the rows and bounds (integrality included
    unless relaxed); False after a work limit or any other stop, which prove nothing."""


class Milp(Struct):
    """A minimization problem over bounded integer or continuous variables."""

    cost: list[float] = field(default_factory=list)
    lower: list[float] = field(default_factory=list)
    upper: list[float] = field(default_factory=list)
    integer: list[bool] = field(default_factory=list)
    rows: list[tuple[dict[int, float], float, float]] = field(default_factory=list)

    def variable(
        self, cost: float = 0.0, lower: float = 0.0, upper: float = math.inf, integer: bool = True
    ) -> int:
        self.cost.append(cost)
        self.lower.append(lower)
        self.upper.append(upper)
        self.integer.append(integer)
        return len(self.cost) - 1

    def copy(self, cost: list[float] | None = None) -> Milp:
        """An independent copy (rows shared: a row is never changed once added), with another
        objective when `cost` is given."""
        return Milp(
            cost=list(self.cost if cost is None else cost),
            lower=list(self.lower),
            upper=list(self.upper),
            integer=list(self.integer),
            rows=list(self.rows),
        )

    def with_bounds(self, bounds: Mapping[int, tuple[float, float]]) -> Milp:
        """A copy whose columns in `bounds` take those (lower, upper) bounds."""
        bounded = self.copy()
        for col, (lower, upper) in bounds.items():
            bounded.lower[col], bounded.upper[col] = lower, upper
        return bounded

    def constrain(
        self, terms: Mapping[int, float], lower: float = -math.inf, upper: float = math.inf
    ) -> None:
        """lower <= sum(coef * var) <= upper."""
        self.rows.append((dict(terms), lower, upper))

    def solve(
        self,
        *,
        relax: bool = False,
        node_limit: int = PROOF_NODES,
        integral_objective: bool = False,
        start: list[float] | None = None,
        heuristics: bool = True,
    ) -> Solution:
        """Solve; `relax` drops integrality (the LP relaxation). With `integral_objective`, HiGHS
        may stop once the gap is below 1, which proves optimality of an integer objective.
        `node_limit` bounds the branch-and-bound nodes (0: the root only). `start` is a
        feasible point HiGHS begins from (a warm start); with one, `heuristics=False` spares
        the primal heuristics (sub-MIPs, feasibility jump) that would look for another: on
        ParvaGPU's SLO6 fleet they were most of the fewest-layouts stage's work."""
        core = highs_core()
        with _native_stdout_silenced():
            solver = self._highs(relax=relax)
            solver.setOptionValue("mip_max_nodes", int(node_limit))
            solver.setOptionValue("mip_rel_gap", 0.0)
            if integral_objective:
                solver.setOptionValue("mip_abs_gap", 1.0 - 1e-6)
            if not heuristics:
                solver.setOptionValue("mip_heuristic_effort", 0.0)
                for heuristic in ("rins", "rens", "feasibility_jump", "root_reduced_cost"):
                    solver.setOptionValue(f"mip_heuristic_run_{heuristic}", False)
            if start is not None:
                initial = core.HighsSolution()
                initial.col_value = list(start)
                initial.value_valid = True
                solver.setSolution(initial)
            solver.run()
        status = solver.getModelStatus()
        info = solver.getInfo()
        solution = solver.getSolution()
        has_solution = bool(solution.value_valid)
        values = list(solution.col_value) if has_solution else []
        objective = float(info.objective_function_value) if has_solution else math.inf
        bound = objective if relax else float(info.mip_dual_bound)
        return Solution(
            optimal=status == core.HighsModelStatus.kOptimal,
            values=values,
            objective=objective,
            bound=bound,
            infeasible=self._proves_infeasible(status),
        )

    def relaxed_objectives(
        self, variants: Sequence[Mapping[int, tuple[float, float]]]
    ) -> list[float | None]:
        """The LP relaxation's optimal objective with each variant's column bounds (lower,
        upper) in place of the program's (`with_bounds`): None where HiGHS proved that LP
        infeasible, -inf where it stopped on anything else (no bound). One HiGHS model serves
        them all: each variant's bounds are set in turn, and the dual simplex starts from the
        basis the previous one left (an LP's optimal objective is the same from any start).
        On ParvaGPU's SLO1 fleet, nine layouts' relaxations take 3.1 ms of CPU this way, 7.5
        ms with a model each."""
        if not variants:
            return []
        core = highs_core()
        inf = core.kHighsInf
        objectives: list[float | None] = []
        with _native_stdout_silenced():
            solver = self._highs(relax=True)
            changed: set[int] = set()
            for variant in variants:
                for col in changed - variant.keys():
                    solver.changeColBounds(col, self.lower[col], _finite(self.upper[col], inf))
                for col, (lower, upper) in variant.items():
                    solver.changeColBounds(col, lower, _finite(upper, inf))
                changed = set(variant)
                solver.run()
                status = solver.getModelStatus()
                if status == core.HighsModelStatus.kOptimal:
                    objectives.append(float(solver.getInfo().objective_function_value))
                    continue
                proved = self.with_bounds(variant)._proves_infeasible(status)
                objectives.append(None if proved else -math.inf)
        return objectives

    def _highs(self, *, relax: bool) -> Any:
        """A HiGHS solver holding this program (its LP relaxation with `relax`), on one thread
        and silent; the caller sets the limits and runs it."""
        core = highs_core()
        inf = core.kHighsInf
        lp = _lp_of_columns(len(self.cost))
        lp.num_row_ = len(self.rows)
        lp.col_lower_ = self.lower
        lp.col_upper_ = [_finite(u, inf) for u in self.upper]
        lp.row_lower_ = [-inf if math.isinf(lo) else lo for _, lo, _ in self.rows]
        lp.row_upper_ = [_finite(hi, inf) for _, _, hi in self.rows]
        starts, indexes, values = self._columnwise()
        matrix = lp.a_matrix_
        matrix.format_ = core.MatrixFormat.kColwise
        matrix.num_col_, matrix.num_row_ = len(self.cost), len(self.rows)
        matrix.start_ = starts
        matrix.index_ = indexes
        matrix.value_ = values
        kinds = core.HighsVarType
        lp.integrality_ = (
            [] if relax else [kinds.kInteger if i else kinds.kContinuous for i in self.integer]
        )
        solver = core._Highs()
        solver.setOptionValue("output_flag", False)
        solver.setOptionValue("threads", 1)
        solver.passModel(lp)
        # Costs one by one: the core's `HighsLp.col_cost_` converts through numpy.
        for col, cost in enumerate(self.cost):
            if cost:
                solver.changeColCost(col, cost)
        return solver

    def _columnwise(self) -> tuple[list[int], list[int], list[float]]:
        """The rows' nonzero coefficients column by column (HiGHS's column-wise matrix): each
        column's start, then the row index and value of each entry."""
        columns: list[list[tuple[int, float]]] = [[] for _ in self.cost]
        for row_index, (terms, _, _) in enumerate(self.rows):
            for col, coef in terms.items():
                if coef:
                    columns[col].append((row_index, coef))
        starts, indexes, values = [0], [], []
        for column in columns:
            for row_index, coef in column:
                indexes.append(row_index)
                values.append(coef)
            starts.append(len(indexes))
        return starts, indexes, values

    def _proves_infeasible(self, status: Any) -> bool:
        """kInfeasible is a proof. HiGHS's presolve may say "unbounded or infeasible" instead;
        with every cost >= 0 and every lower bound finite the objective is bounded below, so
        that too proves infeasibility. A work limit, interrupt or any other stop proves nothing."""
        core = highs_core()
        if status == core.HighsModelStatus.kInfeasible:
            return True
        bounded_below = all(
            c >= 0 and not math.isinf(lo) for c, lo in zip(self.cost, self.lower, strict=True)
        )
        return bounded_below and status == core.HighsModelStatus.kUnboundedOrInfeasible


def _finite(upper: float, inf: float) -> float:
    """An upper bound as HiGHS takes it: its own infinity for an unbounded one."""
    return inf if math.isinf(upper) else upper


@cache
def _lp_of_columns(columns: int) -> Any:
    """A HiGHS LP of `columns` columns at zero cost, to fill in and pass: the one field the core
    cannot take from a list without numpy is the cost vector, and the model's own `getLp` gives
    it zeros of the right length (each solve sets every other field it uses, and passes a copy;
    the costs follow one call each). Cached per width: building one takes a call per column."""
    core = highs_core()
    scratch = core._Highs()
    scratch.setOptionValue("output_flag", False)
    for _ in range(columns):
        scratch.addVar(0.0, core.kHighsInf)
    return scratch.getLp()
