"""How much GPU memory a model replica needs, and the smallest MIG slice that holds it.

need = (weights + KV cache) x overhead, where
  weights  = params x bytes per parameter,
  KV cache = 2 x layers x kv_heads x head_dim x KV bytes x context x concurrent sequences.
Sizes in GB are decimal (10^9 bytes) as model cards and the seed documents write them; slice
sizes are the real MiB a GPU instance reports, never the nominal size in its name.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable

from msgspec import Struct

from mig_inference.errors import MigError
from mig_inference.gpus.catalog import GpuModel, Profile

MIB = 1024 * 1024
GIB = 1024 * MIB
GB = 10**9

BYTES_PER_PARAM: dict[str, float] = {
    "fp32": 4.0,
    "bf16": 2.0,
    "fp16": 2.0,
    "fp8": 1.0,
    "int8": 1.0,
    "int4": 0.5,
}
DEFAULT_OVERHEAD = 1.2
"""Activation and runtime overhead factor (the seed's rule of thumb: weights x 1.2)."""
DEFAULT_CONTEXT = 4096
DEFAULT_CONCURRENCY = 1


def dtype_bytes(dtype: str, what: str = "dtype") -> float:
    try:
        return BYTES_PER_PARAM[dtype.lower()]
    except (KeyError, AttributeError):
        raise MigError(f"unknown {what} {dtype!r}; allowed: {', '.join(BYTES_PER_PARAM)}") from None


class ModelShape(Struct, frozen=True):
    """What the memory need of one replica is computed from."""

    params_billion: float
    """Parameter count in billions (8 for an 8B model)."""
    dtype: str = "bf16"
    """Weight precision: fp32, bf16, fp16, fp8, int8 or int4."""
    layers: int | None = None
    """Transformer layers; with kv_heads and head_dim, adds the KV cache."""
    kv_heads: int | None = None
    """Key/value heads (fewer than attention heads with grouped-query attention)."""
    head_dim: int | None = None
    """Dimension of one attention head."""
    context: int = DEFAULT_CONTEXT
    """Tokens per sequence the KV cache is sized for."""
    concurrency: int = DEFAULT_CONCURRENCY
    """Sequences served at once."""
    kv_dtype: str | None = None
    """KV cache precision; default bf16 (fp32 for fp32 models), as vLLM keeps it unquantized."""
    overhead: float = DEFAULT_OVERHEAD
    """Multiplier on weights + KV cache for activations, CUDA context and fragmentation."""

    def __post_init__(self) -> None:
        if not self.params_billion > 0:
            raise MigError(f"params must be > 0 (billions), got {self.params_billion!r}")
        dtype_bytes(self.dtype)
        if self.kv_dtype is not None:
            dtype_bytes(self.kv_dtype, "kv dtype")
        kv = (self.layers, self.kv_heads, self.head_dim)
        if any(v is not None for v in kv) and not all(v is not None for v in kv):
            raise MigError("layers, kv_heads and head_dim go together: give all three or none")
        for name in ("layers", "kv_heads", "head_dim"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or value <= 0):
                raise MigError(f"{name} must be a whole number > 0, got {value!r}")
        for name in ("context", "concurrency"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise MigError(f"{name} must be a whole number > 0, got {value!r}")
        if not self.overhead >= 1:
            raise MigError(f"overhead must be >= 1, got {self.overhead!r}")

    @property
    def weight_bytes(self) -> float:
        return self.params_billion * 1e9 * dtype_bytes(self.dtype)

    @property
    def kv_bytes_per_token(self) -> float:
        if self.layers is None or self.kv_heads is None or self.head_dim is None:
            return 0.0
        kv_dtype = self.kv_dtype or ("fp32" if self.dtype == "fp32" else "bf16")
        return 2 * self.layers * self.kv_heads * self.head_dim * dtype_bytes(kv_dtype)

    @property
    def kv_cache_bytes(self) -> float:
        return self.kv_bytes_per_token * self.context * self.concurrency

    @property
    def need_bytes(self) -> float:
        return (self.weight_bytes + self.kv_cache_bytes) * self.overhead

    @property
    def need_mib(self) -> float:
        return self.need_bytes / MIB


def gib_to_mib(memory_gib: float) -> float:
    if (
        isinstance(memory_gib, bool)
        or not isinstance(memory_gib, int | float)
        or not math.isfinite(memory_gib)
        or memory_gib <= 0
    ):
        raise MigError(f"memory must be a finite number of GiB > 0, got {memory_gib!r}")
    return float(memory_gib) * 1024


_PARAMS = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([bBmMkK]?)\s*$")
_SUFFIX = {"b": 1.0, "m": 1e-3, "k": 1e-6}
RAW_COUNT_ABOVE = 1e5
"""A bare number above this is a parameter count (7000000000, 70e9); below, billions (8, 0.5)."""


def parse_params(text: str) -> tuple[float, str]:
    """Billions of parameters from `3B`, `8b`, `350M`, `70e9`, `7000000000` or a bare number in
    billions, and how it was understood."""
    match = _PARAMS.match(str(text))
    if match is None:
        raise MigError(
            f"{text!r} is not a parameter count; write 3B, 8b, 350M, 70e9, 7000000000, or a "
            "number of billions",
            "--params",
        )
    number, suffix = float(match.group(1)), match.group(2).lower()
    if suffix:
        billions = number * _SUFFIX[suffix]
        how = f"{text.strip()} = {billions:g} billion"
    elif number > RAW_COUNT_ABOVE:
        billions = number / 1e9
        how = f"{text.strip()} parameters = {billions:g} billion"
    else:
        billions = number
        how = f"{text.strip()} read as billions = {billions:g} billion"
    if not math.isfinite(billions) or billions <= 0:
        raise MigError(f"must be a positive number of parameters, got {text!r}", "--params")
    return billions, how


def _slice_order(profile: Profile) -> tuple[int, int, int, bool]:
    # Smallest memory first; among equal memory the one using fewer memory slices, then less
    # compute: it leaves the most of the GPU for others. Variants (`+me`, `+gfx`...) only when
    # asked for.
    return (profile.memory_mib, profile.memory, profile.compute, bool(profile.variant))


def profiles_holding(
    gpu: GpuModel, need_mib: float, among: Iterable[Profile] | None = None
) -> list[Profile]:
    """Profiles whose usable memory holds `need_mib`, smallest first (variants left out)."""
    candidates = gpu.profiles if among is None else tuple(among)
    fitting = [p for p in candidates if p.memory_mib >= need_mib and not p.variant]
    return sorted(fitting, key=_slice_order)


def smallest_profile(
    gpu: GpuModel, need_mib: float, among: Iterable[Profile] | None = None
) -> Profile:
    """The smallest profile (of `among`, default all of `gpu`'s) that holds `need_mib`."""
    candidates = [p for p in (gpu.profiles if among is None else tuple(among))]
    fitting = profiles_holding(gpu, need_mib, candidates)
    if fitting:
        return fitting[0]
    usable = [p for p in candidates if not p.variant] or candidates
    if not usable:
        raise MigError(f"no MIG profile of {gpu.name} to choose from")
    largest = max(usable, key=_slice_order)
    scope = "" if among is None else " offered"
    raise MigError(
        f"needs {need_mib:,.0f} MiB ({need_mib / 1024:.1f} GiB), more than any{scope} MIG slice "
        f"of {gpu.name}: the largest, {largest.name}, has {largest.memory_mib:,} MiB"
    )
