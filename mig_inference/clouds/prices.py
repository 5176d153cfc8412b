"""Hourly prices of whole GPU machines, and monthly prices of the model cache's storage: the
table shipped in `data/prices.yaml`, and a user's override file of the same shape (an entry
replaces the shipped one of its machine type or storage, or adds a machine type the project
knows).

Every price carries the date and source it comes from; bad values are refused naming their key
path, `FILE:machines[MACHINE].FIELD` or `FILE:storage[STORAGE].FIELD`.
"""

from __future__ import annotations

import datetime
import math
from collections.abc import Callable
from functools import cache
from typing import Any, TypeVar

import yaml
from msgspec import Struct

from mig_inference.clouds import MACHINES, Cloud, MachineShape
from mig_inference.clouds.addons import STORAGE_FEATURES
from mig_inference.clouds.capacity import Capacity
from mig_inference.errors import MigError, MigErrors
from mig_inference.gpus.catalog import SAFE_LOADER
from mig_inference.installation import package_text
from mig_inference.stackfile.yamlfile import FilePath, file_name, load_yaml

T = TypeVar("T")
SHIPPED = "data/prices.yaml"
"""The shipped table, inside the `mig_inference` package."""

TOP_KEYS = ("machines", "storage")
ENTRY_KEYS = (
    "cloud",
    "gpu",
    "gpus",
    "on_demand",
    "spot",
    "reservation",
    "capacity_block",
    "flex_start",
    "region",
    "date",
    "source",
    "weak",
    "note",
)


class MachinePrice(Struct, frozen=True):
    """What one machine type costs per hour, whole, and where that figure comes from."""

    machine: str
    """Machine type / instance type / shape, as `clouds.py` spells it."""
    cloud: Cloud
    gpu_model: str
    """Catalog GPU model of its GPUs."""
    gpus: int
    """GPUs per machine."""
    on_demand: float | None
    """On-demand $/hour of the whole machine (None: no sourced price)."""
    spot: float | None
    """Spot / preemptible $/hour of the whole machine (None: no sourced price)."""
    date: str
    """When the source stated the values (as the source gives it)."""
    source: str
    """Where the values come from (URL, repository file or document)."""
    region: str | None = None
    weak: bool = False
    """The source is a third-party copy or internally inconsistent."""
    note: str | None = None
    overridden: bool = False
    """The entry comes from the user's override file, not the shipped table."""
    reservation: float | None = None
    """$/hour of the whole machine in a reservation (None: no sourced price)."""
    capacity_block: float | None = None
    """$/hour of the whole machine in an EC2 Capacity Block (None: no sourced price)."""
    flex_start: float | None = None
    """$/hour of the whole machine as a GKE flex-start VM (None: no sourced price)."""

    def price(self, spot: bool) -> float | None:
        """$/hour of the whole machine at on-demand or spot prices (None: not known)."""
        return self.spot if spot else self.on_demand

    def price_of(self, capacity: Capacity) -> float | None:
        """$/hour of the whole machine bought as `capacity` (None: not in the table)."""
        return {
            Capacity.ON_DEMAND: self.on_demand,
            Capacity.SPOT: self.spot,
            Capacity.RESERVATION: self.reservation,
            Capacity.CAPACITY_BLOCK: self.capacity_block,
            Capacity.FLEX_START: self.flex_start,
        }[capacity]


PRICE_KEYS: dict[Capacity, str] = {
    Capacity.ON_DEMAND: "on_demand",
    Capacity.SPOT: "spot",
    Capacity.RESERVATION: "reservation",
    Capacity.CAPACITY_BLOCK: "capacity_block",
    Capacity.FLEX_START: "flex_start",
}
"""The price table's key of each capacity choice."""


def why_not_priced(machine: str, capacity: Capacity, price: MachinePrice | None) -> str:
    """Why a machine bought as `capacity` has no price, and how to give one."""
    key = PRICE_KEYS[capacity]
    if price is None:
        return f"{machine} is not in the price table; give its {key} price with --prices FILE"
    said = (
        f"{price.note}; " if price.note and capacity in (Capacity.ON_DEMAND, Capacity.SPOT) else ""
    )
    if capacity in (Capacity.ON_DEMAND, Capacity.SPOT):
        return (
            f"no {capacity} price for {machine} ({said}source: {price.source}); give one with "
            f"--prices FILE ({key}:)"
        )
    return (
        f"no {capacity} price for {machine}: the price sources (shared/reference/gpu-prices.md) "
        f"list none; give one with --prices FILE ({key}:)"
    )


def known_machines() -> dict[str, tuple[Cloud, MachineShape]]:
    """Every machine type the project knows, with its cloud."""
    return {
        name: (cloud, shape) for cloud, shapes in MACHINES.items() for name, shape in shapes.items()
    }


def _price_value(raw: Any, path: str) -> float | None:
    """$/hour >= 0, or None (null: no sourced price)."""
    if raw is None:
        return None
    if isinstance(raw, bool) or not isinstance(raw, int | float):
        raise MigError(f"must be a number of $/hour, got {raw!r}", path, value=raw)
    value = float(raw)
    if not math.isfinite(value) or value < 0:
        raise MigError(f"must be a price >= 0 in $/hour, got {raw!r}", path, value=raw)
    return value


def _text(raw: Any, path: str, *, required: bool) -> str | None:
    if raw is None:
        if required:
            raise MigError("is missing: every price needs it", path)
        return None
    if isinstance(raw, datetime.date):
        return raw.isoformat()  # YAML reads an unquoted 2026-07-20 as a date
    if not isinstance(raw, str) or not raw.strip():
        raise MigError(f"must be a non-empty string, got {raw!r}", path, value=raw)
    return raw.strip()


def _entry(machine: Any, raw: Any, where: str, overridden: bool) -> MachinePrice:
    path = f"{where}machines[{machine}]"
    known = known_machines()
    if not isinstance(machine, str) or machine not in known:
        names = sorted(known, key=str.lower)
        raise MigError(
            f"unknown machine type {machine!r}; known: {', '.join(names)}",
            path,
            value=machine,
            allowed=names,
        )
    if not isinstance(raw, dict):
        raise MigError(
            f"must be a mapping with on_demand, spot, date, source..., got {raw!r}", path
        )
    unknown = sorted(str(k) for k in set(raw) - set(ENTRY_KEYS))
    if unknown:
        raise MigError(
            f"unknown key {unknown[0]!r}; allowed: {', '.join(ENTRY_KEYS)}",
            f"{path}.{unknown[0]}",
            allowed=list(ENTRY_KEYS),
        )
    cloud, shape = known[machine]
    facts = {"cloud": cloud.value, "gpu": shape.gpu, "gpus": shape.gpus}
    for key, expected in facts.items():
        if key in raw and raw[key] != expected:
            raise MigError(
                f"{machine} is {shape.gpus} x {shape.gpu} on {cloud.value}, not {key} {raw[key]!r}",
                f"{path}.{key}",
                value=raw[key],
                allowed=[str(expected)],
            )
    if "on_demand" not in raw:
        raise MigError(
            "is missing: give $/hour of the whole machine, or null if unknown", f"{path}.on_demand"
        )
    weak = raw.get("weak", False)
    if not isinstance(weak, bool):
        raise MigError(f"must be true or false, got {weak!r}", f"{path}.weak", value=weak)
    region = _text(raw.get("region"), f"{path}.region", required=False)
    note = _text(raw.get("note"), f"{path}.note", required=False)
    date = _text(raw.get("date"), f"{path}.date", required=True)
    source = _text(raw.get("source"), f"{path}.source", required=True)
    assert date is not None and source is not None
    return MachinePrice(
        machine=machine,
        cloud=cloud,
        gpu_model=shape.gpu,
        gpus=shape.gpus,
        on_demand=_price_value(raw["on_demand"], f"{path}.on_demand"),
        spot=_price_value(raw.get("spot"), f"{path}.spot"),
        reservation=_price_value(raw.get("reservation"), f"{path}.reservation"),
        capacity_block=_price_value(raw.get("capacity_block"), f"{path}.capacity_block"),
        flex_start=_price_value(raw.get("flex_start"), f"{path}.flex_start"),
        date=date,
        source=source,
        region=region,
        weak=weak,
        note=note,
        overridden=overridden,
    )


def _sections(data: Any, where: str) -> dict[str, dict[Any, Any]]:
    """The `machines` and `storage` mappings of a price file (either may be left out)."""
    if not isinstance(data, dict) or not any(isinstance(data.get(k), dict) for k in TOP_KEYS):
        raise MigError(
            "must be a mapping with a `machines:` mapping of machine type -> price, or a "
            "`storage:` mapping of model cache storage -> price",
            where.rstrip(":") or None,
        )
    unknown = sorted(str(k) for k in set(data) - set(TOP_KEYS))
    if unknown:
        raise MigError(
            f"unknown key {unknown[0]!r}; allowed: {', '.join(TOP_KEYS)}",
            f"{where}{unknown[0]}",
            allowed=list(TOP_KEYS),
        )
    sections = {}
    for key in TOP_KEYS:
        value = data.get(key)
        if value is not None and not isinstance(value, dict):
            raise MigError(f"must be a mapping, got {value!r}", f"{where}{key}")
        sections[key] = value or {}
    return sections


def _each(entries: dict[Any, Any], entry: Callable[[Any, Any], T]) -> dict[str, T]:
    """Every entry of a section read, or every entry's error raised at once."""
    table: dict[str, T] = {}
    errors: list[MigError] = []
    for name, raw in entries.items():
        try:
            table[name] = entry(name, raw)
        except MigError as error:
            errors.append(error)
    if errors:
        raise errors[0] if len(errors) == 1 else MigErrors(errors)
    return table


def parse_prices(
    data: Any, where: str = "", *, overridden: bool = False
) -> dict[str, MachinePrice]:
    """A price table from parsed YAML; `where` prefixes key paths (a file name and `:`)."""
    return _each(
        _sections(data, where)["machines"],
        lambda machine, raw: _entry(machine, raw, where, overridden),
    )


@cache
def _shipped() -> Any:
    """The table shipped with the package (read once per process), by libyaml's loader."""
    return yaml.load(
        package_text(SHIPPED),
        Loader=SAFE_LOADER,
    )


@cache
def shipped_prices() -> dict[str, MachinePrice]:
    """The shipped machine prices."""
    return parse_prices(_shipped(), f"{SHIPPED}:")


def load_prices(override: FilePath | None = None) -> dict[str, MachinePrice]:
    """The shipped table, with the entries of the user's `override` file replacing or adding
    machine types."""
    table = dict(shipped_prices())
    if override is not None:
        table.update(parse_prices(*_read_override(override), overridden=True))
    return table


def _read_override(override: FilePath) -> tuple[Any, str]:
    """A price file's data, and the source its key paths start with."""
    return load_yaml(override, "price file"), f"{file_name(override)}:"


STORAGE_KEYS = ("per_gb_month", "region", "date", "source", "weak", "note")


class StoragePrice(Struct, frozen=True):
    """What one model cache storage costs per GB-month, and where that figure comes from."""

    storage: str
    """The `modelCache.storage` value."""
    per_gb_month: float | None
    """$ per GB-month (None: no sourced price)."""
    by_throughput: dict[int, float | None]
    """FSx for Lustre: $ per GB-month per per-unit throughput (MB/s per TiB)."""
    date: str
    source: str
    region: str | None = None
    weak: bool = False
    note: str | None = None
    overridden: bool = False

    def price(self, throughput: int | None = None) -> float | None:
        """$ per GB-month (at `throughput` MB/s per TiB where the price depends on it)."""
        if self.by_throughput:
            return self.by_throughput.get(throughput) if throughput is not None else None
        return self.per_gb_month


def _storage_entry(storage: Any, raw: Any, where: str, overridden: bool) -> StoragePrice:
    path = f"{where}storage[{storage}]"
    allowed = [feature.value for feature in STORAGE_FEATURES]
    if storage not in allowed:
        raise MigError(
            f"unknown model cache storage {storage!r}; known: {', '.join(allowed)}",
            path,
            value=storage,
            allowed=allowed,
        )
    if not isinstance(raw, dict):
        raise MigError(f"must be a mapping with per_gb_month, date, source..., got {raw!r}", path)
    unknown = sorted(str(k) for k in set(raw) - set(STORAGE_KEYS))
    if unknown:
        raise MigError(
            f"unknown key {unknown[0]!r}; allowed: {', '.join(STORAGE_KEYS)}",
            f"{path}.{unknown[0]}",
            allowed=list(STORAGE_KEYS),
        )
    if "per_gb_month" not in raw:
        raise MigError(
            "is missing: give $ per GB-month, or null if unknown", f"{path}.per_gb_month"
        )
    given = raw["per_gb_month"]
    by_throughput: dict[int, float | None] = {}
    per_gb_month = None
    if isinstance(given, dict):
        for tier, value in given.items():
            if isinstance(tier, bool) or not isinstance(tier, int):
                raise MigError(
                    f"must map MB/s per TiB (a whole number) to a price, got {tier!r}",
                    f"{path}.per_gb_month",
                    value=tier,
                )
            by_throughput[tier] = _price_value(value, f"{path}.per_gb_month[{tier}]")
    else:
        per_gb_month = _price_value(given, f"{path}.per_gb_month")
    weak = raw.get("weak", False)
    if not isinstance(weak, bool):
        raise MigError(f"must be true or false, got {weak!r}", f"{path}.weak", value=weak)
    date = _text(raw.get("date"), f"{path}.date", required=True)
    source = _text(raw.get("source"), f"{path}.source", required=True)
    assert date is not None and source is not None
    return StoragePrice(
        storage=storage,
        per_gb_month=per_gb_month,
        by_throughput=by_throughput,
        date=date,
        source=source,
        region=_text(raw.get("region"), f"{path}.region", required=False),
        weak=weak,
        note=_text(raw.get("note"), f"{path}.note", required=False),
        overridden=overridden,
    )


def parse_storage_prices(
    data: Any, where: str = "", *, overridden: bool = False
) -> dict[str, StoragePrice]:
    """The model cache storage prices of a price file."""
    return _each(
        _sections(data, where)["storage"],
        lambda storage, raw: _storage_entry(storage, raw, where, overridden),
    )


@cache
def shipped_storage_prices() -> dict[str, StoragePrice]:
    """The shipped model cache storage prices."""
    return parse_storage_prices(_shipped(), f"{SHIPPED}:")


def load_price_tables(
    override: FilePath | None = None,
) -> tuple[dict[str, MachinePrice], dict[str, StoragePrice]]:
    """The shipped machine and storage prices, with the entries of the user's `override` file
    replacing or adding theirs; the file is read once, so a pipe (`--prices <(...)`) does."""
    machines, storage = dict(shipped_prices()), dict(shipped_storage_prices())
    if override is not None:
        data, source = _read_override(override)
        machines.update(parse_prices(data, source, overridden=True))
        storage.update(parse_storage_prices(data, source, overridden=True))
    return machines, storage
