"""From a solved plan (GPUs per layout, replicas per profile) to GPUs in nodes and a slice for
every replica. Linear in the GPUs and replicas: one placement per distinct layout, shared by its
GPUs, and free slices handed out in one pass."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence

from msgspec import Struct

from mig_inference.gpus.catalog import GpuModel
from mig_inference.gpus.layout import Layout, Placement, place
from mig_inference.solving.model import Model, Problem


class GpuSlot(Struct, frozen=True):
    """One GPU of the plan."""

    index: int
    node: int
    layout: Layout
    placements: tuple[Placement, ...]
    spare: bool = False
    """A GPU the plan does not need, on a node that has it anyway; it gets a layout too."""


class Assignment(Struct, frozen=True):
    workload: str
    gpu: int
    profile: str
    start: int


def node_sequence(counts: Mapping[Layout, int], deployed: Sequence[Layout] = ()) -> list[Layout]:
    """The layout of each GPU of a node holding `counts` GPUs per layout: a GPU that keeps its
    deployed layout (`deployed`, by GPU index) stays at its index; the others follow in the
    order of `counts`."""
    left = Counter(counts)
    sequence: list[Layout | None] = []
    width = sum(counts.values())
    for layout in list(deployed)[:width] if len(deployed) == width else ():
        if left[layout] > 0:
            left[layout] -= 1
            sequence.append(layout)
        else:
            sequence.append(None)
    sequence += [None] * (width - len(sequence))
    rest = iter([layout for layout in counts for _ in range(left[layout])])
    return [layout if layout is not None else next(rest) for layout in sequence]


def realize(
    problem: Problem,
    model: Model,
    values: Sequence[float],
    *,
    nodes: int | None = None,
    gpus_per_node: int | None = None,
    members: Sequence[Sequence[int]] | None = None,
    deployed: Sequence[Layout] = (),
) -> tuple[list[GpuSlot], list[Assignment]]:
    """GPUs and assignments of a plan. With `nodes` (identical nodes), x[L] counts the GPUs of
    one node and every node repeats the same per-GPU layout sequence, keeping the `deployed`
    one's GPUs at their index; otherwise x[L] counts GPUs of the whole fleet, grouped
    `gpus_per_node` to a node. `model` may be over groups of workloads (`members` gives each
    group's workloads): a group's replicas of each profile go to its workloads in fleet order.
    Replicas take free slices of their profile, consecutive picks on different GPUs."""
    gpu, workloads = problem.gpu, problem.workloads
    counts = {layout: round(values[var]) for layout, var in model.x.items() if values[var] > 0.5}
    per_unit = node_sequence(counts, deployed if nodes is not None else ())
    placements = {layout: tuple(place(gpu, layout)) for layout in counts}
    if nodes is not None:
        width, sequence = len(per_unit), per_unit * nodes
    else:
        width, sequence = gpus_per_node or len(per_unit) or 1, per_unit
    slots = [
        GpuSlot(index, index // width, layout, placements[layout])
        for index, layout in enumerate(sequence)
    ]
    groups = members or [[w] for w in range(len(workloads))]
    split = _split(model, values, groups, [w.replicas for w in workloads])
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


def _split(
    model: Model,
    values: Sequence[float],
    members: Sequence[Sequence[int]],
    replicas: Sequence[int],
) -> dict[tuple[int, str], int]:
    """Replicas per (workload, profile): a group's replicas of each profile go to its
    workloads in fleet order."""
    split: dict[tuple[int, str], int] = {}
    left = list(replicas)
    for (group, name), var in model.y.items():
        count = round(values[var])
        if len(members[group]) == 1:
            if count:
                split[(members[group][0], name)] = count
            continue
        for w in members[group]:
            take = min(count, left[w])
            if take:
                split[(w, name)] = take
                left[w] -= take
                count -= take
    return split


def pad_last_node(gpu: GpuModel, slots: list[GpuSlot], gpus_per_node: int | None) -> list[GpuSlot]:
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
