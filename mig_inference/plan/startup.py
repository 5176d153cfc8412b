"""How long until a service serves, and how many bytes it pulls from the hub: a pure estimate
from the model's bytes, where each replica reads them, and the read rates of
`data/load_bandwidth.yaml` (each with its source; unconfirmed ones are named in the result).

A replica is Ready after its node pulled the engine image, it read the weights and the engine
warmed up. Replicas reading at once share what they read from: the hub and a bucket per node,
a Hyperdisk ML volume, an FSx for Lustre file system or a File Storage mount target as a whole
(and each node's own limit). Without the cache every replica downloads the whole model from the
hub; with it, the populate Job downloads it once and the replicas wait for that Job.

The startup probe of each replica is derived from the same numbers: the read and warm-up of a
replica while every slice of its kind on the pool loads at once (the most that can), times a
margin, so a 70B model is not killed while it loads and a 0.5B one is not waited on for an hour.
It does not depend on the replica count, which would roll every replica on a scale-up.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from msgspec import Struct, field

from mig_inference.clouds.storage import load_bandwidth
from mig_inference.plan.model import ServicePlan
from mig_inference.plan.model_cache import ModelCachePlan, Weights, weights_of
from mig_inference.spec import CacheStorage

MB = 10**6
MIB_BYTES = 2**20
PROBE_MARGIN = 1.5
"""The startup probe waits this many times the estimate: the figures are estimates."""
PROBE_FLOOR_SECONDS = 180
"""No engine is given less than this to start (image layers unpacked, CUDA initialised)."""
UNKNOWN_SIZE_PROBE_SECONDS = 3600
"""The startup budget of a model whose size the stack does not give."""
HUB = "hub"


class Figure(Struct, frozen=True):
    value: float
    source: str
    unconfirmed: bool


def figure(section: str, key: str, *, source: str = "source", flag: str = "unconfirmed") -> Figure:
    """One shipped figure with its source and whether it is confirmed."""
    entry = load_bandwidth()[section]
    return Figure(float(entry[key]), str(entry[source]).strip(), bool(entry.get(flag, False)))


class Rate(Struct, frozen=True):
    """What readers read from: a per-node limit, and a limit shared by every reader at once."""

    per_node: Figure
    shared: Figure | None = None
    """The whole volume / file system / mount target, shared by all readers (None: unlimited)."""

    def seconds(self, size: int, on_node: int, everywhere: int) -> float:
        """Seconds for one of `on_node` readers on its node (of `everywhere` in all) to read
        `size` bytes, all reading at once."""
        rate = self.per_node.value * MB / on_node
        if self.shared is not None:
            rate = min(rate, self.shared.value * MB / everywhere)
        return size / rate

    def figures(self) -> tuple[Figure, ...]:
        return (self.per_node,) + ((self.shared,) if self.shared else ())


def hub_rate(override: float | None = None) -> Rate:
    if override is not None:
        return Rate(Figure(override, "modelCache.hubMBps (your measurement)", False))
    return Rate(figure("hub", "node_mb_per_s"))


def cache_rate(cache_plan: ModelCachePlan) -> Rate:
    """How fast the replicas read the cache."""
    spec = cache_plan.spec
    if spec.read_mb_per_s is not None:
        return Rate(Figure(spec.read_mb_per_s, "modelCache.readMBps (your measurement)", False))
    storage = spec.storage
    if storage is CacheStorage.HYPERDISK_ML:
        node = figure(
            "hyperdisk-ml", "per_node_mib_per_s", source="per_node_source",
            flag="per_node_unconfirmed",
        )  # fmt: skip
        provisioned = cache_plan.throughput
        volume = Figure(
            provisioned * MIB_BYTES / MB,
            f"modelCache.throughputMiBps, provisioned ({provisioned:,} MiB/s); "
            + figure("hyperdisk-ml", "min_throughput_mib_per_s").source,
            False,
        )
        return Rate(Figure(node.value * MIB_BYTES / MB, node.source, node.unconfirmed), volume)
    if storage is CacheStorage.FSX_LUSTRE:
        data = load_bandwidth()["fsx-lustre"]
        per_unit = cache_plan.throughput
        whole = Figure(
            per_unit * cache_plan.size_gib / 1024,
            f"{per_unit} MB/s per TiB x {cache_plan.size_gib:,} GiB; {str(data['source']).strip()}",
            bool(data.get("unconfirmed")),
        )
        return Rate(whole, whole)
    if storage is CacheStorage.FILE_STORAGE:
        target = figure("file-storage", "mount_target_mb_per_s")
        return Rate(target, target)
    if storage is CacheStorage.STORAGE_CLASS:
        whole = figure("storage-class", "mb_per_s")
        return Rate(whole, whole)
    return Rate(figure(storage.value, "node_mb_per_s"))


class LoadEstimate(Struct, frozen=True):
    """Time to Ready and hub bytes of one Deployment."""

    service: str
    source: str
    """Where each replica reads the weights: `hub`, the cache's storage, or `runai-streamer`."""
    weights: Weights | None
    replicas: int
    nodes: int
    populate_seconds: float
    """The populate Job: one download from the hub (and an upload to a bucket); 0 without it."""
    first_ready_seconds: float
    """From `pulumi up` reaching the Deployment (or the populate Job) to the first replica
    Ready, every replica starting at once."""
    all_ready_seconds: float
    replica_seconds: float
    """One replica starting alone on a node without the image (a rolling update, a move to a
    new generation): what the rollout simulator waits per replica."""
    hub_bytes_per_start: int
    """Bytes one replica start downloads from the hub (0 with the cache)."""
    hub_bytes_fill: int
    """Bytes the populate Job downloads once per model revision (0 without the cache)."""
    startup_probe_seconds: int
    unconfirmed: tuple[str, ...] = field(default=())
    """Sources of the unconfirmed figures the estimate used."""

    @property
    def cached(self) -> bool:
        return self.source != HUB

    @property
    def bytes_per_replica(self) -> int | None:
        return self.weights.bytes if self.weights else None

    def rolling_update_seconds(self) -> int:
        """A rolling update, one replica at a time (maxSurge 0), with the probe's margin."""
        return math.ceil(PROBE_MARGIN * max(self.replicas, 1) * self.replica_seconds)

    def hub_bytes_first_up(self) -> int:
        """Hub bytes of the `pulumi up` that creates the service (and fills its model)."""
        return self.hub_bytes_fill + self.hub_bytes_per_start * self.replicas


def _spread(replicas: int, service: ServicePlan) -> tuple[int, int, int]:
    """(nodes, fewest replicas on a node, most on a node): replicas spread over the pool's
    nodes (topology spread by hostname), each node holding at most its devices."""
    per_node = max(1, service.offer.per_node)
    nodes = max(math.ceil(replicas / per_node), service.pool.min_nodes, 1)
    nodes = min(nodes, max(replicas, 1))
    return nodes, max(1, replicas // nodes), math.ceil(max(replicas, 1) / nodes)


def estimate(
    service: ServicePlan,
    cache_plan: ModelCachePlan | None,
    hub_override: float | None = None,
) -> LoadEstimate:
    """The load estimate of one Deployment (a pure function of the plan and the shipped
    figures)."""
    weights = weights_of(service.spec)
    replicas = max(service.replicas, 1)
    nodes, fewest, most = _spread(replicas, service)
    image = figure("engine", "image_pull_seconds", source="image_source", flag="image_unconfirmed")
    warmup = figure("engine", "warmup_seconds")
    hub = hub_rate(hub_override)
    model = cache_plan.model_of(service.name) if cache_plan is not None else None
    used: list[Figure] = [image, warmup]
    if weights is None:
        seconds = image.value + warmup.value
        return LoadEstimate(
            service.name, HUB, None, service.replicas, nodes, 0.0, seconds, seconds, seconds,
            0, 0, service.spec.startup_seconds or UNKNOWN_SIZE_PROBE_SECONDS,
            _unconfirmed(used),
        )  # fmt: skip
    size = weights.bytes
    if model is None or cache_plan is None:
        used += hub.figures()

        def read(on_node: int, everywhere: int) -> float:
            return hub.seconds(size, on_node, everywhere)

        source, populate, per_start, fill = HUB, 0.0, size, 0
    else:
        rate = cache_rate(cache_plan)
        used += hub.figures() + rate.figures()
        populate = image.value + hub.seconds(size, 1, 1)
        if cache_plan.storage.object_storage:
            populate += rate.seconds(size, 1, 1)  # the upload into the bucket

        def read(on_node: int, everywhere: int) -> float:
            return rate.seconds(size, on_node, everywhere)

        streamed = cache_plan.streamed(service)
        source = "runai-streamer" if streamed else cache_plan.storage.value
        per_start, fill = 0, size
    first = populate + image.value + read(fewest, replicas) + warmup.value
    last = populate + image.value + read(most, replicas) + warmup.value
    alone = image.value + read(1, 1) + warmup.value
    # The probe is part of the pod template: it must not change with the replica count (a
    # scale-up would roll every replica), so it covers the most replicas the pool could start
    # at once: every device of this kind on a node, on every node.
    on_node = max(1, service.offer.per_node)
    probe = service.spec.startup_seconds or max(
        PROBE_FLOOR_SECONDS,
        math.ceil(
            PROBE_MARGIN * (read(on_node, on_node * max(1, service.pool.max_nodes)) + warmup.value)
        ),
    )
    return LoadEstimate(
        service.name, source, weights, service.replicas, nodes, populate, first, last, alone,
        per_start, fill, probe, _unconfirmed(used),
    )  # fmt: skip


def _unconfirmed(used: list[Figure]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(f.source for f in used if f.unconfirmed))


def estimates(
    services: list[ServicePlan], cache_plan: ModelCachePlan | None, hub_override: float | None
) -> Mapping[str, LoadEstimate]:
    return {s.name: estimate(s, cache_plan, hub_override) for s in services}
