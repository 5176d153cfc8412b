"""The cheapest machine type for a fleet: pack it onto whole nodes of each candidate machine
and compare nodes x $/hour.

Candidates are machine types named by the user, or every priced machine of one cloud. Each is
packed with the planner (`packing.pack`) for its GPU model with its GPU count per node; a
machine whose GPU model cannot hold some workload (no such profile, no slice large enough, no
MIG) is reported infeasible with the reason, and a machine not sold as the asked capacity
(on-demand, spot, reservation, capacity block, flex-start: the per-machine facts), or without a
price for it, is skipped with a note.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

from msgspec import Struct, field

from mig_inference.clouds import Cloud, known_machine
from mig_inference.clouds.capacity import Capacity
from mig_inference.clouds.prices import MachinePrice, known_machines, why_not_priced
from mig_inference.errors import MigError
from mig_inference.gpus.catalog import resolve_gpu
from mig_inference.solving.packing import PackPlan, Workload, check_unique_names, pack

PRICED_CLOUDS = (Cloud.GKE, Cloud.EKS, Cloud.OKE)


class Candidate(Struct, frozen=True):
    """One machine type packed with the fleet, or why it cannot hold it."""

    price: MachinePrice
    per_node: float
    """$/hour of one machine at the asked kind of price (on-demand or spot)."""
    spot: bool
    plan: PackPlan | None = None
    """The packing on whole machines; None when infeasible."""
    infeasible_reason: str | None = None

    @property
    def machine(self) -> str:
        return self.price.machine

    @property
    def gpus_per_node(self) -> int:
        return self.price.gpus

    @property
    def feasible(self) -> bool:
        return self.plan is not None

    @property
    def nodes(self) -> int | None:
        return self.plan.node_count if self.plan is not None else None

    @property
    def gpus(self) -> int | None:
        """GPUs the fleet uses (spare GPUs of the last node not counted)."""
        return self.plan.gpu_count if self.plan is not None else None

    @property
    def total_per_hour(self) -> float | None:
        """Whole nodes x $/hour of one node."""
        return self.plan.node_count * self.per_node if self.plan is not None else None

    @property
    def optimal(self) -> bool | None:
        """The node count is proven minimal (fewest GPUs proven, or fewest uniform nodes)."""
        return self.plan.optimal if self.plan is not None else None

    @property
    def lower_bound(self) -> int | None:
        """Lower bound on the GPUs the fleet needs on this GPU model."""
        return self.plan.lower_bound if self.plan is not None else None

    @property
    def nodes_lower_bound(self) -> int | None:
        if self.plan is None:
            return None
        return max(1, math.ceil(self.plan.lower_bound / self.gpus_per_node))


class Skipped(Struct, frozen=True):
    """A machine type left out of the comparison: no price for the asked kind."""

    machine: str
    reason: str


class CostChoice(Struct):
    """Candidates sorted cheapest first (infeasible ones last), and the choice."""

    candidates: list[Candidate]
    spot: bool
    skipped: list[Skipped] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    capacity: Capacity = Capacity.ON_DEMAND
    """The capacity choice priced."""

    @property
    def choice(self) -> Candidate | None:
        """The cheapest feasible candidate (ties: fewer nodes, then machine name)."""
        return next((c for c in self.candidates if c.feasible), None)

    @property
    def proven(self) -> bool:
        """There is a choice and every feasible candidate's node count is proven minimal, so
        the choice is the cheapest."""
        return self.choice is not None and all(c.optimal for c in self.candidates if c.feasible)

    def used_prices(self) -> list[MachinePrice]:
        return [c.price for c in self.candidates]


def rank_key(candidate: Candidate) -> tuple[int, float, int, str]:
    """Sort order: feasible first, then total $/hour, fewer nodes, machine name."""
    if candidate.total_per_hour is None or candidate.nodes is None:
        return (1, 0.0, 0, candidate.machine)
    return (0, round(candidate.total_per_hour, 6), candidate.nodes, candidate.machine)


def _parse_cloud(cloud: Cloud | str) -> Cloud:
    names = [c.value for c in PRICED_CLOUDS]
    try:
        parsed = Cloud(str(cloud).lower())
    except ValueError:
        parsed = None
    if parsed not in PRICED_CLOUDS:
        raise MigError(
            f"unknown cloud {cloud!r}; allowed: {', '.join(names)}",
            "--cloud",
            value=str(cloud),
            allowed=names,
        )
    assert parsed is not None
    return parsed


def select_machines(
    prices: Mapping[str, MachinePrice],
    machines: Iterable[str] = (),
    cloud: Cloud | str | None = None,
) -> list[MachinePrice | Skipped]:
    """The machine types to compare: the ones named (in order, each once), then every machine
    of `cloud` in the price table. Named machines the project does not know are refused; known
    ones without a price entry come back as Skipped."""
    known = known_machines()
    chosen: dict[str, MachinePrice | Skipped] = {}
    by_lower = {name.lower(): name for name in known}
    for raw in machines:
        name = by_lower.get(raw.strip().lower())
        if name is None:
            names = sorted(known, key=str.lower)
            raise MigError(
                f"unknown machine type {raw.strip()!r}; known: {', '.join(names)}",
                "--machines",
                value=raw,
                allowed=names,
            )
        if name in chosen:
            continue
        price = prices.get(name)
        chosen[name] = (
            price
            if price is not None
            else Skipped(name, "not in the price table; give its price with --prices FILE")
        )
    if cloud is not None:
        wanted = _parse_cloud(cloud)
        for name, price in sorted(prices.items(), key=lambda item: item[0].lower()):
            if price.cloud is wanted:
                chosen.setdefault(name, price)
    if not chosen:
        raise MigError("no machine types to compare: name some, or a cloud", "--machines")
    return list(chosen.values())


def cheapest_machine(
    workloads: Sequence[Workload],
    prices: Mapping[str, MachinePrice],
    *,
    machines: Iterable[str] = (),
    cloud: Cloud | str | None = None,
    spot: bool = False,
    uniform_nodes: bool = False,
    capacity: Capacity | None = None,
) -> CostChoice:
    """Pack `workloads` onto whole nodes of every candidate machine and rank them by
    nodes x $/hour bought as `capacity` (default on-demand; `spot` is `capacity=SPOT`)."""
    kind = capacity if capacity is not None else Capacity.SPOT if spot else Capacity.ON_DEMAND
    spot = kind is Capacity.SPOT
    if not workloads:
        raise MigError("no workloads to place")
    check_unique_names(workloads)
    selected = select_machines(prices, machines, cloud)
    skipped = [s for s in selected if isinstance(s, Skipped)]
    priced: list[tuple[MachinePrice, float]] = []
    for entry in selected:
        if isinstance(entry, Skipped):
            continue
        known = known_machine(entry.cloud, entry.machine)
        facts = known.facts if known else None
        if facts is not None and kind not in facts.capacity:
            choices = ", ".join(facts.capacity)
            skipped.append(Skipped(entry.machine, f"not sold as {kind} (its choices: {choices})"))
            continue
        per_node = entry.price_of(kind)
        if per_node is None:
            skipped.append(Skipped(entry.machine, why_not_priced(entry.machine, kind, entry)))
        else:
            priced.append((entry, per_node))
    if not priced:
        names = ", ".join(s.machine for s in skipped)
        flag = "--spot" if spot and capacity is None else "--capacity" if capacity else "--prices"
        raise MigError(
            f"no {kind} price for any candidate machine ({names}); give prices with --prices FILE",
            flag,
        )
    plans: dict[tuple[str, int], PackPlan | MigError] = {}
    candidates = []
    for price, per_node in priced:
        key = (price.gpu_model, price.gpus)
        if key not in plans:
            plans[key] = _pack_on(price, workloads, uniform_nodes)
        plan = plans[key]
        if isinstance(plan, MigError):
            candidates.append(Candidate(price, per_node, spot, None, str(plan)))
        else:
            candidates.append(Candidate(price, per_node, spot, plan))
    candidates.sort(key=rank_key)
    result = CostChoice(candidates, spot, skipped, capacity=kind)
    result.notes.extend(_notes(result))
    return result


def _pack_on(
    price: MachinePrice, workloads: Sequence[Workload], uniform: bool
) -> PackPlan | MigError:
    """The planner's packing on whole machines, or the error that makes the machine infeasible."""
    try:
        gpu = resolve_gpu(price.gpu_model)
        return pack(
            gpu, workloads, gpus_per_node=price.gpus, uniform_nodes=uniform, baselines=False
        )
    except MigError as error:
        return error


def _notes(result: CostChoice) -> list[str]:
    notes = [f"{s.machine}: skipped, {s.reason}" for s in result.skipped]
    choice = result.choice
    if choice is None:
        return notes
    for candidate in result.candidates:
        if candidate.feasible and not candidate.optimal:
            notes.append(
                f"{candidate.machine}: fewest nodes not proven (solver work limit); at least "
                f"{candidate.nodes_lower_bound}, so its cost may be lower"
            )
    tied = [
        c.machine
        for c in result.candidates[1:]
        if c.total_per_hour is not None
        and choice.total_per_hour is not None
        and round(c.total_per_hour, 6) == round(choice.total_per_hour, 6)
    ]
    if tied:
        notes.append(
            f"tie at ${choice.total_per_hour:,.2f}/h with {', '.join(tied)}: chose "
            f"{choice.machine} (fewer nodes, then name)"
        )
    if choice.price.weak:
        notes.append(
            f"{choice.machine}: the price comes from a weak source ({choice.price.source}); "
            "check it or give your own with --prices FILE"
        )
    return notes
