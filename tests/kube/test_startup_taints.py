"""The Cluster Autoscaler's startup taint on new nodes of autoscaled MIG pools: which clouds put
it on, that only the agent takes it off (the real script and kubectl against the fake API
server, whose nodes run either MIG manager model), and the agent's Deployment."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest

from mig_inference.kube.startup_taints import (
    TaintedPool,
    agent_targets_value,
    startup_taint_script,
    tainted_pools,
)
from mig_inference.names.labels import (
    GENERATION_LABEL,
    POOL_LABEL,
    STARTUP_TAINT,
    STARTUP_TAINT_KEY,
    STARTUP_TAINT_PREFIX,
)
from mig_inference.plan import plan_stack
from mig_inference.plan.pools.autoscaling import node_template_tags
from mig_inference.spec.files import load_stack
from tests.fake_apiserver import AGENTS, FakeCluster, run_script
from tests.mocked import b64, stack_rendering

SEVEN = ("1g.10gb",) * 7
CONFIGS = {"all-disabled": (None, None), "all-1g.10gb": (SEVEN, SEVEN),
           "all-3g.40gb": (("3g.40gb",) * 2,) * 2}  # fmt: skip
PLANNED = {"nvidia.com/mig-1g.10gb": 14}
STACK = "eks-p5-from-zero"
OTHER = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
STARTUP = {"key": STARTUP_TAINT_KEY, "value": "pending", "effect": "NoSchedule"}


@pytest.fixture(params=AGENTS)
def cluster(request: pytest.FixtureRequest) -> FakeCluster:
    return FakeCluster(CONFIGS, agents=request.param)


def node(cluster: FakeCluster, name: str, config: str, taints: list[dict[str, str]],
         **options: Any) -> None:  # fmt: skip
    labels = {POOL_LABEL: "burst", GENERATION_LABEL: "g1"}
    cluster.add_node(name, config, labels=labels, **options)
    cluster.nodes[name].obj["spec"]["taints"] = [dict(t) for t in taints]


def taint_keys(cluster: FakeCluster, name: str) -> list[str]:
    return [t["key"] for t in cluster.nodes[name].obj["spec"].get("taints") or []]


def run_agent(
    cluster: FakeCluster, tmp_path: Path, rounds: int
) -> subprocess.CompletedProcess[str]:
    target = TaintedPool("burst", f"{GENERATION_LABEL}=g1,{POOL_LABEL}=burst", "all-1g.10gb",
                         PLANNED)  # fmt: skip
    env = {"AGENT_TARGETS": agent_targets_value([target]), "AGENT_POLL_SECONDS": "1",
           "AGENT_ROUNDS": str(rounds), "KUBECTL_REQUEST_TIMEOUT": "2s",
           "KUBECTL_RETRY_SECONDS": "0"}  # fmt: skip
    result = run_script(cluster, tmp_path, startup_taint_script(), env)
    assert result.returncode == 0, result.stdout + result.stderr
    return result


def test_the_taint_comes_off_a_node_that_advertises_its_planned_slices(
    cluster: FakeCluster, tmp_path: Path
) -> None:
    node(cluster, "ready", "all-1g.10gb", [OTHER, STARTUP])
    node(cluster, "other-layout", "all-1g.10gb", [STARTUP], hardware=CONFIGS["all-3g.40gb"])
    node(cluster, "untainted", "all-1g.10gb", [OTHER])
    result = run_agent(cluster, tmp_path, rounds=1)
    # Only the startup taint, only where the slices are there; the pool's own taint stays.
    assert taint_keys(cluster, "ready") == ["nvidia.com/gpu"]
    assert "node ready (pool burst): advertises its planned devices" in result.stdout
    # 3g.40gb slices are not the 1g.10gb ones planned: the autoscaler must not count it yet.
    assert taint_keys(cluster, "other-layout") == [STARTUP_TAINT_KEY]
    assert taint_keys(cluster, "untainted") == ["nvidia.com/gpu"]
    # A node without the taint costs no request of its own, and nothing failed.
    assert not [r for r in cluster.requests if r.endswith("/nodes/untainted")]
    assert "failed" not in result.stdout
    assert [c for c in cluster.changes if c.startswith("patch")] == [
        f"patch ready taint {STARTUP_TAINT_KEY}:NoSchedule-"
    ]


def test_a_node_keeps_the_taint_until_its_mig_manager_applied_the_layout(
    cluster: FakeCluster, tmp_path: Path
) -> None:
    # A new node: its GPUs come up with MIG disabled, its MIG manager starts and applies the
    # layout its label names some requests later.
    node(cluster, "new", "all-1g.10gb", [STARTUP], hardware=CONFIGS["all-disabled"],
         running=False)  # fmt: skip
    run_agent(cluster, tmp_path, rounds=1)
    assert taint_keys(cluster, "new") == [STARTUP_TAINT_KEY]
    run_agent(cluster, tmp_path, rounds=60)
    assert cluster.nodes["new"].labels.get("nvidia.com/mig.config.state") == "success"
    assert taint_keys(cluster, "new") == []


def test_a_failed_patch_is_tried_again_next_round(cluster: FakeCluster, tmp_path: Path) -> None:
    node(cluster, "ready", "all-1g.10gb", [STARTUP])
    cluster.fail("PATCH", "/api/v1/nodes/ready")
    result = run_agent(cluster, tmp_path, rounds=2)
    assert "removing the startup taint failed (tried again next round)" in result.stdout
    assert taint_keys(cluster, "ready") == []


def test_autoscaled_mig_pools_carry_the_taint_on_every_cloud() -> None:
    [pool] = plan_stack(load_stack(STACK)).pools
    assert pool.autoscaled and pool.startup_taint == STARTUP_TAINT
    assert STARTUP_TAINT_KEY.startswith(STARTUP_TAINT_PREFIX)
    [group] = [g for g in stack_rendering(STACK).of_type("aws:eks/nodeGroup:NodeGroup")
               if "-system" not in g.name]  # fmt: skip
    assert {"key": STARTUP_TAINT_KEY, "value": "pending", "effect": "NO_SCHEDULE"} in group.inputs[
        "taints"
    ]
    # Left out of what the autoscaler imagines a new node offers: its templates must admit the
    # pending pods (and it strips startup taints from templates anyway).
    assert not any(STARTUP_TAINT_KEY in key for key in node_template_tags(pool))
    # The replicas do not tolerate it: they land once the agent took it off.
    assert all(t["key"] != STARTUP_TAINT_KEY for t in pool.tolerations)
    # Fixed-size pools: no taint (no autoscaler to mislead).
    assert all(p.startup_taint is None for p in plan_stack(load_stack("eks-p5-auto")).pools)


def test_gke_and_oke_put_the_taint_on_too(tmp_path: Path) -> None:
    from tests.components.test_platform_fit import render_values, stack_values

    gke = stack_values("gke-h100")
    gke["pools"][0]["nodes"] = {"min": 1, "max": 3}
    [pool] = render_values(tmp_path, gke).of_type("gcp:container/nodePool:NodePool")
    assert {"key": STARTUP_TAINT_KEY, "value": "pending", "effect": "NO_SCHEDULE"} in pool.inputs[
        "nodeConfig"
    ]["taints"]
    oke = stack_values("oke-h100")
    oke["pools"][0]["nodes"] = {"min": 1, "max": 3}
    (tmp_path / "oke").mkdir()
    [oke_pool] = [p for p in render_values(tmp_path / "oke", oke).of_type(
        "oci:ContainerEngine/nodePool:NodePool") if "-system" not in p.name]  # fmt: skip
    script = b64(oke_pool.inputs["nodeMetadata"]["user_data"])
    assert f"{STARTUP_TAINT_KEY}=pending:NoSchedule" in script


def test_the_agent_runs_off_the_gpu_nodes_with_only_node_rights() -> None:
    rendering = stack_rendering(STACK)
    objects = {(o["kind"], o["metadata"]["name"]): o for o in rendering.kubernetes_objects()}
    deployment = objects[("Deployment", "mig-startup-taints")]
    kubernetes_validate.validate(deployment, "1.33.0", strict=True)
    pod = deployment["spec"]["template"]["spec"]
    [container] = pod["containers"]
    env = {e["name"]: e["value"] for e in container["env"]}
    assert env["AGENT_TARGETS"] == agent_targets_value(tainted_pools(plan_stack(load_stack(STACK))))
    assert (
        pod["restartPolicy"] == "Always" and container["securityContext"]["readOnlyRootFilesystem"]
    )
    [term] = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]
    assert term["matchExpressions"] == [{"key": POOL_LABEL, "operator": "DoesNotExist"}]
    [role] = [o for (kind, _), o in objects.items()
              if kind == "ClusterRole" and o["metadata"]["name"].endswith("mig-startup-taints")]  # fmt: skip
    assert role["rules"] == [{"apiGroups": [""], "resources": ["nodes"],
                              "verbs": ["get", "list", "patch"]}]  # fmt: skip
    # No agent where no pool autoscales.
    assert not [o for o in stack_rendering("gke-h100").kubernetes_objects()
                if o["metadata"]["name"] == "mig-startup-taints"]  # fmt: skip


def test_the_simulator_takes_the_taint_off_before_replicas_land() -> None:
    """`diff` on an autoscaled pool's new generation: its new nodes come with the startup taint,
    the replicas (which do not tolerate it) land once the modelled agent took it off."""
    from tests.rollout.test_rollout import stack, transition

    v1 = stack("eks", nodes={"min": 1, "max": 2})
    v2 = stack("eks", nodes={"min": 1, "max": 2}, maxPods=80)
    outcome, _changes = transition(v1, v2)
    assert outcome.failure is None, outcome.failure
    removed = [text for _, text in outcome.events if "startup taint removed" in text]
    assert removed, [text for _, text in outcome.events][-20:]
    [served] = outcome.services.values()
    assert served.after == served.before and not served.pending_at_end


def test_eks_mig_nodes_are_not_judged_by_nvidia_gpu() -> None:
    """kubernetes/autoscaler#8095 (open): a node with the cloud provider's GPU label counts as
    unready while it advertises no `nvidia.com/gpu`, which a MIG node never does; past
    `--ok-total-unready-count` the autoscaler stops. The AWS provider's GPU label
    (`cloudprovider/aws/aws_cloud_provider.go` GPULabel) is on no node the EKS pools make, nor in
    what their Auto Scaling groups tell it a new node carries."""
    aws_gpu_label = "k8s.amazonaws.com/accelerator"
    [pool] = plan_stack(load_stack(STACK)).pools
    assert aws_gpu_label not in pool.node_labels
    assert not any(aws_gpu_label in key for key in node_template_tags(pool))
    [group] = [g for g in stack_rendering(STACK).of_type("aws:eks/nodeGroup:NodeGroup")
               if "-system" not in g.name]  # fmt: skip
    assert aws_gpu_label not in group.inputs["labels"]
