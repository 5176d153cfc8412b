"""Re-planning from observed load, the rules alone (`mig_inference.changes.replan`): each
service's new figure from an observation, and every guard rail, on plans of small stacks."""

from __future__ import annotations

from typing import Any

import pytest

from mig_inference.changes.observed import Observation
from mig_inference.changes.replan import ReplanRules, ServiceReplan, replan, rounded
from mig_inference.plan import StackPlan, plan_stack
from mig_inference.spec import parse_stack
from mig_inference.versions import GPU_OPERATOR_VERSION

POOL = {"name": "a100", "gpu": "A100-80GB", "machineType": "p4de.24xlarge", "nodes": 1,
        "mig": "all-balanced", "maxPods": 110}  # fmt: skip
RATES = [{"profile": "1g.10gb", "requestsPerSecond": 9},
         {"profile": "2g.20gb", "requestsPerSecond": 16},
         {"profile": "3g.40gb", "requestsPerSecond": 25}]  # fmt: skip


def plan(*services: dict[str, Any]) -> StackPlan:
    values = {"cloud": "eks", "cluster": {"name": "c", "region": "us-east-1",
              "subnetIds": ["subnet-00000005"]}, "pools": [POOL], "services": list(services)}  # fmt: skip
    return plan_stack(parse_stack("t", values, pinned_operator_version=GPU_OPERATOR_VERSION))


def demand(name: str = "chat", rate: float = 60, **extra: Any) -> dict[str, Any]:
    return {"name": name, "model": f"org/{name}", "memoryGiB": 3, "requestsPerSecond": rate,
            "throughput": RATES, **extra}  # fmt: skip


def fixed(name: str = "embed", replicas: int | str = 2, **extra: Any) -> dict[str, Any]:
    return {"name": name, "model": f"org/{name}", "memoryGiB": 3, "profile": "1g.10gb",
            "replicas": replicas, **extra}  # fmt: skip


def seen(
    model: str, rate: float, samples: int = 60, namespace: str = "inference", **extra: Any
) -> dict[tuple[str, str], Observation]:
    observation = Observation(namespace, model, rate, samples, rate * 3600, 3600, **extra)
    return {(namespace, model): observation}


def one(
    plan_: StackPlan, observed: dict[tuple[str, str], Observation], **rules: Any
) -> tuple[ServiceReplan, tuple[str, ...]]:
    result = replan(plan_, observed, ReplanRules(**rules))
    return result.services[0], result.warnings


def test_a_demand_service_gets_the_observed_rate() -> None:
    service, warnings = one(plan(demand(rate=60)), seen("org/chat", 120.0))
    assert (service.key, service.before, service.after, service.changed) == (
        "requestsPerSecond", 60, 120.0, True,
    )  # fmt: skip
    assert service.reason == "the observed rate" and warnings == ()
    shrunk, _ = one(plan(demand(rate=60)), seen("org/chat", 15.0))
    assert shrunk.after == 15.0


@pytest.mark.parametrize(
    ("bounds", "rate", "after", "which"),
    [({"minRequestsPerSecond": 40}, 15.0, 40, "minRequestsPerSecond"),
     ({"maxRequestsPerSecond": 100}, 500.0, 100, "maxRequestsPerSecond"),
     ({"minRequestsPerSecond": 40, "maxRequestsPerSecond": 100}, 70.0, 70.0, None)],
)  # fmt: skip
def test_the_stack_s_floor_and_ceiling_bound_a_demand(
    bounds: dict[str, float], rate: float, after: float, which: str | None
) -> None:
    service, _ = one(plan(demand(rate=60, replan=bounds)), seen("org/chat", rate))
    assert service.after == after
    assert (which is not None) == service.reason.endswith(f"bounded by replan.{which}")


def test_no_service_is_shrunk_to_zero() -> None:
    idle, _ = one(plan(demand(rate=60)), seen("org/chat", 0.0))
    assert (idle.after, idle.changed) == (60, False) and "never shrunk to zero" in idle.reason
    floored, _ = one(plan(demand(rate=60, replan={"minRequestsPerSecond": 5})), seen("org/chat", 0))
    assert floored.after == 5
    replicas, _ = one(plan(fixed(replan={"throughput": RATES})), seen("org/embed", 0.0))
    assert (replicas.after, replicas.changed) == (2, False)
    # A trickle still keeps one replica: the count is rounded up, never down to none.
    trickle, _ = one(plan(fixed(replan={"throughput": RATES})), seen("org/embed", 0.01))
    assert trickle.after == 1


def test_too_few_samples_keep_the_service_with_a_warning() -> None:
    service, warnings = one(plan(demand()), seen("org/chat", 120.0, samples=9), min_samples=10)
    assert (service.key, service.after, service.changed) == (None, None, False)
    assert warnings == (
        "service chat: kept: 9 one-minute rate sample(s) in the window, fewer than the 10 "
        "(--min-samples) its figure needs",
    )
    trusted, _ = one(plan(demand()), seen("org/chat", 120.0, samples=10), min_samples=10)
    assert trusted.after == 120.0


def test_a_service_without_samples_is_kept_with_a_warning() -> None:
    service, warnings = one(plan(demand()), seen("org/other", 120.0))
    assert service.key is None and service.reason == "kept: no samples in the window"
    assert warnings == (
        "service chat: kept: no org/chat requests in namespace inference in the window",
    )


def test_a_saturated_service_may_grow_but_never_shrinks() -> None:
    held, _ = one(plan(demand(rate=60)), seen("org/chat", 30.0, queue_seconds=0.8))
    assert held.after == 60 and held.reason == (
        "saturated (requests waited 0.80 s in the queue on average): the observed rate is what "
        "its replicas could serve, so it is not shrunk"
    )
    grown, _ = one(plan(demand(rate=60)), seen("org/chat", 90.0, queue_seconds=0.8))
    assert grown.after == 90.0
    calm, _ = one(plan(demand(rate=60)), seen("org/chat", 30.0, queue_seconds=0.4))
    assert calm.after == 30.0
    count, _ = one(
        plan(fixed(replicas=4, replan={"throughput": RATES})),
        seen("org/embed", 9.0, queue_seconds=0.8),
    )
    assert count.after == 4


def test_a_demand_within_the_tolerance_is_left_as_it_is() -> None:
    near, _ = one(plan(demand(rate=60)), seen("org/chat", 65.0), tolerance=0.10)
    assert (near.after, near.changed) == (60, False) and "within 10%" in near.reason
    far, _ = one(plan(demand(rate=60)), seen("org/chat", 67.0), tolerance=0.10)
    assert far.after == 67.0
    # A figure outside the stack's own bounds is moved into them, however close.
    outside, _ = one(
        plan(demand(rate=60, replan={"maxRequestsPerSecond": 58})), seen("org/chat", 59.0)
    )
    assert outside.after == 58


def test_a_replica_count_follows_what_one_replica_serves() -> None:
    table = {"throughput": [{"profile": "1g.10gb", "requestsPerSecond": 10}]}
    grown, _ = one(plan(fixed(replicas=2, replan=table)), seen("org/embed", 45.0))
    assert (grown.key, grown.before, grown.after) == ("replicas", 2, 5)
    assert grown.reason == "45 requests/s at 10/s per 1g.10gb replica"
    exact, _ = one(plan(fixed(replicas=2, replan=table)), seen("org/embed", 40.0))
    assert exact.after == 4
    capped, _ = one(
        plan(fixed(replicas=2, replan={**table, "maxReplicas": 3})), seen("org/embed", 45.0)
    )
    assert capped.after == 3 and capped.reason.endswith("bounded by replan.maxReplicas")
    floored, _ = one(
        plan(fixed(replicas=2, replan={**table, "minReplicas": 2})), seen("org/embed", 4.0)
    )
    assert floored.after == 2


def test_a_replica_count_without_what_a_replica_serves_is_kept() -> None:
    bare, _ = one(plan(fixed()), seen("org/embed", 45.0))
    assert bare.key is None and "without replan.throughput" in bare.reason
    other = {"throughput": [{"profile": "3g.40gb", "requestsPerSecond": 30}]}
    unrated, _ = one(plan(fixed(replan=other)), seen("org/embed", 45.0))
    assert unrated.key is None and "rates no 1g.10gb" in unrated.reason


@pytest.mark.parametrize(
    ("service", "reason"),
    [(fixed(hpaMaxReplicas=4), "kept: autoscaled"),
     (fixed(replicas="fill"), "kept: replicas: fill"),
     (fixed(engine="tgi"), "kept: engine tgi (replan reads vLLM's counters)")],
)  # fmt: skip
def test_autoscaled_fill_and_other_engines_are_kept(service: dict[str, Any], reason: str) -> None:
    kept, _ = one(plan(service), seen("org/embed", 45.0))
    assert (kept.key, kept.reason) == (None, reason)


def test_the_served_model_name_is_what_is_looked_up() -> None:
    named = demand(args=["--served-model-name", "chat-v2"])
    service, _ = one(plan(named), seen("chat-v2", 120.0))
    assert (service.model_name, service.after) == ("chat-v2", 120.0)


def test_one_model_in_two_namespaces_is_two_figures_and_in_one_is_ambiguous() -> None:
    apart = plan(
        demand("a", model="org/m", namespace="team-a"),
        demand("b", model="org/m", namespace="team-b"),
    )
    observed = {
        **seen("org/m", 120.0, namespace="team-a"),
        **seen("org/m", 30.0, namespace="team-b"),
    }
    result = replan(apart, observed)
    assert [s.after for s in result.services] == [120.0, 30.0]
    together = plan(demand("a", model="org/m"), demand("b", model="org/m"))
    result = replan(together, seen("org/m", 120.0))
    assert [s.key for s in result.services] == [None, None]
    assert result.warnings[0].startswith(
        "service a: kept: a, b serve model org/m in namespace inference, and vLLM's counters"
    )


def test_the_observed_request_shape_is_checked_against_the_table_s() -> None:
    profiled = demand(latencyMs=2000, profiling={"profiles": ["1g.10gb"], "inputTokens": 512,
                                                 "outputTokens": 128})  # fmt: skip
    _, warnings = one(
        plan(profiled),
        seen("org/chat", 120.0, prompt_tokens_per_request=1800.0,
             generation_tokens_per_request=130.0, first_token_seconds=2.5),
    )  # fmt: skip
    assert warnings == (
        "service chat: requests averaged 1,800 prompt tokens; its profiling runs use 512: what "
        "one replica serves may differ from its throughput table (profile again with the "
        "observed lengths)",
        "service chat: 5% of its requests waited more than 2,500 ms for their first token, "
        "beyond its latencyMs (2000 ms)",
    )
    _, quiet = one(plan(profiled), seen("org/chat", 120.0, prompt_tokens_per_request=600.0,
                                        first_token_seconds=1.9))  # fmt: skip
    assert quiet == ()


def test_changes_are_whole_numbers_where_they_can_be() -> None:
    result = replan(plan(demand(rate=60), demand("sum", rate=10)),
                    {**seen("org/chat", 120.0), **seen("org/sum", 2.5)})  # fmt: skip
    assert result.changes() == {0: ("requestsPerSecond", 120), 1: ("requestsPerSecond", 2.5)}
    assert isinstance(result.changes()[0][1], int)


@pytest.mark.parametrize(
    ("rate", "written"),
    [(119.99999999999997, 120.0), (123.456, 123.0), (0.0012345, 0.00123), (1234.5, 1230.0),
     (0.0, 0.0)],
)  # fmt: skip
def test_a_rate_is_written_with_three_significant_digits(rate: float, written: float) -> None:
    assert rounded(rate) == written
