"""MIG layouts: which multisets of profiles fit on one GPU, and where each instance goes.

A profile takes `compute` compute slices and a contiguous run of `memory` memory slices that must
begin at one of its allowed starts (`nvidia-smi mig -lgipp`). A layout is valid when some choice
of starts has no overlap, the compute total is within the GPU, no profile exceeds its instance
count, and the media engines suffice: at most one instance holds the media extensions (`+me` or
`+me.all`), and a `+me.all` instance, which takes every decoder, encoder, JPEG and OFA engine,
leaves room only for `-me` instances (none of them). The placement search is exact: it tries every
allowed start, so it agrees with the placement table for every combination. Nothing here assumes
a GPU's slice counts: 7 compute x 8 memory slices, A30's 4 x 4 and RTX PRO 6000's 4 x 12 alike.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from functools import cache

from msgspec import Struct

from mig_inference.errors import MigError, shown
from mig_inference.gpus.catalog import GpuModel, Profile


class Placement(Struct, frozen=True):
    """One GPU instance at a memory-slice position."""

    profile: str
    start: int
    size: int


class Layout(Struct, frozen=True):
    """A multiset of profiles for one GPU, in a canonical order (largest first)."""

    counts: tuple[tuple[str, int], ...]

    @staticmethod
    def of(gpu: GpuModel, counts: Mapping[str, int] | Iterable[str]) -> Layout:
        """Build from `{profile: count}` or a list of profile names; names are checked."""
        tally: Counter[str] = Counter()
        if isinstance(counts, Mapping):
            for name, count in counts.items():
                if not isinstance(count, int) or isinstance(count, bool) or count < 0:
                    raise MigError(
                        f"count for {name} must be a whole number >= 0, got {shown(count)}"
                    )
                tally[gpu.profile(name).name] += count
        else:
            for name in counts:
                tally[gpu.profile(name).name] += 1
        order = {p.name: i for i, p in enumerate(gpu.profiles)}
        items = sorted(((n, c) for n, c in tally.items() if c > 0), key=lambda nc: -order[nc[0]])
        return Layout(tuple(items))

    def as_dict(self) -> dict[str, int]:
        return dict(self.counts)

    def names(self) -> list[str]:
        """Every instance's profile name, largest first."""
        return [name for name, count in self.counts for _ in range(count)]

    def count(self, profile: str) -> int:
        return dict(self.counts).get(profile, 0)

    def __str__(self) -> str:
        return "+".join(f"{c}x{n}" if c > 1 else n for n, c in self.counts) or "(empty)"


def parse_custom_layout(gpu: GpuModel, text: str) -> Layout:
    """Parse `1g.10gb=2,2g.20gb=1` (or `1g.10gb+1g.10gb+2g.20gb`, or `2x1g.10gb+2g.20gb` as
    layouts print) into a layout."""
    text = text.strip()
    if not text:
        raise MigError("empty layout; write it as PROFILE=COUNT[,PROFILE=COUNT...]")
    counts: Counter[str] = Counter()
    if "=" in text or "," in text:
        for part in text.split(","):
            name, sep, count = part.partition("=")
            if not sep or not count.strip().isdigit():
                raise MigError(
                    f"bad layout entry {shown(part.strip())}; write PROFILE=COUNT, e.g. 1g.10gb=2"
                )
            counts[gpu.profile(name.strip()).name] += int(count)
    else:
        # `+` also ends `+me` profile names, so split on `+` only before a digit.
        names = _split_plus_list(text)
        for name in names:
            times, x, profile = name.partition("x")
            repeated = x and times.isdigit() and int(times) > 0
            counts[gpu.profile(profile if repeated else name).name] += int(times) if repeated else 1
    return Layout.of(gpu, counts)


def _split_plus_list(text: str) -> list[str]:
    parts: list[str] = []
    current = ""
    for i, ch in enumerate(text):
        if ch == "+" and i + 1 < len(text) and text[i + 1].isdigit():
            parts.append(current)
            current = ""
        else:
            current += ch
    parts.append(current)
    return [p.strip() for p in parts if p.strip()]


def _mask(start: int, size: int) -> int:
    return ((1 << size) - 1) << start


def _search(profiles: list[Profile], used: int, out: list[Placement]) -> bool:
    if not profiles:
        return True
    profile, rest = profiles[0], profiles[1:]
    for start in profile.starts:
        mask = _mask(start, profile.memory)
        if used & mask:
            continue
        out.append(Placement(profile.name, start, profile.memory))
        if _search(rest, used | mask, out):
            return True
        out.pop()
    return False


def _why_invalid(gpu: GpuModel, profiles: list[Profile]) -> str | None:
    tally = Counter(p.name for p in profiles)
    by_name = {p.name: p for p in profiles}
    for name, count in tally.items():
        allowed = by_name[name].max_instances
        if count > allowed:
            return f"{count}x {name} exceeds its limit of {allowed} per {gpu.name}"
    me = [p.name for p in profiles if p.media_extensions]
    if len(me) > 1:
        return (
            f"at most one instance with media extensions (+me, +me.all) per GPU, got {len(me)} "
            f"({', '.join(me)})"
        )
    every_engine = next((p.name for p in profiles if p.all_media_engines), None)
    if every_engine is not None:
        others = sorted(
            {p.name for p in profiles if p.name != every_engine and not p.no_media_engines}
        )
        if others:
            return (
                f"{every_engine} takes every media engine of {gpu.name}, so the other instances "
                f"must be -me profiles (no media engines), got {', '.join(others)}"
            )
    if len(profiles) > gpu.max_instances:
        limit = gpu.max_instances
        return f"{len(profiles)} instances exceed the {limit} instances {gpu.name} can hold"
    compute = sum(p.compute for p in profiles)
    if compute > gpu.compute_slices:
        return f"needs {compute} compute slices, {gpu.name} has {gpu.compute_slices}"
    memory = sum(p.memory for p in profiles)
    if memory > gpu.memory_slices:
        return f"needs {memory} memory slices, {gpu.name} has {gpu.memory_slices}"
    return None


def place(gpu: GpuModel, layout: Layout) -> list[Placement]:
    """Placements for every instance of `layout`, or MigError saying exactly why none exists."""
    return list(_place(gpu, layout))


@cache
def _place(gpu: GpuModel, layout: Layout) -> tuple[Placement, ...]:
    profiles = [gpu.profile(name) for name in layout.names()]
    reason = _why_invalid(gpu, profiles)
    if reason:
        raise MigError(f"{layout} does not fit on {gpu.name}: {reason}")
    # Largest runs first, then those with the fewest allowed starts: fails fast, same answer.
    ordered = sorted(profiles, key=lambda p: (-p.memory, len(p.starts), p.name))
    placements: list[Placement] = []
    if _search(ordered, 0, placements):
        return tuple(sorted(placements, key=lambda pl: pl.start))
    rules = "; ".join(
        f"{p.name} takes {p.memory} slice{'s' if p.memory > 1 else ''} starting at "
        f"{'/'.join(str(s) for s in p.starts)}"
        for p in sorted(set(profiles), key=lambda p: -p.memory)
    )
    raise MigError(
        f"{layout} does not fit on {gpu.name}: no non-overlapping placement of its memory slices "
        f"(memory slices 0-{gpu.memory_slices - 1}; {rules})"
    )


def is_valid(gpu: GpuModel, layout: Layout) -> bool:
    try:
        place(gpu, layout)
    except MigError:
        return False
    return True


@cache
def valid_layouts(gpu: GpuModel, profile_names: tuple[str, ...]) -> tuple[Layout, ...]:
    """Every non-empty valid layout of `gpu` built from the given profiles.

    Found by extending layouts one instance at a time and keeping those the placement search
    accepts, so the set follows from the placement table alone.
    """
    profiles = [gpu.profile(n) for n in profile_names]
    found: list[Layout] = []

    def extend(index: int, counts: dict[str, int]) -> None:
        if index == len(profiles):
            if counts:
                found.append(Layout.of(gpu, counts))
            return
        profile = profiles[index]
        extend(index + 1, counts)
        for count in range(1, profile.max_instances + 1):
            trial = {**counts, profile.name: count}
            if not is_valid(gpu, Layout.of(gpu, trial)):
                break
            extend(index + 1, trial)

    extend(0, {})
    return tuple(found)


def maximal_layouts(layouts: Iterable[Layout]) -> list[Layout]:
    """Layouts to which no further instance of the given set can be added."""
    items = list(layouts)
    # Plain dicts (a Counter's comparisons run in Python): zero counts dropped, as a Counter
    # compares them.
    as_dicts = [{name: count for name, count in layout.counts if count} for layout in items]
    keep = []
    for i, counts in enumerate(as_dicts):
        dominated = any(
            other != counts and all(other.get(k, 0) >= v for k, v in counts.items())
            for other in as_dicts
        )
        if not dominated:
            keep.append(items[i])
    return keep


def slot_bar(gpu: GpuModel, placements: list[Placement], width_per_slot: int = 4) -> str:
    """Draw one GPU's layout over its memory slots: one pair of brackets is one GPU, `|`
    separates its instances, `.` is memory no instance uses, e.g. `[2g.20gb|1g |1g |3g.40gb  ]`."""
    cells: list[str] = []
    position = 0
    for placement in sorted(placements, key=lambda p: p.start):
        if placement.start > position:
            cells.append("." * (width_per_slot * (placement.start - position) - 1))
        inner = width_per_slot * placement.size - 1
        label = (
            placement.profile
            if len(placement.profile) <= inner
            else placement.profile.split(".")[0]
        )
        cells.append(label.ljust(inner)[:inner])
        position = placement.start + placement.size
    if position < gpu.memory_slices:
        cells.append("." * (width_per_slot * (gpu.memory_slices - position) - 1))
    return "[" + "|".join(cells) + "]"
