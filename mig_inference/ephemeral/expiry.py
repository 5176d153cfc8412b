"""The stack tags that mark an ephemeral stack and its expiry (Pulumi stack tag names: at most
40 of letters, digits, `-`, `_`, `.`, `:`; values at most 256 characters; pulumi/pulumi
pkg/util/validation/stack.go)."""

from __future__ import annotations

import datetime
from collections.abc import Mapping

EPHEMERAL_TAG = "mig-inference:ephemeral"
EXPIRES_TAG = "mig-inference:expires"
MAX_COST_TAG = "mig-inference:max-cost"
PER_HOUR_TAG = "mig-inference:cost-per-hour"
TIME_FORMAT = "%Y-%m-%dT%H:%M:%SZ"


def expiry(now: datetime.datetime, ttl_minutes: int) -> datetime.datetime:
    return now + datetime.timedelta(minutes=ttl_minutes)


def stack_tags(expires: datetime.datetime, max_cost: float, per_hour: float) -> dict[str, str]:
    return {
        EPHEMERAL_TAG: "true",
        EXPIRES_TAG: expires.astimezone(datetime.UTC).strftime(TIME_FORMAT),
        MAX_COST_TAG: f"{max_cost:g}",
        PER_HOUR_TAG: f"{per_hour:.2f}",
    }


def is_ephemeral(tags: Mapping[str, str]) -> bool:
    return tags.get(EPHEMERAL_TAG) == "true"


def expires_at(tags: Mapping[str, str]) -> datetime.datetime | None:
    """The stack's expiry, or None when its tag is missing or unreadable."""
    try:
        parsed = datetime.datetime.strptime(tags.get(EXPIRES_TAG, ""), TIME_FORMAT)
    except ValueError:
        return None
    return parsed.replace(tzinfo=datetime.UTC)


def expired(tags: Mapping[str, str], now: datetime.datetime) -> bool:
    """An ephemeral stack past its expiry; one whose expiry tag is missing or unreadable counts
    as expired, so that it cannot live on unnoticed."""
    if not is_ephemeral(tags):
        return False
    when = expires_at(tags)
    return when is None or when <= now
