"""Plain-text and JSON renderings of a packing plan."""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

from mig_inference.gpus.layout import Layout, slot_bar
from mig_inference.solving.packing import GpuSlot, PackPlan


def pack_json(plan: PackPlan) -> dict[str, Any]:
    names = plan.node_config_names()
    capacity = plan.capacity()
    return {
        "gpu_model": plan.gpu_model.name,
        "gpus": plan.gpu_count,
        "nodes": plan.node_count,
        "gpus_per_node": plan.gpus_per_node,
        "uniform_nodes": plan.uniform_nodes,
        "lower_bound": plan.lower_bound,
        "optimal": plan.optimal,
        "preferences": [
            {"stage": s.name, "value": s.value, "bound": s.bound, "proven": s.proven}
            for s in plan.preferences
        ],
        "preferences_proven": plan.refined_optimal,
        "layouts": [
            {
                "gpu": slot.index,
                "node": slot.node,
                "profiles": slot.layout.names(),
                "config": names[slot.node],
                "spare": slot.spare,
            }
            for slot in plan.gpus
        ],
        "assignments": [
            {"workload": a.workload, "gpu": a.gpu, "profile": a.profile, "start": a.start}
            for a in plan.assignments
        ],
        "capacity": {
            p.resource: capacity[p.name] for p in plan.gpu_model.profiles if capacity[p.name]
        },
        "stranded_mib": plan.stranded_mib(),
        "baselines": plan.baselines,
        "mig_parted": plan.mig_parted_config(),
        "seconds": round(plan.seconds, 4),
        "cpu_seconds": round(plan.cpu_seconds, 4),
        "demand": [
            {
                "workload": met.workload,
                "requests_per_second": met.requests_per_second,
                "served": met.served,
                "replicas": met.replicas,
            }
            for met in plan.demand_met()
        ],
    }


def pack_text(plan: PackPlan) -> str:
    gpu = plan.gpu_model
    lines = []
    spare = sum(1 for s in plan.gpus if s.spare)
    nodes = ""
    if plan.gpus_per_node:
        nodes = f" on {plan.node_count} node(s) of {plan.gpus_per_node} GPUs"
        nodes += f" ({spare} spare)" if spare else ""
    proof = "proven optimal" if plan.optimal else "not proven optimal (solver work limit)"
    lines.append(
        f"{gpu.name}: {plan.gpu_count} GPUs{nodes}; lower bound {plan.lower_bound}, {proof}"
    )
    if plan.baselines:
        lines.append(
            f"baselines: one replica per whole GPU {plan.baselines['one_per_gpu']}, "
            f"homogeneous all-<profile> pools {plan.baselines['homogeneous']}"
        )
    lines.append("")
    lines.append("layouts (memory slots left to right):")
    per_layout = Counter(s.layout for s in plan.gpus)
    first: dict[Layout, GpuSlot] = {}
    for slot in plan.gpus:
        first.setdefault(slot.layout, slot)
    tenants: dict[tuple[int, int], str] = {(a.gpu, a.start): a.workload for a in plan.assignments}
    for layout, count in per_layout.items():
        slot = first[layout]
        lines.append(f"  {count:>4} x {slot_bar(gpu, list(slot.placements))}  {layout}")
        users = [tenants.get((slot.index, p.start), "-") for p in slot.placements]
        lines.append(f"         e.g. GPU {slot.index}: " + ", ".join(users))
    lines.append("")
    lines.append("workloads:")
    placed: dict[str, Counter[str]] = defaultdict(Counter)
    for a in plan.assignments:
        placed[a.workload][a.profile] += 1
    width = max((len(n) for n in placed), default=8)
    for name, profiles in placed.items():
        spread = ", ".join(f"{c} x {p}" for p, c in profiles.items())
        gpus = len({a.gpu for a in plan.assignments if a.workload == name})
        lines.append(
            f"  {name:<{width}}  {sum(profiles.values()):>5} replicas: {spread} on {gpus} GPUs"
        )
    lines.append("")
    lines.append("node MIG configs (label nvidia.com/mig.config):")
    for name, count in Counter(plan.node_config_names()).items():
        lines.append(f"  {count:>4} node(s): {name}")
    met = plan.demand_met()
    if met:
        lines.append("\ndemand (replicas per profile chosen by the planner):")
        for m in met:
            parts = " + ".join(f"{n} x {profile}" for profile, n in m.replicas.items())
            lines.append(
                f"  {m.workload}: {m.requests_per_second:g} requests/s, served {m.served:g}/s "
                f"by {parts}"
            )
    lines.append(f"\nplanned in {plan.seconds:.2f} s ({plan.cpu_seconds:.2f} s of CPU)")
    return "\n".join(lines)
