"""The HiGHS adapter: LP relaxations solved together on one model."""

from __future__ import annotations

import math
from typing import Any

import pytest

from mig_inference.solving.highs_core import highs_core
from mig_inference.solving.milp import Milp


def two_columns() -> Milp:
    """min x0 + 2 x1 with x0 + x1 >= 3, each in [0, 5]."""
    milp = Milp()
    first, second = milp.variable(cost=1.0, upper=5.0), milp.variable(cost=2.0, upper=5.0)
    milp.constrain({first: 1.0, second: 1.0}, lower=3.0)
    return milp


VARIANTS = [
    {0: (0.0, 0.0)},  # x0 off: x1 = 3
    {1: (0.0, 1.0)},  # x0 back to [0, 5]: x0 = 3
    {0: (0.0, 1.0), 1: (0.0, 1.0)},  # at most 2 in all: infeasible
    {},  # the program's own bounds
    {1: (2.0, 5.0)},  # x1 forced up: x0 = 1, x1 = 2
]


def test_each_variant_gives_what_its_own_relaxation_does() -> None:
    """Bounds a variant sets are undone for the next one that leaves them alone: each
    objective is that of a separate LP with the variant's bounds, None where it is
    infeasible."""
    milp = two_columns()
    separate = []
    for variant in VARIANTS:
        solution = milp.with_bounds(variant).solve(relax=True)
        separate.append(solution.objective if solution.values else None)
    together = milp.relaxed_objectives(VARIANTS)
    assert separate == [6.0, 3.0, None, 3.0, 5.0]
    assert together == pytest.approx(separate)


def test_the_program_keeps_its_bounds() -> None:
    milp = two_columns()
    milp.relaxed_objectives(VARIANTS)
    assert (milp.lower, milp.upper) == ([0.0, 0.0], [5.0, 5.0])


def test_no_variant_solves_nothing() -> None:
    assert two_columns().relaxed_objectives([]) == []


def test_a_relaxation_stopped_short_proves_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """A stop on a limit is neither a bound nor a proof of infeasibility: -inf, so the caller
    rules nothing out on it."""
    build = Milp._highs

    def limited(milp: Milp, *, relax: bool) -> Any:
        solver = build(milp, relax=relax)
        solver.setOptionValue("presolve", "off")
        solver.setOptionValue("simplex_iteration_limit", 0)
        return solver

    monkeypatch.setattr(Milp, "_highs", limited)
    assert two_columns().relaxed_objectives([{0: (0.0, 0.0)}]) == [-math.inf]


def test_unbounded_or_infeasible_proves_infeasibility_only_bounded_below(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """HiGHS's "unbounded or infeasible" proves infeasibility where the objective is bounded
    below: costs >= 0 and every lower bound finite, the variant's own included."""
    core = highs_core()
    build = Milp._highs

    class Undecided:
        def __init__(self, solver: Any) -> None:
            self.solver = solver

        def __getattr__(self, name: str) -> Any:
            return getattr(self.solver, name)

        def getModelStatus(self) -> Any:
            return core.HighsModelStatus.kUnboundedOrInfeasible

    def undecided(milp: Milp, *, relax: bool) -> Any:
        return Undecided(build(milp, relax=relax))

    monkeypatch.setattr(Milp, "_highs", undecided)
    variants = [{0: (-math.inf, 5.0)}, {}, {1: (1.0, 5.0)}]
    assert two_columns().relaxed_objectives(variants) == [-math.inf, None, None]
