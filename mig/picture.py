"""Who sits on which slice, and an SVG picture of every distinct layout with its replicas."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections import defaultdict

from mig.layout import place
from mig.plan import PoolPlan, StackPlan

SLOT_WIDTH = 88
ROW_HEIGHT = 34
PALETTE = ("#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#9c755f")


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


def layouts_svg(plan: StackPlan) -> str:
    """Every pool's distinct GPU layouts as slot bars, each slice labelled with its tenant."""
    colors: dict[str, str] = {}
    rows: list[tuple[str, list[tuple[int, int, str, str]]]] = []
    for pool in plan.pools:
        tenants = slice_tenants(plan, pool)
        seen: set[object] = set()
        for gpu, layout in enumerate(pool.per_gpu_layouts):
            if layout in seen:
                continue
            seen.add(layout)
            count = sum(1 for each in pool.per_gpu_layouts if each == layout) * pool.max_nodes
            title = f"{pool.name}: {count} x {pool.gpu.name} as {layout or 'MIG disabled'}"
            cells = []
            for placement in place(pool.gpu, layout) if layout else []:
                tenant = tenants.get((0, gpu, placement.start), "free")
                colors.setdefault(
                    tenant, "#d9d9d9" if tenant == "free" else PALETTE[len(colors) % len(PALETTE)]
                )
                cells.append((placement.start, placement.size, placement.profile, tenant))
            rows.append((title, cells))
    width = 8 * SLOT_WIDTH + 40
    height = len(rows) * (ROW_HEIGHT * 2 + 12) + 40
    svg = ET.Element(
        "svg",
        xmlns="http://www.w3.org/2000/svg",
        width=str(width),
        height=str(height),
        viewBox=f"0 0 {width} {height}",
        style="font-family:sans-serif",
    )
    ET.SubElement(svg, "title").text = f"MIG layouts of stack {plan.spec.stack}"
    y = 20
    for title, cells in rows:
        ET.SubElement(svg, "text", x="20", y=str(y + 14), style="font-size:13px").text = title
        y += ROW_HEIGHT - 8
        for slot in range(8):
            ET.SubElement(
                svg, "rect", x=str(20 + slot * SLOT_WIDTH), y=str(y), width=str(SLOT_WIDTH),
                height=str(ROW_HEIGHT), fill="#222222", stroke="#ffffff",
            )  # fmt: skip
        for start, size, profile, tenant in cells:
            x = 20 + start * SLOT_WIDTH
            ET.SubElement(
                svg, "rect", x=str(x), y=str(y), width=str(size * SLOT_WIDTH),
                height=str(ROW_HEIGHT), fill=colors[tenant], stroke="#ffffff", rx="3",
            )  # fmt: skip
            label = ET.SubElement(
                svg, "text", x=str(x + 6), y=str(y + 14), style="font-size:11px;fill:#fff"
            )
            label.text = profile
            who = ET.SubElement(
                svg, "text", x=str(x + 6), y=str(y + 28), style="font-size:10px;fill:#fff"
            )
            who.text = tenant
        y += ROW_HEIGHT + 20
    return ET.tostring(svg, encoding="unicode")
