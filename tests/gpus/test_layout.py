"""The placement validator against an independent enumeration of NVIDIA's placement rules."""

from __future__ import annotations

from collections import Counter

import pytest
from msgspec.structs import replace

from mig_inference.errors import MigError
from mig_inference.gpus.catalog import GpuModel, Profile, load_catalog, resolve_gpu
from mig_inference.gpus.layout import (
    Layout,
    maximal_layouts,
    parse_custom_layout,
    place,
    valid_layouts,
)

CATALOG = load_catalog()
MODELS = [g.name for g in CATALOG.gpus]


# NVIDIA's MIG guide (UG-PROFILES), RTX PRO 6000 Blackwell table: NVDEC, NVENC, JPEG, OFA per
# profile; the full 4g.96gb holds all of the GPU's engines.
RTX_ENGINES = {
    "1g.24gb": (1, 1, 1, 0), "1g.24gb+me": (1, 1, 1, 1), "1g.24gb+gfx": (1, 1, 1, 0),
    "1g.24gb+me.all": (4, 4, 4, 1), "1g.24gb-me": (0, 0, 0, 0), "2g.48gb": (2, 2, 2, 0),
    "2g.48gb+gfx": (2, 2, 2, 0), "2g.48gb+me.all": (4, 4, 4, 1), "2g.48gb-me": (0, 0, 0, 0),
    "4g.96gb": (4, 4, 4, 1), "4g.96gb+gfx": (4, 4, 4, 1),
}  # fmt: skip


def _media_engines_suffice(gpu: GpuModel, chosen: list[str]) -> bool:
    """Where NVIDIA publishes engine counts per profile (RTX PRO 6000), instances may not hold
    more engines than the whole GPU has; elsewhere one `+me` instance at most (the guide's "a
    single 1g profile can include media extensions")."""
    if gpu.name == "RTX-PRO-6000-96GB":
        total = RTX_ENGINES["4g.96gb"]
        used = [sum(RTX_ENGINES[name][i] for name in chosen) for i in range(4)]
        return all(u <= t for u, t in zip(used, total, strict=True))
    return sum(1 for name in chosen if name.endswith("+me")) <= 1


def _independent_valid_multisets(gpu: GpuModel) -> set[tuple[tuple[str, int], ...]]:
    """Every multiset some set of non-overlapping placements realizes, scanning memory slots
    left to right (a different method from the validator's largest-first backtracking), then
    filtered by compute, instance limits and the media engines."""
    results: set[tuple[tuple[str, int], ...]] = set()

    def scan(slot: int, chosen: list[str]) -> None:
        if slot >= gpu.memory_slices:
            tally = Counter(chosen)
            profiles = {p.name: p for p in gpu.profiles}
            if not chosen:
                return
            if sum(profiles[n].compute for n in chosen) > gpu.compute_slices:
                return
            if any(count > profiles[n].max_instances for n, count in tally.items()):
                return
            if not _media_engines_suffice(gpu, chosen):
                return
            if len(chosen) > gpu.max_instances:
                return
            results.add(tuple(sorted(tally.items())))
            return
        scan(slot + 1, chosen)  # leave this slot empty
        for profile in gpu.profiles:
            if slot in profile.starts and slot + profile.memory <= gpu.memory_slices:
                scan(slot + profile.memory, [*chosen, profile.name])

    scan(0, [])
    return results


@pytest.mark.parametrize("name", MODELS)
def test_validator_agrees_with_independent_enumeration(name: str) -> None:
    gpu = CATALOG.gpu(name)
    names = tuple(p.name for p in gpu.profiles)
    mine = {tuple(sorted(layout.counts)) for layout in valid_layouts(gpu, names)}
    assert mine == _independent_valid_multisets(gpu)


@pytest.mark.parametrize("name", MODELS)
def test_every_single_profile_fits_at_its_max_count(name: str) -> None:
    gpu = CATALOG.gpu(name)
    for profile in gpu.profiles:
        place(gpu, Layout.of(gpu, {profile.name: profile.max_instances}))
        with pytest.raises(MigError, match="exceeds its limit"):
            place(gpu, Layout.of(gpu, {profile.name: profile.max_instances + 1}))


@pytest.mark.parametrize("name", MODELS)
def test_placements_do_not_overlap_and_use_allowed_starts(name: str) -> None:
    gpu = CATALOG.gpu(name)
    for layout in valid_layouts(gpu, tuple(p.name for p in gpu.profiles)):
        used: set[int] = set()
        for pl in place(gpu, layout):
            assert pl.start in gpu.profile(pl.profile).starts
            slots = set(range(pl.start, pl.start + pl.size))
            assert not used & slots
            used |= slots
        assert max(used) < gpu.memory_slices


@pytest.mark.parametrize(
    ("gpu", "layout", "reason"),
    [
        ("h100", "4g.40gb+3g.40gb+1g.10gb", "needs 8 compute slices, H100-80GB has 7"),
        ("h100", "3g.40gb=2,1g.10gb=1", "needs 9 memory slices, H100-80GB has 8"),
        ("h100", "1g.10gb+me+1g.10gb+me", "exceeds its limit of 1"),
        ("h100", "1g.10gb+me,1g.10gb=1", "bad layout entry"),
        ("h100", "1g.10gb=8", "exceeds its limit of 7"),
        ("a100-40gb", "1g.5gb+me=1,1g.5gb=6,1g.10gb=1", "8 instances exceed the 7 instances"),
        ("a100-40gb", "1g.10gb=4,1g.5gb=1", "needs 9 memory slices, A100-40GB has 8"),
        ("a100-40gb", "3g.20gb=1,1g.10gb=3", "needs 10 memory slices"),
        ("a30", "2g.12gb=2,1g.6gb=1", "compute slices"),
        (
            "a30",
            "2g.12gb+me=1,2g.12gb=1,1g.6gb+me=1",
            r"media extensions \(\+me, \+me.all\) per GPU, got 2",
        ),
        ("h200", "7g.141gb=1,1g.18gb=1", "compute slices"),
        ("b200", "9g.200gb=1", "not a MIG profile of B200-180GB"),
        ("b300", "7g.269gb=1,1g.34gb=1", "needs 8 compute slices, B300-269GB has 7"),
        ("b300", "3g.135gb=2,1g.67gb=1", "needs 10 memory slices, B300-269GB has 8"),
        ("gb300", "1g.35gb=8", "exceeds its limit of 7"),
        ("gb300", "1g.35gb+me=1,1g.35gb=6,1g.70gb=1", "8 instances exceed the 7 instances"),
        ("rtx-pro-6000", "2g.48gb=1,1g.24gb=3", "needs 5 compute slices, RTX-PRO-6000-96GB has 4"),
        ("rtx-pro-6000", "1g.24gb=5", "exceeds its limit of 4"),
        ("rtx-pro-6000", "1g.24gb+me.all=1,1g.24gb=1", r"takes every media engine .* got 1g.24gb$"),
        ("rtx-pro-6000", "2g.48gb+me.all=1,1g.24gb+gfx=1", "must be -me profiles"),
        ("rtx-pro-6000", "1g.24gb+me=1,1g.24gb+me.all=1", r"media extensions \(\+me, \+me.all\)"),
        ("rtx-pro-6000", "2g.48gb+me.all=2", "exceeds its limit of 1"),
    ],
)
def test_invalid_layouts_say_why(gpu: str, layout: str, reason: str) -> None:
    model = resolve_gpu(gpu)
    with pytest.raises(MigError, match=reason):
        place(model, parse_custom_layout(model, layout))


@pytest.mark.parametrize(
    ("gpu", "layout"),
    [
        ("h100", "3g.40gb=1,2g.20gb=1,1g.10gb=2"),
        ("h100", "4g.40gb=1,3g.40gb=1"),
        ("h100", "1g.20gb=4"),
        ("h100", "1g.10gb+me=1,1g.10gb=6"),
        ("a100-40gb", "3g.20gb=1,2g.10gb=1,1g.5gb=2"),
        ("a100-40gb", "4g.20gb=1,3g.20gb=1"),
        ("a100-80gb", "3g.40gb=1,1g.20gb=2"),
        ("a30", "2g.12gb=1,1g.6gb=2"),
        ("h200", "3g.71gb=1,2g.35gb=1,1g.18gb=2"),
        ("gh200", "3g.72gb=1,2g.36gb=1,1g.18gb=2"),
        ("b200", "4g.90gb=1,3g.90gb=1"),
        ("b300", "3g.135gb=1,2g.67gb=1,1g.34gb=2"),
        ("b300", "1g.34gb+me=1,1g.34gb=6"),
        ("gb300", "4g.139gb=1,3g.139gb=1"),
        ("gb300", "1g.70gb=4"),
        ("rtx-pro-6000", "2g.48gb=1,1g.24gb=2"),
        ("rtx-pro-6000", "1g.24gb+me=1,1g.24gb+gfx=1,1g.24gb=1,1g.24gb-me=1"),
        ("rtx-pro-6000", "1g.24gb+me.all=1,1g.24gb-me=3"),
        ("rtx-pro-6000", "2g.48gb+me.all=1,2g.48gb-me=1"),
        ("rtx-pro-6000", "2g.48gb+gfx=1,1g.24gb+gfx=2"),
    ],
)
def test_valid_layouts_place(gpu: str, layout: str) -> None:
    model = resolve_gpu(gpu)
    placements = place(model, parse_custom_layout(model, layout))
    assert sum(model.profile(p.profile).compute for p in placements) <= model.compute_slices


def test_overlap_only_failure_names_the_allowed_starts() -> None:
    # No catalog GPU has a layout that passes every count yet cannot be placed, so a synthetic
    # GPU exercises the placement search's own verdict.
    odd = Profile("1g.odd", 1, 2, 1000, 1, (1,))
    even = Profile("1g.even", 1, 2, 1000, 2, (0, 2))
    gpu = GpuModel("TEST-4", 4, 7, 4, 7, (), (odd, even), (), (), True)
    with pytest.raises(MigError, match=r"no non-overlapping placement .*1g.odd takes 2 slices"):
        place(gpu, Layout.of(gpu, {"1g.odd": 1, "1g.even": 1}))
    assert [p.start for p in place(gpu, Layout.of(gpu, {"1g.even": 2}))] == [0, 2]


def test_one_slice_1g_cannot_use_the_last_memory_slot() -> None:
    # On 8-slot GPUs 1-slice profiles start only at 0..6, so 3g+2g+1g+1g must put the 3g last.
    gpu = resolve_gpu("h100")
    placements = place(gpu, parse_custom_layout(gpu, "3g.40gb=1,2g.20gb=1,1g.10gb=2"))
    assert {p.profile: p.start for p in placements}["3g.40gb"] == 4


def test_maximal_layouts_admit_no_further_instance() -> None:
    gpu = resolve_gpu("h100")
    names = tuple(p.name for p in gpu.profiles if not p.media_extensions)
    for layout in maximal_layouts(valid_layouts(gpu, names)):
        for extra in names:
            grown = Counter(layout.as_dict())
            grown[extra] += 1
            with pytest.raises(MigError):
                place(gpu, Layout.of(gpu, dict(grown)))


def test_rtx_pro_6000_places_as_nvidia_smi_showed() -> None:
    # `nvidia-smi mig -lgi` after `-cgi 2g.48gb,1g.24gb,1g.24gb` (RTX-KS, driver 610.43.02):
    # 2g.48gb at 0:6, the 1g.24gb at 6:3 and 9:3.
    gpu = resolve_gpu("rtx-pro-6000")
    placements = place(gpu, parse_custom_layout(gpu, "2g.48gb=1,1g.24gb=2"))
    assert [(p.profile, p.start, p.size) for p in placements] == [
        ("2g.48gb", 0, 6),
        ("1g.24gb", 6, 3),
        ("1g.24gb", 9, 3),
    ]


def _scaled(gpu: GpuModel, factor: int) -> GpuModel:
    """The same GPU with every memory slice split in `factor`."""
    profiles = tuple(
        replace(p, memory=p.memory * factor, starts=tuple(s * factor for s in p.starts))
        for p in gpu.profiles
    )
    return replace(gpu, memory_slices=gpu.memory_slices * factor, profiles=profiles)


def test_rtx_pro_6000_layouts_equal_the_a30_style_four_slot_table() -> None:
    # The 12-slice -lgipp grid comes from an uncitable transcript; NVIDIA publishes 1/4, 1/2 and
    # full. A 4-slot table like the A30's confirmed one (1-slice starts 0-3, 2-slice 0 and 2, the
    # 4g at 0) admits exactly the same layouts.
    gpu = resolve_gpu("rtx-pro-6000")
    a30 = resolve_gpu("a30")
    assert a30.placements_confirmed
    by_size = {p.memory: p.starts for p in a30.profiles}
    four_slot = replace(
        gpu,
        memory_slices=4,
        profiles=tuple(
            replace(p, memory=p.memory // 3, starts=by_size[p.memory // 3]) for p in gpu.profiles
        ),
    )
    assert _scaled(four_slot, 3) == gpu
    names = tuple(p.name for p in gpu.profiles)
    assert set(valid_layouts(gpu, names)) == set(valid_layouts(four_slot, names))


@pytest.mark.parametrize(("compute", "memory"), [(2, 2), (3, 6), (5, 4), (4, 12)])
def test_validator_handles_any_slice_geometry(compute: int, memory: int) -> None:
    # Synthetic GPUs: a 1-compute profile over `memory // compute` slices at aligned starts, a
    # 2-compute one at twice that, and the whole GPU; the validator and the independent
    # enumeration must agree whatever the slice counts.
    unit = max(memory // compute, 1)
    small = Profile("1g.test", 1, unit, 1000, compute, tuple(range(0, memory - unit + 1, unit)))
    double = Profile(
        "2g.test", 2, 2 * unit, 2000, compute // 2, tuple(range(0, memory - 2 * unit + 1, 2 * unit))
    )
    whole = Profile(f"{compute}g.test", compute, memory, 4000, 1, (0,))
    profiles = tuple(p for p in (small, double, whole) if p.max_instances and p.starts)
    gpu = GpuModel(
        f"TEST-{compute}x{memory}", 4, compute, memory, compute, (), profiles, (), (), True
    )
    names = tuple(p.name for p in profiles)
    mine = {tuple(sorted(layout.counts)) for layout in valid_layouts(gpu, names)}
    assert mine == _independent_valid_multisets(gpu)
    most_small = max(dict(layout).get(small.name, 0) for layout in mine)
    assert most_small == min(compute, memory // unit)
