"""Plain-text and JSON renderings of a stack plan (`python -m mig plan`)."""

from __future__ import annotations

from typing import Any

from mig_inference.clouds import Cloud
from mig_inference.clouds.capacity import CAPACITY_BLOCK_END, Arch, Capacity
from mig_inference.clouds.storage import storage_facts
from mig_inference.gpus.layout import place, slot_bar
from mig_inference.kube.dra import allocation_text, claim_json
from mig_inference.plan import PoolPlan, StackPlan, layout_of, utilization
from mig_inference.plan.addons import addons_text, needed_addons
from mig_inference.plan.demand import demand_served
from mig_inference.plan.startup import LoadEstimate, estimate
from mig_inference.reports.gateway import gateway_json, gateway_text
from mig_inference.spec import Rollout, SharingStrategy
from mig_inference.verify.targets import slice_profile, verify_targets

UNCONFIRMED = "unconfirmed"
FACT_NAMES = {"boot_disks": "boot disks", "max_pods": "max pods ceiling",
              "arch": "CPU architecture", "native_mig": "native MIG",
              "capacity": "capacity choices"}  # fmt: skip


def _machine_json(pool: PoolPlan) -> dict[str, Any] | None:
    """The machine table's row behind the pool, each fact with its source and whether it was
    confirmed here."""
    machine = pool.machine
    if machine is None or machine.facts is None:
        return None
    facts = machine.facts
    return {
        "arch": facts.arch.value,
        "capacity": [str(c) for c in facts.capacity],
        "capacity_rule": facts.capacity_rule or None,
        "native_mig": facts.native_mig,
        "boot_disks": list(facts.boot_disks),
        "max_pods": facts.max_pods,
        "vcpus": machine.vcpus or None,
        "memory_gib": machine.memory_gib or None,
        "sources": facts.sources(),
        "unconfirmed": list(facts.unconfirmed),
        "capacity_block_ends": CAPACITY_BLOCK_END
        if pool.spec.capacity is Capacity.CAPACITY_BLOCK
        else None,
    }


def _doubt(pool: PoolPlan, fact: str) -> str:
    facts = pool.machine.facts if pool.machine else None
    return f" ({UNCONFIRMED})" if facts is not None and facts.is_unconfirmed(fact) else ""


def _machine_text(pool: PoolPlan) -> list[str]:
    """The pool's capacity, boot disk and node facts, each unconfirmed one marked so."""
    if pool.cloud is Cloud.EXISTING:
        return []
    reserved = f" {pool.spec.reservation}" if pool.spec.reservation else ""
    disk = f"; boots from {pool.boot_disk}{_doubt(pool, 'boot_disks')}" if pool.boot_disk else ""
    chosen = f"{pool.spec.capacity}{_doubt(pool, f'capacity:{pool.spec.capacity}')}"
    lines = [f"  capacity: {chosen}{reserved}{disk}"]
    if pool.spec.capacity is Capacity.CAPACITY_BLOCK:
        lines.append(f"  when the block ends: {CAPACITY_BLOCK_END}")
    machine = pool.machine
    if machine is None or machine.facts is None:
        lines.append("  machine: not in the project's table (given with gpusPerNode): no facts")
        return lines
    facts = machine.facts
    node = f"{machine.vcpus} vCPUs, {machine.memory_gib} GiB" if machine.vcpus else (
        "vCPUs and memory unknown")  # fmt: skip
    arch = f"{facts.arch}{_doubt(pool, 'arch')}"
    if facts.arch is Arch.ARM64:
        arch += ": every pod here tolerates kubernetes.io/arch and needs an arm64 image"
    lines.append(f"  machine: {node}; {arch}")
    doubtful = [FACT_NAMES.get(f, f) for f in facts.unconfirmed if not f.startswith("capacity:")]
    if doubtful:
        lines.append(
            f"  {UNCONFIRMED} here: {', '.join(doubtful)} (not re-read from their sources; "
            "`plan --json` names each)"
        )
    return lines


def _pool_json(pool: PoolPlan) -> dict[str, Any]:
    return {
        "allocation": pool.spec.allocation.value,
        "name": pool.name,
        "gpu": pool.gpu.name,
        "machine_type": pool.machine.name if pool.machine else None,
        "gpus_per_node": pool.gpus_per_node,
        "nodes": {"min": pool.min_nodes, "max": pool.max_nodes},
        "zones": list(pool.zones),
        "nodes_per_zone": pool.nodes_per_zone if pool.cloud is Cloud.GKE else None,
        "bought_as": str(pool.spec.capacity) if pool.cloud is not Cloud.EXISTING else None,
        "reservation": pool.spec.reservation,
        "boot_disk": pool.boot_disk,
        "machine": _machine_json(pool),
        "generation": pool.generation,
        "physical_name": pool.physical_name,
        "rollout": pool.rollout.value,
        "replacement_inputs": sorted(pool.replacement_inputs),
        "mig_manager": pool.mig_manager.value,
        "layout": layout_of(pool),
        "builtin_config": pool.builtin_config,
        "auto": {
            "gpus": pool.pack_plan.gpu_count,
            "lower_bound": pool.pack_plan.lower_bound,
            "optimal": pool.pack_plan.optimal,
            "preferences_proven": pool.pack_plan.refined_optimal,
            "mig_prefer": mig_prefer(pool),
            "kept_gpus_per_node": pool.pack_plan.kept_gpus,
        }
        if pool.pack_plan is not None
        else None,
        "capacity_per_node": pool.capacity_per_node(),
        "capacity": pool.capacity(),
        "node_labels": dict(pool.node_labels),
        "node_selector": dict(pool.node_selector),
        "tolerations": [dict(t) for t in pool.tolerations],
        "max_pods": {
            "configured": pool.max_pods,
            "required": pool.max_pods_required,
            "breakdown": pool.max_pods_breakdown,
        },
    }


def _load_json(plan: StackPlan, name: str) -> dict[str, Any]:
    load = plan.load[name]
    hub = hub_alone(plan, name)
    return {
        "source": load.source,
        "bytes_per_replica": load.bytes_per_replica,
        "bytes_source": load.weights.source if load.weights else None,
        "nodes": load.nodes,
        "populate_seconds": round(load.populate_seconds),
        "first_ready_seconds": round(load.first_ready_seconds),
        "all_ready_seconds": round(load.all_ready_seconds),
        "replica_seconds": round(load.replica_seconds),
        "startup_probe_seconds": load.startup_probe_seconds,
        "hub_bytes_per_start": load.hub_bytes_per_start,
        "hub_bytes_fill": load.hub_bytes_fill,
        "hub_bytes_first_up": load.hub_bytes_first_up(),
        "without_cache": {
            "all_ready_seconds": round(hub.all_ready_seconds),
            "hub_bytes_first_up": hub.hub_bytes_first_up(),
        },
        "unconfirmed": list(load.unconfirmed),
    }


def hub_alone(plan: StackPlan, name: str) -> LoadEstimate:
    """The same service's estimate with every replica downloading from the hub."""
    service = next(s for s in plan.services if s.name == name)
    cache = plan.spec.model_cache
    return estimate(service, None, cache.hub_mb_per_s if cache else None)


def _cache_json(plan: StackPlan) -> dict[str, Any] | None:
    cache = plan.model_cache
    if cache is None:
        return None
    return {
        "storage": cache.storage.value,
        "size_gib": cache.size_gib,
        "bucket": cache.bucket,
        "bucket_owned": cache.bucket_owned,
        "zone": cache.zone,
        "stream": cache.spec.stream,
        "models": [
            {
                "model": m.model,
                "revision": m.revision,
                "bytes": m.weights.bytes,
                "path": m.mount_path,
                "namespaces": list(m.namespaces),
                "services": list(m.services),
            }
            for m in cache.models
        ],
        "uncached": dict(cache.uncached),
        "facts": [
            {"fact": f.fact, "value": f.value, "source": f.source, UNCONFIRMED: not f.confirmed}
            for f in storage_facts(plan.spec.cloud, cache.storage.value)
        ],
    }


def cache_facts_text(plan: StackPlan) -> list[str]:
    """What the project holds of the model cache's storage, each unconfirmed fact marked so."""
    cache = plan.model_cache
    if cache is None:
        return []
    lines = [
        f"model cache storage {cache.storage.value} (mig_inference/clouds/storage.py; "
        "`plan --json` names each source):"
    ]
    for fact in storage_facts(plan.spec.cloud, cache.storage.value):
        doubt = "" if fact.confirmed else f" ({UNCONFIRMED})"
        lines.append(f"  {fact.fact}: {fact.value}{doubt}")
    return [*lines, ""]


def plan_json(plan: StackPlan) -> dict[str, Any]:
    used = utilization(plan)
    return {
        "stack": plan.spec.stack,
        "cloud": plan.spec.cloud.value,
        "cluster": {"name": plan.spec.cluster.name, "create": plan.spec.cluster.create},
        "pools": [_pool_json(pool) for pool in plan.pools],
        "services": [
            {
                "name": s.name,
                "profile": s.profile,
                "resource": s.resource,
                "claim": claim_json(s, plan),
                "replicas": s.replicas,
                "pool": s.pool.name,
                "engine": s.spec.engine.value,
                "need_mib": round(s.spec.need_mib, 1) if s.spec.need_mib else None,
                "slice_mib": s.offer.memory_mib,
                "max_model_len": s.sizing.max_model_len,
                "max_num_seqs": s.sizing.max_num_seqs,
                "endpoint": s.endpoint,
                "group": s.group,
                "load": _load_json(plan, s.name),
            }
            for s in plan.services
        ],
        "model_cache": _cache_json(plan),
        "cluster_addons": [
            {
                "feature": need.feature.value,
                "addon": need.addon.addon,
                "keys": list(need.keys),
                "created": need.addon.created if need.addon.installed_here else None,
                "joined": need.addon.joined.value,
                "identity": need.addon.identity or None,
                "source": need.addon.source,
            }
            for need in needed_addons(plan)
        ],
        "profiling": [
            {
                "name": run.name,
                "service": run.service,
                "profile": run.profile,
                "resource": run.engine.resource,
                "pool": run.engine.pool.name,
                "num_prompts": run.settings.num_prompts,
                "max_concurrency": run.max_concurrency,
            }
            for run in plan.profiling
        ],
        "demand": [
            {
                "service": d.service,
                "requests_per_second": d.requests_per_second,
                "latency_ms": d.latency_ms,
                "served": d.served,
                "throughput_source": d.source,
                "deployments": [
                    {
                        "name": part.name,
                        "profile": part.profile,
                        "replicas": part.replicas,
                        "requests_per_second_each": part.requests_per_second,
                        "measured": part.measured,
                    }
                    for part in d.parts
                ],
            }
            for d in demand_served(plan.services)
        ],
        "utilization": {name: {"used": u, "offered": o} for name, (u, o) in used.items()},
        "gateway": gateway_json(plan.gateway),
        "verify": [
            {
                "service": t.service,
                "job": t.job_name,
                "requests": t.requests,
                "slices": {p.name: slice_profile(p) for p in plan.services if p.name in t.parts},
            }
            for t in verify_targets(plan)
        ],
        "ephemeral": None
        if plan.spec.ephemeral is None
        else {
            "ttl": plan.spec.ephemeral.ttl,
            "ttl_minutes": plan.spec.ephemeral.ttl_minutes,
            "max_cost": plan.spec.ephemeral.max_cost,
        },
        "custom_mig_configs": sorted(
            {p.config_name for p in plan.pools if p.operator_managed and not p.builtin_config}
        ),
        "errors": [],
        "warnings": plan.warnings,
    }


def _proof(pool: PoolPlan) -> str:
    """Whether the pool's GPU count is proven fewest, or how far it may be from the bound."""
    packed = pool.pack_plan
    assert packed is not None
    nodes = packed.node_count
    bound = max(1, -(-packed.lower_bound // pool.gpus_per_node))
    if packed.optimal:
        return f"{nodes} identical node(s), proven the fewest (lower bound {bound})"
    return (
        f"{nodes} identical node(s), not proven: at most {nodes - bound} more than the lower "
        f"bound {bound}"
    )


def mig_prefer(pool: PoolPlan) -> list[str]:
    """The `migPrefer` that keeps this pool's layout in later plans: each GPU's layout, in
    device order."""
    return [str(layout) for layout in pool.per_gpu_layouts if layout is not None]


def _kept(pool: PoolPlan) -> list[str]:
    """How much of the deployed layout (`migPrefer`) the plan keeps, and the line that keeps the
    chosen layout for later runs of the program (which cannot read what is deployed)."""
    packed = pool.pack_plan
    assert packed is not None
    lines = []
    if packed.kept_gpus is not None:
        moved = pool.gpus_per_node - packed.kept_gpus
        lines.append(
            f"  keeps the deployed layout on {packed.kept_gpus} of {pool.gpus_per_node} GPUs per "
            f"node ({moved} re-partitioned per node)"
        )
    lines.append(f"  pin it for later plans: migPrefer: [{', '.join(mig_prefer(pool))}]")
    return lines


def _per_zone(pool: PoolPlan) -> str:
    spread = len(pool.zones) or 1
    if pool.autoscaled:
        return f"{pool.nodes_per_zone} at first, {pool.max_nodes / spread:g} at most"
    return str(pool.nodes_per_zone)


def plan_text(plan: StackPlan) -> str:
    spec = plan.spec
    action = "create" if spec.cluster.create else "use"
    lines = [f"stack {spec.stack}: {spec.cloud.value}, {action} cluster {spec.cluster.name}", ""]
    for pool in plan.pools:
        nodes = (
            f"{pool.min_nodes}"
            if pool.min_nodes == pool.max_nodes
            else f"{pool.min_nodes}-{pool.max_nodes}"
        )
        shape = f" ({pool.machine.name})" if pool.machine else ""
        if not pool.mig_enabled:
            manager = "GPU Operator" if pool.operator_managed else "GKE device plugin"
            how = f"off: whole GPUs, {manager}"
        elif pool.operator_managed:
            source = "NVIDIA built-in" if pool.builtin_config else "custom mig-parted config"
            how = f"nvidia.com/mig.config={pool.config_name} ({source}), GPU Operator"
        else:
            how = f"GKE gpu_partition_size={pool.partition_size}, GKE device plugin"
        lines.append(
            f"pool {pool.name}: {nodes} node(s) x {pool.gpus_per_node} {pool.gpu.name}{shape}"
        )
        lines += _machine_text(pool)
        if pool.cloud is Cloud.GKE:
            lines.append(f"  zones: {', '.join(pool.zones)} ({_per_zone(pool)} per zone)")
        if pool.generation:
            lines.append(
                f"  generation {pool.generation} (cloud name {pool.physical_name}); a change of "
                f"{', '.join(sorted(pool.replacement_inputs))} brings up a new one"
            )
        if pool.rollout is Rollout.IN_PLACE and pool.operator_managed:
            lines.append(
                f"  layout changes re-partition in place, {pool.max_unavailable} node(s) at a time"
            )
        lines.append(f"  MIG: {how}")
        if pool.dra:
            lines.append(f"  devices: {allocation_text(pool, plan)}")
        if pool.pack_plan is not None:
            lines.append(f"  mig: auto chose it: {_proof(pool)}")
            lines += _kept(pool)
        sharing = pool.spec.sharing
        if sharing is not None:
            shared = ", ".join(o.profile for o in pool.offers if o.shared_by > 1)
            isolation = (
                "no memory isolation"
                if sharing.strategy is SharingStrategy.TIME_SLICING
                else "memory and compute divided by MPS"
            )
            lines.append(
                f"  sharing: {sharing.strategy.value}, {sharing.replicas} pods per device "
                f"({shared}; {isolation})"
            )
        for layout in dict.fromkeys(pool.per_gpu_layouts):
            gpus = sum(1 for each in pool.per_gpu_layouts if each == layout)
            bar = (
                slot_bar(pool.gpu, place(pool.gpu, layout))
                if layout
                else "[MIG disabled: whole GPU]"
            )
            lines.append(f"  {gpus} GPU(s) per node, each: {bar}  {layout or ''}")
        per_node = ", ".join(f"{r} {n}" for r, n in pool.capacity_per_node().items())
        lines.append(f"  capacity per node: {per_node}")
        needs = f"needs {pool.max_pods_required}: {pool.max_pods_breakdown}"
        lines.append(f"  max pods: {pool.max_pods} ({needs})")
        lines.append("")
    lines.append("services:")
    width = max((len(s.name) for s in plan.services), default=8)
    for s in plan.services:
        need = (
            f", needs {s.spec.need_mib:,.0f} of {s.offer.memory_mib:,} MiB"
            if s.spec.need_mib
            else ""
        )
        engine = s.spec.engine.value
        if s.sizing.max_model_len:
            engine += (
                f" max-model-len {s.sizing.max_model_len}, max-num-seqs {s.sizing.max_num_seqs}"
            )
        claimed = " (DRA claims)" if claim_json(s, plan) else ""
        lines.append(
            f"  {s.name:<{width}}  {s.replicas:>3} x {s.resource}{claimed} on {s.pool.name}{need}; "
            f"{engine}"
        )
    if not plan.services:
        lines.append("  (none)")
    lines.append("")
    if plan.profiling:
        lines.append("profiling (a Job per profile; `mig-inference throughput` reads their logs):")
        for run in plan.profiling:
            where = f"one {run.engine.resource} of {run.engine.pool.name}"
            lines.append(
                f"  {run.name}: {run.service} on {where}, {run.settings.num_prompts} prompts of "
                f"{run.settings.input_tokens} tokens, {run.max_concurrency} at once"
            )
        lines.append("")
    served = demand_served(plan.services)
    if served:
        lines.append("demand (one Deployment per profile, behind one Service per service):")
        for d in served:
            within = f" within {d.latency_ms:g} ms" if d.latency_ms is not None else ""
            parts = " + ".join(
                f"{p.replicas} x {p.profile} at {p.requests_per_second:g}/s "
                f"({'measured' if p.measured else 'assumed'})"
                for p in d.parts
            )
            lines.append(
                f"  {d.service}: {d.requests_per_second:g} requests/s{within}: {parts} = "
                f"{d.served:g}/s; throughput from {d.source}"
            )
        lines.append("")
    lines += load_text(plan)
    lines += cache_facts_text(plan)
    lines += addons_text(plan)
    lines += gateway_text(plan.gateway)
    targets = verify_targets(plan)
    if targets:
        lines.append("verify (a Job per Service after its rollout; each replica checks its slice):")
        for t in targets:
            slices = ", ".join(
                sorted({slice_profile(p) for p in plan.services if p.name in t.parts})
            )
            lines.append(
                f"  {t.service}: {', '.join(t.requests)} (Job {t.job_name}); every replica sees "
                f"one {slices} device"
            )
        lines.append("")
    if spec.ephemeral is not None:
        lines.append(
            f"ephemeral: ttl {spec.ephemeral.ttl}, maxCost ${spec.ephemeral.max_cost:,.2f} "
            "(`mig-inference ephemeral up` holds the stack to them)"
        )
        lines.append("")
    lines.append("utilization (slices used / offered at max size):")
    for name, (used, offered) in utilization(plan).items():
        share = f" ({used / offered:.0%})" if offered else ""
        lines.append(f"  {name}: {used}/{offered}{share}")
    return "\n".join(lines)


def _gb(size: float) -> str:
    return f"{size / 1e9:,.1f} GB"


def _min(seconds: float) -> str:
    return f"~{max(1, round(seconds / 60))} min"


def load_text(plan: StackPlan) -> list[str]:
    """Time to serving per service, and the bytes each `pulumi up` pulls from the hub."""
    if not plan.services:
        return []
    cache = plan.model_cache
    head = (
        f"time to serving (estimated; model cache: {cache.storage.value}, {cache.size_gib} GiB"
        + (f", bucket {cache.bucket}" if cache.bucket else "")
        + "):"
        if cache is not None
        else "time to serving (estimated; no model cache: every replica downloads from the hub):"
    )
    lines = [head]
    unconfirmed: dict[str, None] = {}
    for s in plan.services:
        load = plan.load[s.name]
        unconfirmed.update(dict.fromkeys(load.unconfirmed))
        if load.weights is None:
            lines.append(f"  {s.name}: model size unknown (give weightsGiB or params and dtype)")
            continue
        size = load.weights.bytes
        where = "the hub" if not load.cached else load.source
        lines.append(
            f"  {s.name}: {s.replicas} x {_gb(size)} from {where} ({load.weights.source}); first "
            f"Ready {_min(load.first_ready_seconds)}, all {_min(load.all_ready_seconds)}; one "
            f"replica alone {_min(load.replica_seconds)}; startup probe "
            f"{load.startup_probe_seconds:,} s"
        )
        if load.cached:
            hub = hub_alone(plan, s.name)
            lines.append(
                f"    hub: {_gb(load.hub_bytes_fill)} once per revision (the populate Job, "
                f"{_min(load.populate_seconds)}), then none: new generations, re-partitions and "
                f"scale-ups read the cache; without it {_gb(hub.hub_bytes_first_up())}, all Ready "
                f"{_min(hub.all_ready_seconds)}"
            )
        else:
            lines.append(
                f"    hub: {_gb(load.hub_bytes_first_up())} this first `pulumi up`, and "
                f"{_gb(size)} again for every replica that starts later (a new generation, a "
                "re-partition, a scale-up)"
            )
    if unconfirmed:
        lines.append(
            f"  {len(unconfirmed)} figure(s) behind these are unconfirmed "
            "(mig_inference/data/load_bandwidth.yaml); modelCache.hubMBps and readMBps take yours"
        )
    lines.append("")
    return lines
