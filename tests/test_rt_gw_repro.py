"""Red-team reproductions (rt-gw): defects of the gateway found by trying paths no shipped stack
takes. Each is `xfail(strict=True)`: it fails today as the defect says; when the defect is fixed
it passes, strict xfail turns that into a failure, and the marker is to be removed."""

from __future__ import annotations

import copy

import pytest

from mig_inference.clouds import Cloud
from mig_inference.clouds.system_pool import SYSTEM_POOLS
from mig_inference.errors import MigErrors
from tests.test_gateway_plan import CREATED_EKS, DEMAND, TLS, config_of, keyed, plan_of


@pytest.mark.xfail(strict=True, reason="rt-gw D1: the system pool is checked per picker, never "
                   "for all the pods the stack puts there together")  # fmt: skip
def test_the_pickers_of_every_model_must_fit_the_created_system_pool_together() -> None:
    """eks-p4de-demand on a cluster it creates, each picker at 1.9 CPUs (under one m6i.large's
    1.93): its two models run four pickers, 7.6 CPUs, where the system node group runs two
    nodes (no autoscaler), 3.86 CPUs, before istiod, the gateway's and the router's pods."""
    system = SYSTEM_POOLS[Cloud.EKS]
    config = config_of(DEMAND, gateway={"endpointPicker": {"cpu": 1.9}},
                       cluster={**config_of(DEMAND)["cluster"], **CREATED_EKS})  # fmt: skip
    gateway = plan_of(config).gateway  # today: planned, no word
    assert gateway is not None
    asked = sum(2 * pool.picker_size.cpu for pool in gateway.pools)
    assert asked > 2 * system.allocatable_cpu  # 7.6 > 3.86: cannot all run
    with pytest.raises(MigErrors):
        plan_of(config)


@pytest.mark.xfail(strict=True, reason="rt-gw D3: diff reports no caller change when the gateway "
                   "goes internal -> external (new URL, port 443, hostname-only routes, API keys)")  # fmt: skip
def test_diff_says_callers_change_when_the_gateway_is_published() -> None:
    from mig_inference.changes.gateway import caller_changes
    from mig_inference.changes.record import plan_record

    deployed = plan_record(plan_of(config_of(DEMAND, gateway={})))
    published = plan_record(
        plan_of(keyed(config_of(DEMAND, gateway={"address": "external", "tls": dict(TLS)})))
    )
    assert deployed["gateway"]["endpoint"] != published["gateway"]["endpoint"]
    notes = caller_changes(copy.deepcopy(deployed), published)
    assert "summarize-2g-20gb" in notes  # today: {}
