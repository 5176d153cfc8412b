"""Who sits on which slice, and an SVG picture of every distinct layout with its replicas.

One row per distinct GPU layout of a pool, saying how many GPUs have it. Each slice shows its
profile and a band split by the services whose replicas hold that slice on those GPUs (and how
many are free); a legend names every service with its replicas, free slices, memory no instance
of the layout can use, and `+me`.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections import Counter, defaultdict
from collections.abc import Mapping

from msgspec import Struct

from mig_inference.gpus.layout import Layout, place
from mig_inference.plan import PoolPlan, StackPlan

SLOT_WIDTH = 92
BAR_HEIGHT = 46
BAND_HEIGHT = 14
ROW_GAP = 30
MARGIN = 20
PALETTE = ("#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#9c755f")
FREE = "#c8c8c8"
UNUSABLE = "#3a3a3a"
SLICE = "#6b6b6b"
FREE_NAME = "free"


def slice_tenants(plan: StackPlan, pool: PoolPlan) -> dict[tuple[int, int, int], str]:
    """(node, gpu, start) -> service name, filling slices in node/GPU order as replicas land.

    Kubernetes decides the real placement; this shows one that the capacity allows."""
    free: dict[str, list[tuple[int, int, int]]] = defaultdict(list)
    for node in range(pool.max_nodes):
        for gpu, layout in enumerate(pool.per_gpu_layouts):
            if layout is None:
                free[pool.offers[-1].resource].append((node, gpu, 0))
                continue
            for placement in place(pool.gpu, layout):
                offer = pool.offer(placement.profile)
                assert offer is not None
                free[offer.resource].append((node, gpu, placement.start))
    tenants: dict[tuple[int, int, int], str] = {}
    for service in plan.services:
        if service.pool is not pool:
            continue
        for slot in free[service.resource][: service.replicas]:
            tenants[slot] = service.name
        del free[service.resource][: service.replicas]
    return tenants


class _Cell(Struct):
    start: int
    size: int
    profile: str
    holders: Counter[str]
    """Service (or `free`) -> how many of the row's GPUs give it this slice."""


class _Row(Struct):
    title: str
    cells: list[_Cell]
    memory_slices: int


def _rows(plan: StackPlan) -> list[_Row]:
    rows = []
    for pool in plan.pools:
        tenants = slice_tenants(plan, pool)
        for layout in dict.fromkeys(pool.per_gpu_layouts):
            indexes = [i for i, each in enumerate(pool.per_gpu_layouts) if each == layout]
            gpus = len(indexes) * pool.max_nodes
            nodes = f"{pool.max_nodes} node(s) x {len(indexes)}"
            rows.append(
                _Row(
                    f"{pool.name}: {gpus} x {pool.gpu.name} ({nodes}) as "
                    f"{layout if layout is not None else 'whole GPUs (MIG disabled)'}"
                    f"{', each slice claimed through DRA' if pool.dra else ''}",
                    _cells(pool, layout, indexes, tenants),
                    pool.gpu.memory_slices,
                )
            )
    return rows


def _cells(
    pool: PoolPlan,
    layout: Layout | None,
    indexes: list[int],
    tenants: dict[tuple[int, int, int], str],
) -> list[_Cell]:
    placements = (
        [(0, pool.gpu.memory_slices, "whole GPU")]
        if layout is None
        else [(p.start, p.size, p.profile) for p in place(pool.gpu, layout)]
    )
    cells = []
    for start, size, profile in placements:
        holders: Counter[str] = Counter(
            tenants.get((node, gpu, start), FREE_NAME)
            for node in range(pool.max_nodes)
            for gpu in indexes
        )
        cells.append(_Cell(start, size, profile, holders))
    return cells


def layouts_svg(plan: StackPlan) -> str:
    """Every pool's distinct GPU layouts as slot bars, each slice split by who holds it."""
    rows = _rows(plan)
    services = {s.name: s.replicas for s in plan.services}
    colors = {name: PALETTE[i % len(PALETTE)] for i, name in enumerate(services)}
    colors[FREE_NAME] = FREE
    slots = max((row.memory_slices for row in rows), default=8)
    width = slots * SLOT_WIDTH + 2 * MARGIN
    legend = _legend(plan, rows, services)
    height = MARGIN * 2 + 24 + len(rows) * (BAR_HEIGHT + ROW_GAP + 18) + 22 * len(legend)
    svg = ET.Element(
        "svg", xmlns="http://www.w3.org/2000/svg", width=str(width), height=str(height),
        viewBox=f"0 0 {width} {height}", style="font-family:sans-serif",
    )  # fmt: skip
    ET.SubElement(svg, "title").text = f"MIG layouts of stack {plan.spec.stack}"
    ET.SubElement(svg, "rect", x="0", y="0", width=str(width), height=str(height), fill="#ffffff")
    heading = ET.SubElement(svg, "text", x=str(MARGIN), y=str(MARGIN + 8),
                            style="font-size:15px;font-weight:bold")  # fmt: skip
    heading.text = f"stack {plan.spec.stack}: one bar = one GPU; memory slots left to right"
    y = MARGIN + 30
    for row in rows:
        ET.SubElement(
            svg, "text", x=str(MARGIN), y=str(y + 12), style="font-size:13px"
        ).text = row.title
        y += 18
        _bar(svg, row, y, colors)
        y += BAR_HEIGHT + ROW_GAP
    for swatch, text in legend:
        ET.SubElement(svg, "rect", x=str(MARGIN), y=str(y), width="14", height="14",
                      fill=colors.get(swatch, swatch), stroke="#000000")  # fmt: skip
        ET.SubElement(svg, "text", x=str(MARGIN + 22), y=str(y + 12),
                      style="font-size:12px").text = text  # fmt: skip
        y += 22
    return ET.tostring(svg, encoding="unicode")


def _bar(svg: ET.Element, row: _Row, y: int, colors: Mapping[str, str]) -> None:
    covered = {slot for cell in row.cells for slot in range(cell.start, cell.start + cell.size)}
    for slot in range(row.memory_slices):
        if slot not in covered:
            ET.SubElement(svg, "rect", x=str(MARGIN + slot * SLOT_WIDTH), y=str(y),
                          width=str(SLOT_WIDTH), height=str(BAR_HEIGHT), fill=UNUSABLE,
                          stroke="#ffffff")  # fmt: skip
    for cell in row.cells:
        x = MARGIN + cell.start * SLOT_WIDTH
        cell_width = cell.size * SLOT_WIDTH
        outline = ET.SubElement(svg, "rect", x=str(x), y=str(y), width=str(cell_width),
                                height=str(BAR_HEIGHT), fill=SLICE, stroke="#ffffff")  # fmt: skip
        outline.set("stroke-width", "2")
        label = ET.SubElement(svg, "text", x=str(x + 6), y=str(y + 16),
                              style="font-size:12px;fill:#ffffff;font-weight:bold")  # fmt: skip
        label.text = cell.profile
        total = sum(cell.holders.values())
        offset = 0.0
        for holder, count in sorted(cell.holders.items(), key=lambda h: (h[0] == FREE_NAME, h[0])):
            band = (cell_width - 4) * count / total
            ET.SubElement(svg, "rect", x=f"{x + 2 + offset:.1f}",
                          y=str(y + BAR_HEIGHT - BAND_HEIGHT - 4), width=f"{band:.1f}",
                          height=str(BAND_HEIGHT), fill=colors[holder])  # fmt: skip
            if band > 28:
                text = ET.SubElement(svg, "text", x=f"{x + 5 + offset:.1f}",
                                     y=str(y + BAR_HEIGHT - 7),
                                     style="font-size:10px;fill:#000000")  # fmt: skip
                text.text = f"x{count}"
            offset += band


def _legend(plan: StackPlan, rows: list[_Row], services: dict[str, int]) -> list[tuple[str, str]]:
    entries = [
        (name, f"{name}: {replicas} replica(s) on pool {plan.pool_of(name)}")
        for name, replicas in services.items()
    ]
    entries.append((FREE_NAME, "free: slices no replica holds (x N = on N of the row's GPUs)"))
    if any(
        {s for c in row.cells for s in range(c.start, c.start + c.size)}
        != set(range(row.memory_slices))
        for row in rows
    ):
        entries.append((UNUSABLE, "memory no instance of that layout can use"))
    if any("+me" in cell.profile for row in rows for cell in row.cells):
        entries.append(
            (SLICE, "+me, +me.all: the instance also holds the GPU's media engines (one per GPU)")
        )
    return entries
