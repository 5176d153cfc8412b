"""Plain-text and JSON renderings of the cheapest machine type for a fleet (`pack --machines` or
`--cloud`)."""

from __future__ import annotations

from mig_inference.reports.packing import pack_json
from mig_inference.solving.cheapest import CostChoice


def _money(value: float) -> str:
    return f"{value:,.2f}"


def cost_text(result: CostChoice, layouts_command: str = "pack FLEET") -> str:
    """The candidates table, cheapest first, the choice, the price sources and notes;
    `layouts_command` is how to see the chosen plan's layouts (the machine's flags follow)."""
    kind = str(result.capacity)
    width = max([len("machine"), *(len(c.machine) for c in result.candidates)])
    header = (
        f"{'machine':<{width}}  cloud  {'gpu':<11} {'gpus/node':>9} {'nodes':>5} {'gpus':>5} "
        f"{'$/node-h':>10} {'$/h total':>11}  proven"
    )
    lines = [f"{kind} $/hour of whole machines, cheapest first:", header]
    for c in result.candidates:
        node_price = _money(c.per_node) + ("*" if c.price.weak else " ")
        if c.plan is None or c.total_per_hour is None:
            lines.append(
                f"{c.machine:<{width}}  {c.price.cloud.value:<5}  {c.price.gpu_model:<11} "
                f"{c.gpus_per_node:>9} {'-':>5} {'-':>5} {node_price:>10} {'-':>11}  "
                f"infeasible: {c.infeasible_reason}"
            )
            continue
        lines.append(
            f"{c.machine:<{width}}  {c.price.cloud.value:<5}  {c.price.gpu_model:<11} "
            f"{c.gpus_per_node:>9} {c.nodes:>5} {c.gpus:>5} {node_price:>10} "
            f"{_money(c.total_per_hour):>11}  {'yes' if c.optimal else 'no'}"
        )
    if any(c.price.weak for c in result.candidates):
        lines.append("* weak source: a third-party copy or internally inconsistent")
    lines.append("")
    choice = result.choice
    if choice is not None and choice.plan is not None and choice.total_per_hour is not None:
        proof = "proven cheapest" if result.proven else "cheapest found, not proven (see notes)"
        lines.append(
            f"choice: {choice.machine} ({choice.price.cloud.value}, {choice.gpus_per_node} x "
            f"{choice.price.gpu_model}): {choice.nodes} node(s) x ${_money(choice.per_node)}/h = "
            f"${_money(choice.total_per_hour)}/h {kind}, {choice.gpus} GPUs used; {proof}"
        )
        uniform = " --uniform-nodes" if choice.plan.uniform_nodes else ""
        lines.append(
            f"  its layouts: {layouts_command} --gpu {choice.price.gpu_model} "
            f"--gpus-per-node {choice.gpus_per_node}{uniform}"
        )
    else:
        lines.append("choice: none, no candidate machine holds the fleet")
    lines.append("")
    lines.append("prices used (as the sources state them):")
    groups: dict[tuple[str, str, str, bool], list[str]] = {}
    for price in result.used_prices():
        where = price.region or "region not stated"
        origin = "your price file" if price.overridden else "shipped table"
        groups.setdefault((price.source, price.date, f"{where}; {origin}", price.weak), []).append(
            price.machine
        )
    for (source, date, where, weak), machines in groups.items():
        mark = " (weak)" if weak else ""
        dated = "" if date in source else f"; dated {date}"
        lines.append(f"  {', '.join(machines)}: {source}{dated}; {where}{mark}")
    if result.notes:
        lines.append("")
        lines.append("notes:")
        lines.extend(f"  {note}" for note in result.notes)
    return "\n".join(lines)


def cost_json(result: CostChoice) -> dict[str, object]:

    choice = result.choice
    return {
        "choice": choice.machine if choice is not None else None,
        "spot": result.spot,
        "capacity": str(result.capacity),
        "proven": result.proven,
        "candidates": [
            {
                "machine": c.machine,
                "cloud": c.price.cloud.value,
                "gpu_model": c.price.gpu_model,
                "gpus_per_node": c.gpus_per_node,
                "nodes": c.nodes,
                "gpus": c.gpus,
                "price_per_hour": c.per_node,
                "total_per_hour": (
                    round(c.total_per_hour, 6) if c.total_per_hour is not None else None
                ),
                "spot": c.spot,
                "optimal": c.optimal,
                "lower_bound": c.lower_bound,
                "nodes_lower_bound": c.nodes_lower_bound,
                "infeasible_reason": c.infeasible_reason,
            }
            for c in result.candidates
        ],
        "skipped": [{"machine": s.machine, "reason": s.reason} for s in result.skipped],
        "prices": {
            p.machine: {
                "on_demand": p.on_demand,
                "spot": p.spot,
                "reservation": p.reservation,
                "capacity_block": p.capacity_block,
                "flex_start": p.flex_start,
                "region": p.region,
                "date": p.date,
                "source": p.source,
                "weak": p.weak,
                "note": p.note,
                "overridden": p.overridden,
            }
            for p in result.used_prices()
        },
        "notes": result.notes,
        "plan": pack_json(choice.plan) if choice is not None and choice.plan is not None else None,
    }
