"""GKE node counts: the stack file gives a pool's total, GKE counts nodes per zone.

A pool's `zones` (its node locations) default to the cluster's zone on a zonal cluster; on a
regional cluster they must be named, since GKE would otherwise create the count in each of the
region's zones (typically three) while the plan, the capacity check and the gate count one.
"""

from __future__ import annotations

import re

from mig_inference.clouds import Cloud
from mig_inference.errors import MigError, shown
from mig_inference.spec import NodeCount, PoolSpec, StackSpec, key_path

_REGION = re.compile(r"^[a-z]+-[a-z]+\d+$")
_ZONE = re.compile(r"^([a-z]+-[a-z]+\d+)-[a-z]$")


def gke_region(location: str) -> str | None:
    """The region of a GKE location (a region or a zone), or None when it is neither."""
    if _REGION.match(location):
        return location
    zone = _ZONE.match(location)
    return zone.group(1) if zone else None


def pool_zones(spec: StackSpec, pool: PoolSpec, path: str) -> tuple[str, ...]:
    """The zones a pool's nodes are spread over (GKE), or the pool's own `zones` elsewhere."""
    if spec.cloud is not Cloud.GKE:
        return pool.zones
    location = str(spec.cluster.get("location"))
    region = gke_region(location)
    if region is None:
        raise MigError(
            f"{shown(location)} is not a GKE region (us-central1) or zone (us-central1-c)",
            f"{key_path('cluster')}.location",
        )
    for index, zone in enumerate(pool.zones):
        match = _ZONE.match(zone)
        if match is None or match.group(1) != region:
            raise MigError(
                f"{shown(zone)} is not a zone of the cluster's region {region} "
                f"(cluster location {location})",
                f"{path}.zones[{index}]",
            )
    if len(set(pool.zones)) != len(pool.zones):
        raise MigError(f"lists a zone twice: {', '.join(pool.zones)}", f"{path}.zones")
    if pool.zones:
        return pool.zones
    if location != region:
        return (location,)
    raise MigError(
        f"is required on a regional cluster ({location}): `nodes` is the pool's total and GKE "
        f"counts nodes per zone, so name the zones to spread them over (e.g. [{region}-a])",
        f"{path}.zones",
    )


def per_zone(nodes: NodeCount, zones: tuple[str, ...], path: str) -> int:
    """Nodes per zone for a fixed pool, or the initial per-zone count of an autoscaled one
    (its minimum); the totals must divide evenly."""
    count = len(zones) or 1
    if nodes.min % count:
        key = "nodes" if nodes.fixed else "nodes.min"
        raise MigError(
            f"{nodes.min} node(s) cannot be spread evenly over {count} zones "
            f"({', '.join(zones)}): give a multiple of {count}",
            f"{path}.{key}",
        )
    return nodes.min // count
