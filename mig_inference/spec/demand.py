"""A service's demand: requests per second, an optional latency target, and the throughput one
replica reaches per profile, given in the stack file or in a file it names."""

from __future__ import annotations

from mig_inference.errors import MigError, shown
from mig_inference.spec import formats
from mig_inference.spec.model import Demand, Engine, ProfilingSpec, ThroughputPoint
from mig_inference.spec.reader import ConfigNode
from mig_inference.stackfile.yamlfile import load_yaml

DEMAND_KEYS = ("requestsPerSecond", "latencyMs", "throughput", "throughputFile", "profiling")
PROFILING_KEYS = ("profiles", "numPrompts", "inputTokens", "outputTokens", "maxConcurrency")
POINT_KEYS = ("profile", "requestsPerSecond", "batch", "latencyMs", "measured")


def throughput_points(node: ConfigNode) -> list[ThroughputPoint]:
    points = []
    for item in node.items():
        item.mapping(POINT_KEYS)
        points.append(
            ThroughputPoint(
                profile=item.child("profile").text(formats.MIG_PROFILE, required=True) or "",
                requests_per_second=(
                    item.child("requestsPerSecond").number(bound=formats.REQUESTS_PER_SECOND)
                    if item.child("requestsPerSecond").value is not None
                    else item.child("requestsPerSecond").problem("is required", 0.0)
                )
                or 0.0,
                batch=item.child("batch").integer(bound=formats.CONCURRENCY),
                latency_ms=item.child("latencyMs").number(bound=formats.LATENCY_MS),
                measured=item.child("measured").boolean(False),
            )
        )
    return points


def throughput_file_points(node: ConfigNode) -> list[ThroughputPoint]:
    """`throughput:` of the YAML file at `node` (relative to the working directory, where
    `pulumi up` and the command line run)."""
    name = node.string()
    if name is None:
        return []
    try:
        data = load_yaml(name, "throughput file")
    except MigError as error:
        return node.problem(f"{error.path}: {error.message}", [])
    if not isinstance(data, dict) or "throughput" not in data:
        return node.problem(f"{name} must hold `throughput: [{{profile, requestsPerSecond}}]`", [])
    return throughput_points(ConfigNode(data["throughput"], f"{name}:throughput", node.problems))


def demand_spec(node: ConfigNode) -> Demand | None:
    """The demand of the service at `node`, or None when it gives a replica count."""
    raw = node.value if isinstance(node.value, dict) else {}
    if raw.get("requestsPerSecond") is None:
        for key in ("latencyMs", "throughput", "throughputFile"):
            if raw.get(key) is not None:
                node.child(key).problem("only applies with requestsPerSecond", None)
        return None
    rate = node.child("requestsPerSecond").number(bound=formats.REQUESTS_PER_SECOND) or 1.0
    target = node.child("latencyMs").number(bound=formats.LATENCY_MS)
    if (raw.get("throughput") is None) == (raw.get("throughputFile") is None):
        return node.child("throughput").problem(
            "give throughput (a list of {profile, requestsPerSecond}) or throughputFile, one of "
            "them: what one replica serves on each profile",
            None,
        )
    inline = raw.get("throughput") is not None
    points = throughput_points(node.child("throughput")) if inline else throughput_file_points(
        node.child("throughputFile")
    )  # fmt: skip
    where = node.child("throughput" if inline else "throughputFile")
    fast_enough = [
        p for p in points if target is None or p.latency_ms is None or p.latency_ms <= target
    ]
    if points and not fast_enough:
        fastest = min(points, key=lambda p: p.latency_ms or 0.0)
        return node.child("latencyMs").problem(
            f"no profile meets {target:g} ms: the fastest point is {fastest.latency_ms:g} ms on "
            f"{fastest.profile}",
            None,
        )
    best: dict[str, ThroughputPoint] = {}
    for point in fast_enough:
        if point.requests_per_second <= 0:
            continue
        held = best.get(point.profile)
        if held is None or point.requests_per_second > held.requests_per_second:
            best[point.profile] = point
    if not best and points:
        return where.problem("every point serves 0 requests per second", None)
    source = "the stack file" if inline else str(raw.get("throughputFile"))
    return Demand(rate, target, tuple(best[name] for name in sorted(best)), source)


def profiling_spec(node: ConfigNode, engine: Engine) -> ProfilingSpec | None:
    """The service's opt-in profiling run, or None."""
    if node.value is None:
        return None
    node.mapping(PROFILING_KEYS)
    if engine is not Engine.VLLM:
        return node.problem(
            f"runs vLLM's own benchmark, so it needs engine vllm, not {engine.value}", None
        )
    if node.child("profiles").value in (None, []):
        return node.child("profiles").problem("is required: the profiles to measure", None)
    profiles = node.child("profiles").texts(formats.MIG_PROFILE)
    for rank, profile in enumerate(profiles):
        if profiles.index(profile) != rank:
            node.child("profiles").child(rank).problem(
                f"{shown(profile)} is listed twice (its two Jobs would have one name)", None
            )
    return ProfilingSpec(
        profiles=tuple(dict.fromkeys(profiles)),
        num_prompts=node.child("numPrompts").integer(200, bound=formats.PROMPTS) or 200,
        input_tokens=node.child("inputTokens").integer(512, bound=formats.TOKENS) or 512,
        output_tokens=node.child("outputTokens").integer(128, bound=formats.TOKENS) or 128,
        max_concurrency=node.child("maxConcurrency").integer(bound=formats.CONCURRENCY),
    )
