"""The gateway on paths no shipped stack takes: every gateway pod a created cluster's system pool
holds must fit it together, and `diff` says what callers meet when the gateway is published."""

from __future__ import annotations

import copy
import math

import pytest

from mig_inference.clouds import Cloud
from mig_inference.clouds.system_pool import SYSTEM_POOLS
from mig_inference.errors import MigErrors
from tests.plan.test_gateway_plan import CREATED_EKS, DEMAND, TLS, config_of, keyed, plan_of


def test_the_pickers_of_every_model_must_fit_the_created_system_pool_together() -> None:
    """eks-p4de-demand on a cluster it creates, each picker at 1.9 CPUs (under one m6i.large's
    1.93): its two models run four pickers, 7.6 CPUs, where the system node group runs two
    nodes (no autoscaler), 3.86 CPUs, before istiod, the gateway's and the router's pods."""
    system = SYSTEM_POOLS[Cloud.EKS]
    config = config_of(DEMAND, gateway={"endpointPicker": {"cpu": 1.9}},
                       cluster={**config_of(DEMAND)["cluster"], **CREATED_EKS})  # fmt: skip
    assert system.allocatable_cpu > 1.9  # each picker alone fits one node
    with pytest.raises(MigErrors) as raised:
        plan_of(config)
    [error] = raised.value.errors
    assert error.path == "mig-inference:gateway.endpointPicker.cpu"
    # Two nodes (no GPU pool autoscales: no Cluster Autoscaler) of 1.93, less the router's,
    # Istio's gateway pods' and istiod's 0.2 + 0.2 + 0.5, over four pickers.
    most = (2 * system.allocatable_cpu - 0.9) / 4
    assert f"at most {math.floor(most * 100) / 100:g}" in str(error)
    assert "7.6" in str(error) and "istiod" in str(error)
    fitting = config_of(DEMAND, gateway={"endpointPicker": {"cpu": math.floor(most * 100) / 100}},
                        cluster={**config_of(DEMAND)["cluster"], **CREATED_EKS})  # fmt: skip
    assert plan_of(fitting).gateway is not None


def test_diff_says_callers_change_when_the_gateway_is_published() -> None:
    from mig_inference.changes.gateway import caller_changes
    from mig_inference.changes.record import plan_record

    deployed = plan_record(plan_of(config_of(DEMAND, gateway={})))
    published = plan_record(
        plan_of(keyed(config_of(DEMAND, gateway={"address": "external", "tls": dict(TLS)})))
    )
    assert deployed["gateway"]["endpoint"] != published["gateway"]["endpoint"]
    notes = caller_changes(copy.deepcopy(deployed), published)
    note = notes["summarize-2g-20gb"]
    assert published["gateway"]["endpoint"] in note and deployed["gateway"]["endpoint"] in note
    assert f"host {TLS['hostname']} only" in note and "Authorization: Bearer" in note
    assert set(notes) == set(published["services"]) - {"embedder"}  # tgi: not routed
    from mig_inference.changes.change_plan import ServiceChange, diff_records

    changed = {s.name: s for s in diff_records(deployed, published).services}
    assert changed["summarize-2g-20gb"].change is ServiceChange.CALLERS
