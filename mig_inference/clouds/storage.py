"""What the project holds true of each model cache storage, per cloud, each fact with its source
and whether that source was confirmed here: the cloud offering it (the add-on table's row), its
sizes and throughputs, the read rates behind the time-to-serving estimate
(`data/load_bandwidth.yaml`; FSx for Lustre's sizes are kept here, `FSX_SIZES`) and its price
(`data/prices.yaml`, `storage:`). The facts stay where they are kept and applied; this module
reads them into rows `plan` prints, an unconfirmed one marked so."""

from __future__ import annotations

from functools import cache
from typing import Any

import yaml
from msgspec import Struct

from mig_inference.clouds import Cloud
from mig_inference.clouds.addons import Feature, addon
from mig_inference.clouds.prices import StoragePrice, shipped_storage_prices
from mig_inference.gpus.catalog import SAFE_LOADER
from mig_inference.installation import package_text

NO_SOURCE = "no document: this project's choice"
FSX_DEPLOYMENT_TYPE = "PERSISTENT_2"
"""The FSx for Lustre deployment type the project creates (SSD storage)."""
FSX_SIZES: dict[str, tuple[tuple[int, ...], int]] = {
    "SCRATCH_2": ((1200, 2400), 2400),
    "PERSISTENT_1": ((1200, 2400), 2400),
    "PERSISTENT_2": ((1200, 2400), 2400),
    "SCRATCH_1": ((1200, 2400), 3600),
}
"""The storage capacities (GiB) FSx for Lustre takes per SSD deployment type: the first sizes,
then whole steps beyond the last of them (`FSX_SIZES_SOURCE`: "For SCRATCH_2, PERSISTENT_2, and
PERSISTENT_1 deployment types using SSD storage type, the valid values are 1200 GiB, 2400 GiB,
and increments of 2400 GiB"; SCRATCH_1 1200, 2400 and increments of 3600)."""
FSX_SIZES_SOURCE = "Amazon FSx API Reference, CreateFileSystem StorageCapacity"


class StorageFact(Struct, frozen=True):
    """One fact about a model cache storage on a cloud."""

    fact: str
    """What it is about (`offered`, `size`, `throughput`, `read rate`, `price`)."""
    value: str
    source: str
    confirmed: bool
    """Its source was read and states it (False: an assumption, a copy or a page not re-read)."""


@cache
def load_bandwidth() -> dict[str, Any]:
    """`data/load_bandwidth.yaml`: the read rates (and sizes) of each storage, with sources."""
    text = package_text("data/load_bandwidth.yaml")
    data: dict[str, Any] = yaml.load(text, Loader=SAFE_LOADER)
    return data


def fsx_per_unit_throughputs() -> tuple[int, ...]:
    """The per-unit throughputs (MB/s per TiB) an FSx for Lustre file system of
    `FSX_DEPLOYMENT_TYPE` takes, as `data/load_bandwidth.yaml` holds them with their source."""
    return tuple(int(v) for v in load_bandwidth()["fsx-lustre"]["per_unit_mb_per_s_per_tib"])


def fsx_sizes_text(deployment_type: str = FSX_DEPLOYMENT_TYPE) -> str:
    """`1,200 or 2,400 GiB, then steps of 2,400 GiB`."""
    first, step = FSX_SIZES[deployment_type]
    return f"{' or '.join(f'{s:,}' for s in first)} GiB, then steps of {step:,} GiB"


def _text(value: Any) -> str:
    return " ".join(str(value).split())


def _rate(entry: dict[str, Any], key: str, unit: str, what: str, *, source: str = "source",
          flag: str = "unconfirmed") -> StorageFact:  # fmt: skip
    return StorageFact(
        "read rate", f"{entry[key]:,} {unit} {what}", _text(entry[source]), not entry.get(flag)
    )


def _price(price: StoragePrice | None) -> StorageFact | None:
    """The shipped price; confirmed when its source is not weak and it prices every tier."""
    if price is None:
        return None
    tiers: dict[int | None, float | None] = {
        tier: amount for tier, amount in price.by_throughput.items()
    } or {None: price.per_gb_month}
    known = {tier: amount for tier, amount in tiers.items() if amount is not None}
    if not known:
        return StorageFact("price", "none found", _text(price.source), False)
    value = "; ".join(
        f"${amount} per GB-month" + (f" at {tier} MB/s per TiB" if tier is not None else "")
        for tier, amount in known.items()
    )
    complete = len(known) == len(tiers)
    where = f" ({price.region})" if price.region else ""
    return StorageFact(
        "price", f"{value}{where}, {price.date}", _text(price.source), complete and not price.weak
    )


def _offered(cloud: Cloud, storage: Feature) -> StorageFact | None:
    row = addon(cloud, storage)
    if row is None:
        return None
    if not row.source:  # a StorageClass the stack names: nothing of the cloud's to confirm
        return StorageFact("offered", f"on {cloud.value}: a StorageClass you name", "", True)
    return StorageFact(
        "offered", f"on {cloud.value} through {row.created or row.addon}", row.source, row.confirmed
    )


def _sizes_and_rates(storage: Feature) -> list[StorageFact]:
    data = load_bandwidth()
    if storage is Feature.HYPERDISK_ML:
        entry = data["hyperdisk-ml"]
        source = _text(entry["source"])
        return [
            StorageFact(
                "size",
                f"{entry['min_size_gib']:,} GiB to {entry['max_size_gib']:,} GiB per volume",
                source, not entry.get("unconfirmed"),
            ),
            StorageFact(
                "throughput",
                f"{entry['min_throughput_mib_per_s']:,} to {entry['max_throughput_mib_per_s']:,} "
                "MiB/s per volume, provisioned",
                source, not entry.get("unconfirmed"),
            ),
            _rate(entry, "per_node_mib_per_s", "MiB/s", "per node", source="per_node_source",
                  flag="per_node_unconfirmed"),
        ]  # fmt: skip
    if storage is Feature.FSX_LUSTRE:
        entry = data["fsx-lustre"]
        units = ", ".join(str(u) for u in fsx_per_unit_throughputs())
        return [
            StorageFact(
                "size", f"{fsx_sizes_text()} ({FSX_DEPLOYMENT_TYPE})", FSX_SIZES_SOURCE, True
            ),
            StorageFact(
                "throughput", f"{units} MB/s per TiB of the file system's size",
                _text(entry["source"]), not entry.get("unconfirmed"),
            ),
        ]  # fmt: skip
    if storage is Feature.FILE_STORAGE:
        return [_rate(data["file-storage"], "mount_target_mb_per_s", "MB/s", "per mount target")]
    if storage is Feature.STORAGE_CLASS:
        return [_rate(data["storage-class"], "mb_per_s", "MB/s", "shared by every reader")]
    return [_rate(data[storage.value], "node_mb_per_s", "MB/s", "per node")]


def storage_facts(cloud: Cloud, storage: str) -> tuple[StorageFact, ...]:
    """Every fact the project holds of `storage` on `cloud` (empty: the cloud does not offer
    it)."""
    feature = Feature(storage)
    offered = _offered(cloud, feature)
    if offered is None:
        return ()
    price = _price(shipped_storage_prices().get(storage))
    return (offered, *_sizes_and_rates(feature), *([price] if price else []))
