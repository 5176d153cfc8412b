"""A pool's time-slicing changing on its running nodes while the engines' memory share changes
with it: the new replicas cannot start where old ones still hold their share.

A time-sliced device's replicas divide its memory by utilization (`plan.sharing.utilization`:
0.9 alone, 0.45 shared by two), so adding or removing `sharing` changes vLLM's
`--gpu-memory-utilization` of every service on the pool, and their Deployments roll. vLLM v0.33.0
refuses to start when the device's free memory is below its share of the device's total
(`vllm/v1/worker/utils.py` `request_memory`: "Free memory on device ... on startup is less than
desired GPU memory utilization"); read in the sdist on PyPI. On a pool whose nodes stay (GKE and
EKS operator pools and existing clusters change sharing in place: a new device-plugin config,
the same nodes), the new replica lands on a device the device plugin hands out afresh (the
time-sliced devices' IDs are not the old ones), which an old replica may still hold: at 0.9
beside 0.45, or 0.45 twice beside 0.9, it exits, its container restarts, and the rolling update
(one replica at a time, never a surge) waits for it forever while the old replica it waits on is
never replaced. So `diff` refuses such a change before simulating it, with the ways that work;
the program cannot read what it deployed, so a `pulumi up` run without `diff` is not refused
(docs/troubleshooting.md says what to do then). Pools that get new nodes for the change (OKE,
GKE-native, or a new generation for another reason) are not concerned: old and new replicas never
meet on a device. TGI takes its share with `--cuda-memory-fraction` too, but whether it refuses to
start the same way was not read here: only vLLM services are refused.
"""

from __future__ import annotations

from mig_inference.errors import MigError
from mig_inference.plan.sharing import sharing_text
from mig_inference.plan.stack_plan import StackPlan
from mig_inference.spec import Engine
from mig_inference.spec.stack import key_path

VLLM_REFUSAL = (
    "vLLM v0.33.0 exits at start when the device's free memory is below its share of the total "
    "(vllm/v1/worker/utils.py request_memory)"
)


def shared_memory_refusals(deployed: StackPlan, current: StackPlan) -> list[MigError]:
    """One error per pool whose sharing changes on its running nodes while vLLM services on it
    change their memory share."""
    before = {pool.name: pool for pool in deployed.pools}
    old_services = {service.name: service for service in deployed.services}
    refusals = []
    for index, pool in enumerate(current.pools):
        old = before.get(pool.name)
        if old is None or old.generation != pool.generation:
            continue  # new nodes: the old replicas stay on the old ones
        was, now = sharing_text(old.spec.sharing), sharing_text(pool.spec.sharing)
        if was == now:
            continue
        moving = []
        for service in current.services:
            previous = old_services.get(service.name)
            if (
                service.pool.name != pool.name
                or service.spec.engine is not Engine.VLLM
                or previous is None
                or previous.pool.name != pool.name
                or previous.memory_utilization == service.memory_utilization
            ):
                continue
            moving.append((previous.memory_utilization, service.memory_utilization, service.name))
        if not moving:
            continue
        services = ", ".join(f"{name} ({a:g} -> {b:g})" for a, b, name in moving)
        down = all(b < a for a, b, _ in moving)
        refusals.append(
            MigError(
                _message(pool.name, was, now, services, down),
                f"{key_path('pools')}[{index}].sharing",
            )
        )
    return refusals


def _message(pool: str, was: str, now: str, services: str, down: bool) -> str:
    ways = []
    if down:
        ways.append(
            "first give these services gpuMemoryUtilization at the new share with the old "
            "sharing kept (one `pulumi up`: each new replica takes the device its old one left, "
            "the device IDs unchanged), then change the sharing with those values kept (their "
            "replicas do not restart)"
        )
    ways.append(
        "or bring the new sharing up on new nodes: a new pool (another name) with it, the "
        "services moved there (services[].pool), the old pool removed in a later `pulumi up`"
    )
    ways.append(f"or keep sharing {was}")
    return (
        f"pool {pool}: its sharing changes on its running nodes ({was} -> {now}), and with it the "
        f"memory share of {services}: a new replica may land on a device an old one still holds "
        f"its share of, and {VLLM_REFUSAL}; it would restart until the rolling update's deadline "
        f"while the replica it waits for is never replaced. Ways forward: {'; '.join(ways)}"
    )
