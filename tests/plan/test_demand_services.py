"""Services sized by demand in a stack: replicas per profile chosen by the planner, one
Deployment per profile behind one Service, and errors that name the key."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest
import yaml

from mig_inference.errors import MigErrors
from mig_inference.plan import plan_stack
from mig_inference.plan.demand import demand_served
from mig_inference.spec import parse_stack
from mig_inference.versions import GPU_OPERATOR_VERSION
from tests.mocked import stack_rendering

POOL = {"name": "a100", "gpu": "A100-80GB", "machineType": "p4de.24xlarge", "nodes": 1,
        "mig": "all-balanced", "maxPods": 110}  # fmt: skip
RATES = [{"profile": "1g.10gb", "requestsPerSecond": 9, "latencyMs": 1500},
         {"profile": "2g.20gb", "requestsPerSecond": 16, "latencyMs": 1200},
         {"profile": "3g.40gb", "requestsPerSecond": 25, "latencyMs": 900, "measured": True}]  # fmt: skip


def stack(*services: dict[str, Any]) -> dict[str, Any]:
    return {"cloud": "eks", "cluster": {"name": "c", "region": "us-east-1", "subnetIds": ["subnet-00000005"]},
            "pools": [POOL], "services": list(services)}  # fmt: skip


def chat(**extra: Any) -> dict[str, Any]:
    return {"name": "chat", "model": "m", "memoryGiB": 3, "requestsPerSecond": 60,
            "throughput": RATES, **extra}  # fmt: skip


def plan(values: dict[str, Any]) -> Any:
    return plan_stack(parse_stack("t", values, pinned_operator_version=GPU_OPERATOR_VERSION))


def errors(values: dict[str, Any]) -> list[tuple[str | None, str]]:
    with pytest.raises(MigErrors) as raised:
        plan(values)
    return [(e.path, e.message) for e in raised.value.errors]


def test_the_demand_stack_runs_one_deployment_per_profile_behind_one_service() -> None:
    rendering = stack_rendering("eks-p4de-demand")
    deployments = {d.name: d.inputs for d in rendering.of_type("kubernetes:apps/v1:Deployment")}
    # The stack's gateway adds its body-based router beside the services' Deployments.
    assert deployments.pop("gateway-router")["spec"]["template"]["spec"]["containers"]
    assert {"chat-1g-10gb", "summarize-2g-20gb", "summarize-3g-40gb", "embedder"} == set(
        deployments
    )
    services = {s.inputs["metadata"]["name"]: s.inputs
                for s in rendering.of_type("kubernetes:core/v1:Service")}  # fmt: skip
    assert services.pop("body-based-router")  # the gateway's router, beside the services
    assert set(services) == {"chat", "summarize", "embedder"}
    assert services["summarize"]["spec"]["selector"] == {
        "app.kubernetes.io/instance": "summarize",
        "app.kubernetes.io/component": "inference",
    }
    # Named after the service, whichever profile leads: the mix may change, the Service stays.
    assert [s.name for s in rendering.of_type("kubernetes:core/v1:Service")
            if s.inputs["metadata"]["name"] == "summarize"] == ["summarize-service"]  # fmt: skip
    for part in ("summarize-2g-20gb", "summarize-3g-40gb"):
        pod_labels = deployments[part]["spec"]["template"]["metadata"]["labels"]
        assert pod_labels["app.kubernetes.io/instance"] == "summarize"
        assert pod_labels["app.kubernetes.io/name"] == part
    limits = deployments["summarize-3g-40gb"]["spec"]["template"]["spec"]["containers"][0]
    assert limits["resources"]["limits"]["nvidia.com/mig-3g.40gb"] == "1"
    assert deployments["summarize-2g-20gb"]["spec"]["replicas"] == 8
    assert deployments["summarize-3g-40gb"]["spec"]["replicas"] == 3
    endpoints = rendering.outputs["services"]
    assert endpoints["summarize-2g-20gb"]["endpoint"] == endpoints["summarize-3g-40gb"]["endpoint"]
    assert endpoints["summarize-3g-40gb"]["endpoint"].startswith("http://summarize.inference.")


@pytest.mark.parametrize("rate", [5, 9, 10, 33, 60, 100, 150, 250])
def test_least_memory_that_meets_the_demand_matches_brute_force(rate: int) -> None:
    """On a fixed layout the demand is served from what is left at the least memory."""
    result = plan(stack(chat(requestsPerSecond=rate)))
    [served] = demand_served(result.services)
    chosen = {p.profile: p.replicas for p in served.parts}
    memory = {"1g.10gb": 9_728, "2g.20gb": 19_968, "3g.40gb": 40_192}
    rates = {"1g.10gb": 9, "2g.20gb": 16, "3g.40gb": 25}
    best = min(
        (sum(memory[p] * n for p, n in zip(memory, counts, strict=True)), counts)
        for counts in itertools.product(range(17), range(9), range(9))
        if sum(rates[p] * n for p, n in zip(rates, counts, strict=True)) >= rate
    )
    assert sum(memory[p] * n for p, n in chosen.items()) == best[0]
    assert served.served >= rate


def test_demand_beyond_what_the_pool_leaves_names_the_key() -> None:
    assert errors(stack(chat(requestsPerSecond=1000))) == [(
        "mig-inference:services[0].requestsPerSecond",
        "needs 1000 requests/s; what pool a100 has left serves at most 472 (16 x 1g.10gb at "
        "9/s, 8 x 2g.20gb at 16/s, 8 x 3g.40gb at 25/s)",
    )]  # fmt: skip


def test_a_latency_target_no_profile_meets_names_the_key() -> None:
    [(path, message)] = errors(stack(chat(latencyMs=500)))
    assert path == "mig-inference:services[0].latencyMs"
    assert message == "no profile meets 500 ms: the fastest point is 900 ms on 3g.40gb"


def test_slower_points_are_left_out_by_the_latency_target() -> None:
    result = plan(stack(chat(latencyMs=1000)))
    [served] = demand_served(result.services)
    assert [p.profile for p in served.parts] == ["3g.40gb"] and served.parts[0].measured


@pytest.mark.parametrize(
    ("extra", "key", "message"),
    [
        ({"replicas": 3}, "replicas", "give replicas (or an autoscaler) or requestsPerSecond"),
        ({"hpaMaxReplicas": 3}, "hpaMaxReplicas", "not both"),
        ({"profile": "1g.10gb"}, "profile", "leave profile out"),
        ({"throughput": None}, "throughput", "give throughput"),
        ({"throughputFile": "x.yaml"}, "throughput", "one of them"),
    ],
)
def test_bad_demand_keys_are_named(extra: dict[str, Any], key: str, message: str) -> None:
    service = {k: v for k, v in chat(**extra).items() if v is not None}
    found = errors(stack(service))
    assert any(p == f"mig-inference:services[0].{key}" and message in m for p, m in found), found


def test_throughput_only_with_a_demand() -> None:
    found = errors(stack({"name": "x", "model": "m", "memoryGiB": 3, "throughput": RATES}))
    assert found == [
        ("mig-inference:services[0].throughput", "only applies with requestsPerSecond")
    ]


def test_profiles_the_pool_does_not_offer() -> None:
    rates = [{"profile": "4g.40gb", "requestsPerSecond": 30}]
    [(path, message)] = errors(stack(chat(throughput=rates)))
    assert path == "mig-inference:services[0].throughput"
    assert message.startswith("no pool offers a slice its throughput table rates (4g.40gb")


def test_a_throughput_file_from_a_profiling_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    measured = [{**point, "measured": True} for point in RATES]
    Path("chat.yaml").write_text(yaml.safe_dump({"throughput": measured}))
    service = {k: v for k, v in chat(throughputFile="chat.yaml").items() if k != "throughput"}
    [served] = demand_served(plan(stack(service)).services)
    assert served.source == "chat.yaml" and all(p.measured for p in served.parts)
    missing = {**service, "throughputFile": "nope.yaml"}
    [(path, message)] = errors(stack(missing))
    assert path == "mig-inference:services[0].throughputFile" and "nope.yaml" in message


def test_an_auto_pool_is_sized_for_its_demand_in_one_optimisation() -> None:
    pool = {k: v for k, v in POOL.items() if k != "nodes"} | {"mig": "auto"}
    fixed = {"name": "embed", "model": "e", "memoryGiB": 3, "profile": "1g.10gb", "replicas": 4}
    values = {**stack(chat(requestsPerSecond=300), fixed), "pools": [pool]}
    result = plan(values)
    [planned_pool] = result.pools
    assert planned_pool.pack_plan is not None and planned_pool.pack_plan.optimal
    [served] = demand_served(result.services)
    assert served.served >= 300
    used = sum(p.replicas for p in served.parts) + 4
    assert used <= sum(planned_pool.capacity().values())


def test_demands_on_one_pool_are_chosen_together() -> None:
    """`chat` first could take the 2g slices `summarize` needs; chosen together both fit."""
    chat2 = {"name": "chat", "model": "m", "memoryGiB": 3, "requestsPerSecond": 100,
             "throughput": [{"profile": "1g.10gb", "requestsPerSecond": 9},
                            {"profile": "2g.20gb", "requestsPerSecond": 20}]}  # fmt: skip
    summarize = {"name": "summarize", "model": "m", "memoryGiB": 3, "requestsPerSecond": 160,
                 "throughput": [{"profile": "2g.20gb", "requestsPerSecond": 20}]}  # fmt: skip
    served = {d.service: d for d in demand_served(plan(stack(chat2, summarize)).services)}
    assert {p.profile: p.replicas for p in served["summarize"].parts} == {"2g.20gb": 8}
    assert {p.profile: p.replicas for p in served["chat"].parts} == {"1g.10gb": 12}


def test_slices_too_small_for_the_model_are_not_used() -> None:
    big = chat(memoryGiB=15)  # more than a 1g.10gb holds
    [served] = demand_served(plan(stack(big)).services)
    assert "1g.10gb" not in {p.profile for p in served.parts}
    only_small = chat(memoryGiB=15, throughput=[RATES[0]])
    [(path, message)] = errors(stack(only_small))
    assert path == "mig-inference:services[0].throughput" and "that holds its 15,360 MiB" in message


def test_a_part_named_like_another_service_is_refused() -> None:
    clash = {"name": "chat-1g-10gb", "model": "m", "memoryGiB": 3, "replicas": 1,
             "profile": "1g.10gb"}  # fmt: skip
    found = errors(stack(chat(), clash))
    assert ("mig-inference:services[1].name",
            "its Deployment 'chat-1g-10gb' is also service chat's (a service sized by demand runs "
            "a Deployment per profile, `<service>-<profile>`); rename one") in found  # fmt: skip


def test_diff_says_which_deployments_replace_a_service_sized_by_demand() -> None:
    from mig_inference.changes.change_plan import diff_records
    from mig_inference.changes.record import plan_record

    fixed = {"name": "chat", "model": "m", "memoryGiB": 3, "replicas": 7, "profile": "1g.10gb"}
    before = plan_record(plan(stack(fixed)))
    after = plan_record(plan(stack(chat())))
    changes = {s.name: s for s in diff_records(before, after).services}
    assert changes["chat"].reason.startswith("chat is served by chat-1g-10gb now")
    assert changes["chat-1g-10gb"].reason.startswith("serves chat on 1g.10gb in place of chat")
