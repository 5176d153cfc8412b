"""`services[].replan`, the stack keys that bound what `replan` may set: read, refused where
they do not apply (naming the key and what is allowed), and documented."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from mig_inference.errors import MigErrors
from mig_inference.spec import parse_stack
from mig_inference.spec.model import ReplanSpec, ThroughputPoint
from mig_inference.spec.replan import REPLAN_KEYS
from mig_inference.versions import GPU_OPERATOR_VERSION
from tests.changes.test_replan import POOL, RATES, demand, fixed

DOCS = Path(__file__).resolve().parent.parent.parent / "docs"


def services(*items: dict[str, Any]) -> Any:
    values = {"cloud": "eks", "cluster": {"name": "c", "region": "us-east-1",
              "subnetIds": ["subnet-00000005"]}, "pools": [POOL], "services": list(items)}  # fmt: skip
    return parse_stack("t", values, pinned_operator_version=GPU_OPERATOR_VERSION).services


def errors(*items: dict[str, Any]) -> list[tuple[str | None, str, Any]]:
    with pytest.raises(MigErrors) as raised:
        services(*items)
    return [(e.path, e.message, e.allowed) for e in raised.value.errors]


def test_a_demand_service_takes_a_floor_and_a_ceiling_in_requests_per_second() -> None:
    [spec] = services(demand(replan={"minRequestsPerSecond": 5, "maxRequestsPerSecond": 400}))
    assert spec.replan == ReplanSpec(min_requests_per_second=5, max_requests_per_second=400)
    [plain] = services(demand())
    assert plain.replan == ReplanSpec()


def test_a_replica_count_takes_bounds_and_what_one_replica_serves(tmp_path: Path) -> None:
    [spec] = services(fixed(replan={"minReplicas": 2, "maxReplicas": 8, "throughput": RATES}))
    assert (spec.replan.min_replicas, spec.replan.max_replicas) == (2, 8)
    assert spec.replan.throughput[0] == ThroughputPoint("1g.10gb", 9)
    table = tmp_path / "embed.yaml"
    table.write_text("throughput:\n  - {profile: 1g.10gb, requestsPerSecond: 12}\n")
    [named] = services(fixed(replan={"throughputFile": str(table)}))
    assert named.replan.throughput == (ThroughputPoint("1g.10gb", 12),)
    assert named.replan.throughput_source == str(table)


@pytest.mark.parametrize(
    ("service", "key", "message"),
    [(demand(replan={"minReplicas": 2}), "minReplicas",
      "does not apply to a service sized by requestsPerSecond; it takes minRequestsPerSecond, "
      "maxRequestsPerSecond"),
     (fixed(replan={"maxRequestsPerSecond": 9}), "maxRequestsPerSecond",
      "does not apply to a service with a replica count; it takes minReplicas, maxReplicas, "
      "throughput, throughputFile"),
     (fixed(hpaMaxReplicas=4, replan={"minReplicas": 1}), "minReplicas",
      "does not apply to a service sized by an autoscaler (hpaMaxReplicas, queueAutoscaling); "
      "replan keeps it as is"),
     (fixed(replicas="fill", replan={"maxReplicas": 1}), "maxReplicas",
      "does not apply to a service with replicas: fill; replan keeps it as is"),
     (demand(replan={"minRequestsPerSecond": 50, "maxRequestsPerSecond": 40}),
      "minRequestsPerSecond", "must be <= maxRequestsPerSecond (40), got 50"),
     (fixed(replan={"minReplicas": 5, "maxReplicas": 4}), "minReplicas",
      "must be <= maxReplicas (4), got 5"),
     (fixed(replan={"minReplicas": 0}), "minReplicas", "must be >= 1, got 0"),
     (fixed(replan={"throughput": RATES, "throughputFile": "x.yaml"}), "throughputFile",
      "give throughput or throughputFile, not both"),
     (demand(replan={"minRequestsPerSecond": 0}), "minRequestsPerSecond", "must be >= 1e-06"),
     (demand(replan={"ceiling": 3}), "ceiling", "unknown key 'ceiling'")],
)  # fmt: skip
def test_keys_that_do_not_apply_are_named(service: dict[str, Any], key: str, message: str) -> None:
    found = errors(service)
    where = f"mig-inference:services[0].replan.{key}"
    assert any(path == where and message in text for path, text, _ in found), found


def test_the_refusal_lists_the_keys_that_apply() -> None:
    [(_, _, allowed)] = errors(demand(replan={"minReplicas": 2}))
    assert allowed == ["minRequestsPerSecond", "maxRequestsPerSecond"]


def test_replan_is_a_mapping() -> None:
    [(path, message, _)] = errors(demand(replan=[1]))
    assert path == "mig-inference:services[0].replan" and message.startswith("must be a mapping")


def test_every_replan_key_is_in_the_services_reference() -> None:
    """The services' table (docs/capacity.md, which the stack file reference continues)."""
    reference = (DOCS / "capacity.md").read_text(encoding="utf-8")
    [row] = [line for line in reference.splitlines() if line.startswith("| `replan` |")]
    documented = set(re.findall(r"`([A-Za-z][A-Za-z0-9]*)`", row))
    assert set(REPLAN_KEYS) <= documented


def test_the_typed_args_carry_replan_to_the_stack_values_and_back() -> None:
    """The component's inputs (mig_inference/components/stack_args.py) name the keys the stack file does."""
    from mig_inference.components.stack_args import stack_args, stack_values_of

    bounds = {"minReplicas": 2, "maxReplicas": 8, "throughput": RATES}
    values = {
        "cloud": "eks",
        "services": [fixed(replan=bounds), demand(replan={"maxRequestsPerSecond": 9})],
    }
    assert stack_values_of(stack_args(values)) == values
    assert stack_args(values)["services"][0]["replan"]["min_replicas"] == 2
