"""The model cache's plan: which model revisions it holds, where on the volume, how big the
volume is, and which services read from it (and why the others do not).

A model revision is filled once, by a populate Job named after the model, the revision and the
storage: a new revision is a new Job (and on Hyperdisk ML a new volume), filled before the
Deployments that read it roll. Nothing of it lives on the nodes, so blue/green generations and
re-partitions find it filled.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from msgspec import Struct

from mig_inference.clouds import Cloud
from mig_inference.clouds.storage import (
    FSX_DEPLOYMENT_TYPE,
    FSX_SIZES,
    FSX_SIZES_SOURCE,
    fsx_sizes_text,
)
from mig_inference.errors import MigError
from mig_inference.gpus.sizing import BYTES_PER_PARAM, GB, GIB, MIB
from mig_inference.names.digest import short_hash
from mig_inference.plan.model import ServicePlan
from mig_inference.spec import (
    CacheStorage,
    Engine,
    ModelCacheSpec,
    ServiceSpec,
    StackSpec,
    key_path,
)
from mig_inference.spec.formats import CACHE_SIZE_GIB

CACHE_ROOT = "/models"
"""Where the cache's volume is mounted in the populate Job and the engines."""
HEADROOM = 1.2
"""Room on the volume beyond the weights (tokenizer, config, a second revision being filled)."""
CACHED_ENGINES = (Engine.VLLM, Engine.TGI)
"""Engines that start from a local path and whose own downloader fills the cache."""
HYPERDISK_ML_THROUGHPUT = 2400
"""MiB/s a Hyperdisk ML volume is provisioned with unless `throughputMiBps` says: this
project's choice, within Google's 400 to 1,200,000 MiB/s."""
FSX_PER_UNIT = 250
"""MB/s per TiB of an FSx for Lustre file system unless `throughputMiBps` says: this project's
choice among the PERSISTENT_2 values (aws-fsx-csi-driver docs/options.md)."""


class Weights(Struct, frozen=True):
    """How many bytes one replica reads, and how that number was found."""

    bytes: int
    source: str
    """`weightsGiB`, `params x dtype`, or `memoryGiB` (an upper bound: it counts the KV cache)."""


def weights_of(service: ServiceSpec) -> Weights | None:
    """The bytes of the model's weights, or None when the stack does not say."""
    if service.weights_gib is not None:
        return Weights(int(service.weights_gib * GIB), "weightsGiB")
    if service.shape is not None:
        shape = service.shape
        size = shape.params_billion * GB * BYTES_PER_PARAM[shape.dtype.lower()]
        return Weights(int(size), f"params x dtype ({shape.params_billion:g}B x {shape.dtype})")
    if service.need_mib is not None:
        return Weights(int(service.need_mib * MIB), "memoryGiB (an upper bound: it counts more)")
    return None


class CachedModel(Struct, frozen=True):
    """One model revision in the cache."""

    model: str
    revision: str
    weights: Weights
    key: str
    """A short hash of model and revision: names of its Job and (Hyperdisk ML) volume."""
    services: tuple[str, ...]
    """The Deployments (service plans) that read it."""
    namespaces: tuple[str, ...]
    pool: str
    """The pool of its first service (Hyperdisk ML: where the populate Job writes the volume)."""

    @property
    def path(self) -> str:
        """Its directory on the volume."""
        return f"{self.model}/{self.revision.replace('/', '-')}"

    @property
    def mount_path(self) -> str:
        return f"{CACHE_ROOT}/{self.path}"


class ModelCachePlan(Struct, frozen=True):
    spec: ModelCacheSpec
    models: tuple[CachedModel, ...]
    uncached: Mapping[str, str]
    """Service plan name -> why it still downloads from the hub."""
    size_gib: int
    """The volume's size (on Hyperdisk ML: each model revision's volume)."""
    bucket: str | None
    """The bucket (object storage): the one given, or the one the stack creates."""
    zone: str | None
    """Hyperdisk ML: the zone of the volumes (the pools' zone)."""

    @property
    def storage(self) -> CacheStorage:
        return self.spec.storage

    @property
    def throughput(self) -> int:
        """hyperdisk-ml: the volume's provisioned MiB/s; fsx-lustre: MB/s per TiB."""
        if self.spec.throughput_mib_per_s is not None:
            return self.spec.throughput_mib_per_s
        return FSX_PER_UNIT if self.storage is CacheStorage.FSX_LUSTRE else HYPERDISK_ML_THROUGHPUT

    @property
    def bucket_owned(self) -> bool:
        return self.spec.storage.object_storage and self.spec.bucket is None

    def model_of(self, service: str) -> CachedModel | None:
        return next((m for m in self.models if service in m.services), None)

    def streamed(self, service: ServicePlan) -> bool:
        """vLLM streams the weights from the bucket instead of reading the mounted files."""
        return (
            self.spec.stream
            and service.spec.engine is Engine.VLLM
            and self.model_of(service.name) is not None
        )

    def weights_path(self, service: ServicePlan) -> str | None:
        """Where the engine reads the weights from: the bucket it streams, or the mounted
        directory (None: the service is not cached)."""
        model = self.model_of(service.name)
        if model is None:
            return None
        return self.source_url(model) if self.streamed(service) else model.mount_path

    def size_of(self, model: CachedModel) -> int:
        """The volume size a model revision needs on Hyperdisk ML."""
        return _gib(model.weights.bytes)

    def source_url(self, model: CachedModel) -> str:
        """The bucket URL vLLM's streamer reads (object storage only)."""
        scheme = "gs" if self.spec.storage is CacheStorage.GCS_FUSE else "s3"
        return f"{scheme}://{self.bucket}/{model.path}"


def fill_job_name(cache: ModelCachePlan, model: CachedModel) -> str:
    """The populate Job of a model revision: a new revision, storage or bucket is a new Job
    (Jobs are immutable), which fills the cache before the Deployments that read it roll."""
    what = f"{model.model}@{model.revision}|{cache.storage.value}|{cache.bucket}|{cache.size_gib}"
    return f"model-fill-{model.key}-{short_hash(what, 6)}"


def fsx_lustre_size(needed_gib: int, deployment_type: str = FSX_DEPLOYMENT_TYPE) -> int:
    """The smallest FSx for Lustre file system (GiB) of `deployment_type` holding
    `needed_gib`."""
    first, step = FSX_SIZES[deployment_type]
    for size in first:
        if needed_gib <= size:
            return size
    return first[-1] + step * math.ceil((needed_gib - first[-1]) / step)


def _gib(size: float) -> int:
    return max(4, math.ceil(size * HEADROOM / GIB))


def _why_not(service: ServicePlan) -> str | None:
    spec = service.spec
    if spec.engine not in CACHED_ENGINES:
        return f"engine {spec.engine.value} loads its own way; the cache serves vllm and tgi"
    if spec.model.startswith("/"):
        return "its model is a path in the image, not a hub model"
    if weights_of(spec) is None:
        return "its size is unknown: give weightsGiB, params and dtype, or memoryGiB"
    return None


def default_bucket(spec: StackSpec) -> str:
    """A bucket name unique per cluster and stack (bucket names are global)."""
    digest = short_hash(f"{spec.cloud.value}|{spec.cluster.name}|{spec.stack}", 10)
    return f"mig-inference-models-{digest}"


def plan_model_cache(spec: StackSpec, services: Sequence[ServicePlan]) -> ModelCachePlan | None:
    cache = spec.model_cache
    if cache is None or not cache.enabled:
        return None
    uncached: dict[str, str] = {}
    grouped: dict[tuple[str, str], list[ServicePlan]] = {}
    for service in services:
        reason = _why_not(service)
        if reason is not None:
            uncached[service.name] = reason
            continue
        grouped.setdefault((service.spec.model, service.spec.revision), []).append(service)
    models = []
    for (model, revision), readers in grouped.items():
        weights = max(
            (w for s in readers if (w := weights_of(s.spec)) is not None), key=lambda w: w.bytes
        )
        models.append(
            CachedModel(
                model, revision, weights, short_hash(f"{model}@{revision}", 8),
                tuple(s.name for s in readers),
                tuple(sorted({s.spec.namespace for s in readers})), readers[0].pool.name,
            )
        )  # fmt: skip
    total = sum(m.weights.bytes for m in models)
    path = key_path("modelCache")
    if cache.storage is CacheStorage.HYPERDISK_ML:
        size = max((_gib(m.weights.bytes) for m in models), default=4)
    elif cache.storage is CacheStorage.FSX_LUSTRE:
        size = fsx_lustre_size(_gib(total))
    else:
        size = _gib(total)
    if cache.size_gib is not None:
        if cache.size_gib < size:
            raise MigError(
                f"{cache.size_gib} GiB does not hold the cached models: they need {size} GiB "
                f"({len(models)} model revision(s), {total / GB:,.1f} GB with "
                f"{HEADROOM - 1:.0%} headroom)",
                f"{path}.sizeGiB",
                value=cache.size_gib,
            )
        if cache.storage is CacheStorage.FSX_LUSTRE and fsx_lustre_size(cache.size_gib) != (
            cache.size_gib
        ):
            raise MigError(
                f"FSx for Lustre ({FSX_DEPLOYMENT_TYPE}) takes {fsx_sizes_text()}, not "
                f"{cache.size_gib:,} ({FSX_SIZES_SOURCE}); the next size up is "
                f"{fsx_lustre_size(cache.size_gib):,}",
                f"{path}.sizeGiB",
                value=cache.size_gib,
            )
        size = cache.size_gib
    if size > CACHE_SIZE_GIB.maximum:
        raise MigError(
            f"the cached models need {size:,} GiB, more than one volume holds "
            f"({CACHE_SIZE_GIB.maximum:,.0f} GiB)",
            path,
        )
    zone = None
    if cache.storage is CacheStorage.HYPERDISK_ML:
        zone = _one_zone(spec, models, services)
    bucket = cache.bucket or (default_bucket(spec) if cache.storage.object_storage else None)
    return ModelCachePlan(cache, tuple(models), uncached, size, bucket, zone)


def _one_zone(
    spec: StackSpec, models: Sequence[CachedModel], services: Sequence[ServicePlan]
) -> str | None:
    """A Hyperdisk ML volume lives in one zone: every pool that reads it must be there."""
    pools = {s.pool.name: s.pool for s in services if any(s.name in m.services for m in models)}
    zones = {zone for pool in pools.values() for zone in pool.zones}
    if spec.cloud is Cloud.GKE and len(zones) > 1:
        raise MigError(
            f"hyperdisk-ml volumes live in one zone, and the cached services' pools span "
            f"{', '.join(sorted(zones))}; give those pools one zone, or use storage gcs-fuse",
            f"{key_path('modelCache')}.storage",
            value="hyperdisk-ml",
            allowed=["gcs-fuse", "storage-class"],
        )
    return next(iter(zones), None)
