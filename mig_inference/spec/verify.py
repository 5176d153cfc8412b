"""`mig-inference:verify`, `services[].verify` and `mig-inference:ephemeral`: the serving check
after a rollout, and the budget and lifetime of an ephemeral test stack."""

from __future__ import annotations

import re

from mig_inference.errors import shown
from mig_inference.spec import formats
from mig_inference.spec.model import (
    DEFAULT_VERIFY_PROMPT,
    EphemeralSpec,
    Probe,
    ServiceVerify,
    VerifySpec,
)
from mig_inference.spec.reader import ConfigNode

VERIFY_KEYS = ("enabled", "timeoutSeconds", "prompt", "maxTokens")
SERVICE_VERIFY_KEYS = ("enabled", "path", "method", "body", "status", "contains")
PROBE_KEYS = ("path", "method", "body", "status", "contains")
"""The keys of a custom engine's probe (only custom engines take them)."""
EPHEMERAL_KEYS = ("ttl", "maxCost")
DEFAULT_TTL = "2h"
_DURATION_PARTS = re.compile(r"([0-9]+)([dhm])")
_MINUTES = {"d": 24 * 60, "h": 60, "m": 1}


def duration_minutes(text: str) -> int | None:
    """Minutes in a duration like `1h30m`, or None when it is not one (see formats.DURATION)."""
    if formats.DURATION.problem(text) is not None:
        return None
    return sum(int(count) * _MINUTES[unit] for count, unit in _DURATION_PARTS.findall(text))


def ttl_problem(text: str) -> str | None:
    """Why `text` is not a TTL an ephemeral stack may have, or None."""
    problem = formats.DURATION.problem(text)
    if problem is not None:
        return problem
    minutes = duration_minutes(text)
    assert minutes is not None
    bound = formats.TTL_MINUTES.problem(minutes)
    return f"{shown(text)} is {minutes:,} minutes; {bound}" if bound is not None else None


def verify_spec(node: ConfigNode, creates_cluster: bool) -> VerifySpec:
    """The stack's serving check; on by default when the stack creates its cluster."""
    node.value = node.value if node.value is not None else {}
    node.mapping(VERIFY_KEYS)
    timeout = node.child("timeoutSeconds").integer(600, bound=formats.VERIFY_TIMEOUT_SECONDS)
    tokens = node.child("maxTokens").integer(8, bound=formats.VERIFY_MAX_TOKENS)
    prompt = node.child("prompt").text(formats.PROBE_TEXT, DEFAULT_VERIFY_PROMPT)
    assert timeout is not None and tokens is not None
    return VerifySpec(
        enabled=node.child("enabled").boolean(creates_cluster),
        timeout_seconds=timeout,
        prompt=prompt or DEFAULT_VERIFY_PROMPT,
        max_tokens=tokens,
    )


def service_verify_spec(node: ConfigNode, custom_engine: bool) -> ServiceVerify:
    """A service's own switch and, for a custom engine, the request that proves it serves."""
    if node.value is None:
        return ServiceVerify()
    raw = node.mapping(SERVICE_VERIFY_KEYS)
    enabled = node.child("enabled").boolean(True) if "enabled" in raw else None
    given = [key for key in PROBE_KEYS if raw.get(key) is not None]
    if given and not custom_engine:
        node.child(given[0]).problem(
            "only a custom engine takes a probe: the check of vllm, tgi and triton services "
            "sends what their API documents",
            None,
        )
        return ServiceVerify(enabled=enabled)
    if not given:
        return ServiceVerify(enabled=enabled)
    path = node.child("path").text(formats.URL_PATH, required=True)
    method = node.child("method").text(formats.HTTP_METHOD, "GET")
    body = node.child("body").text(formats.PROBE_TEXT)
    if body is not None and method == "GET":
        node.child("body").problem("a GET request has no body: give method: POST", None)
    status = node.child("status").integer(200, bound=formats.HTTP_STATUS)
    assert status is not None
    return ServiceVerify(
        enabled=enabled,
        probe=Probe(
            path=path or "/",
            method=method or "GET",
            body=body,
            status=status,
            contains=node.child("contains").text(formats.PROBE_TEXT),
        ),
    )


def ephemeral_spec(node: ConfigNode) -> EphemeralSpec | None:
    """An ephemeral stack's lifetime and budget (None: not an ephemeral stack)."""
    if node.value is None:
        return None
    node.mapping(EPHEMERAL_KEYS)
    ttl = node.child("ttl").string(DEFAULT_TTL) or DEFAULT_TTL
    problem = ttl_problem(ttl)
    if problem is not None:
        ttl = node.child("ttl").problem(problem, DEFAULT_TTL)
    max_cost = node.child("maxCost").number(bound=formats.MAX_COST_USD)
    if max_cost is None:
        max_cost = node.child("maxCost").problem(
            "is required: the most US dollars the stack may cost over its TTL", 1.0
        )
    minutes = duration_minutes(ttl)
    assert minutes is not None
    return EphemeralSpec(ttl=ttl, ttl_minutes=minutes, max_cost=max_cost)
