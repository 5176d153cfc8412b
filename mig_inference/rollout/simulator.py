"""One `pulumi up` from a deployed version of a stack to the next, run against a simulated cluster.

The cluster starts as the deployed version left it (every node on its layout, every replica
Ready). Then Pulumi's steps run as the engine runs them (see `steps`): a step starts once what it
waits for finished, cloud and Kubernetes effects follow each step, and the controllers (the MIG
manager, the scheduler, Deployments, drains) move on between steps. What it reports is what the
simulation observed: replicas serving per service at every moment, nodes created, drained,
deleted and left cordoned, the step Pulumi fails at, and what it refuses at preview."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

from msgspec import Struct

from mig_inference.names.labels import (
    CLIENT_DEPLOY_LABEL,
    MIG_CONFIG_LABEL,
    MIG_STATE_LABEL,
    POOL_LABEL,
)
from mig_inference.rollout.cloud_pools import CloudPools
from mig_inference.rollout.cluster import TICK, Cluster, Timings
from mig_inference.rollout.facts import LoadFacts, PoolFacts
from mig_inference.rollout.jobs import GateRun, JobRun, RepartitionRun, job_env
from mig_inference.rollout.mig_manager import NodeLayout
from mig_inference.rollout.model import (
    CLAIM_TEMPLATE,
    Deployment,
    Node,
    Taint,
    claimed_device,
    object_key,
    pod_template,
)
from mig_inference.rollout.node_pools import EKS_LAUNCH_TEMPLATE, POOL_TYPES, PoolShape, pool_shape
from mig_inference.rollout.node_updates import node_update
from mig_inference.rollout.outcome import Outcome, PoolOutcome, Served
from mig_inference.rollout.plugin_configs import PluginConfigs
from mig_inference.rollout.resources import Key, Program, Resource
from mig_inference.rollout.selectors import LabelIndex, SelectorIndex
from mig_inference.rollout.steps import Op, Step, plan_steps
from mig_inference.versions import DRA_DRIVER_CHART

DEPLOYMENT = "kubernetes:apps/v1:Deployment"
BUDGET = "kubernetes:policy/v1:PodDisruptionBudget"
JOB = "kubernetes:batch/v1:Job"
NODE_PATCH = "kubernetes:core/v1:NodePatch"
NAMESPACE = "kubernetes:core/v1:Namespace"
RELEASE = "kubernetes:helm.sh/v3:Release"
CLUSTER_POLICY_PATCH = "kubernetes:nvidia.com/v1:ClusterPolicyPatch"
"""The stack's patch of the GPU Operator's ClusterPolicy: its device plugin on or off for every
node (`kube.device_plugin_switch`)."""
SERVICE_LABEL = "app.kubernetes.io/instance"
HORIZON = 6 * 3600.0 * 4
"""No transition runs longer than this (a guard against a step that never ends)."""


class _Task(Struct):
    step: Step
    waits_for: set[Key]
    started: float | None = None
    done: bool = False
    failed: str | None = None
    check: Callable[[], str | None] | None = None
    """Called each tick once started: None while running, "" when done, else why it failed."""
    deadline: float = math.inf


class Rollout:
    """The simulation of one transition."""

    def __init__(
        self,
        before: Program,
        after: Program,
        facts: Mapping[str, PoolFacts],
        *,
        stack: str,
        project: str,
        timings: Timings | None = None,
        configs: tuple[frozenset[str], frozenset[str]] = (frozenset(), frozenset()),
        load: LoadFacts | None = None,
    ) -> None:
        self.before, self.after = before, after
        self.facts = facts
        self.load = load
        """The plans' estimates: per Deployment its replicas' start, per populate Job its fill
        (None: `Timings.replica_start` for every replica, populate Jobs done at once)."""
        self.timings = timings or Timings()
        self.plan = plan_steps(before, after, stack, project)
        self.configs = configs
        """The config names of the mig-parted config before and after the GPU Operator's
        release is updated (empty: any name is known)."""
        self.known = configs[0]
        self.plugin_configs = PluginConfigs()
        """The device plugin's ConfigMap, as the steps so far left it."""
        self.cluster = Cluster(self.timings, self._devices, self._configs, self._config_of)
        self.cluster.dra_client_selector = any(
            _client_selected(release) for release in before.of_type(RELEASE)
        )
        self.pools: dict[str, PoolOutcome] = {}
        self.served: dict[str, Served] = {}
        self.jobs: dict[Key, JobRun] = {}
        self.clouds = CloudPools(self.cluster, facts, self.timings, self._outcome)
        self.named_nodes = {
            patch.inputs["metadata"]["name"]: patch.inputs["metadata"]["labels"][POOL_LABEL]
            for program in (before, after)
            for patch in program.of_type(NODE_PATCH)
            if POOL_LABEL in (patch.inputs.get("metadata", {}).get("labels") or {})
        }
        """The nodes existing pools name, and their pools."""
        self.initial_nodes: set[str] = set()
        """The nodes of the deployed version (their devices served before the update)."""
        self.budgets: dict[tuple[str, str], Resource] = {}
        """The PodDisruptionBudgets in the cluster, by (namespace, name): a Deployment created
        after its budget is still held to it (Pulumi registers, and creates, the two in no fixed
        order; a budget selects pods by their labels whenever they come)."""
        self._budget_selectors: SelectorIndex[tuple[str, str]] = SelectorIndex()
        """`budgets` by the labels they select, in `budgets`' order."""
        self._deployment_labels: LabelIndex[tuple[str, str]] = LabelIndex()
        """The cluster's Deployments by their pods' labels."""

    # -- facts -------------------------------------------------------------------------------
    def _devices(self, node: Node, config: str) -> dict[str, int]:
        facts = self._facts_of(node)
        return facts.devices_with(config, node.labels) if facts else {}

    def _facts_of(self, node: Node) -> PoolFacts | None:
        # A node an existing pool names has that pool's GPUs before it carries the pool's label.
        return self.facts.get(node.pool or self.named_nodes.get(node.name, ""))

    def _configs(self, node: Node) -> dict[str, NodeLayout]:
        """The configs of the mig-parted config the operator's release holds now, as this node's
        layouts (every config either version names is one of the pool's)."""
        facts = self._facts_of(node)
        if facts is None:
            return {"all-disabled": (None,) * node.gpus}
        names = {*facts.layouts, "all-disabled"} - {""}
        known = {n for n in names if not self.known or n in self.known or n == "all-disabled"}
        return {n: layout for n in sorted(known) if (layout := facts.layout_of(n)) is not None}

    def _config_of(self, node: Node, layout: NodeLayout) -> str | None:
        facts = self._facts_of(node)
        return facts.config_of(layout) if facts else None

    # -- the deployed state --------------------------------------------------------------------
    def _deployed(self) -> None:
        for resource in self.before:
            self.plugin_configs.apply(resource)
        self.cluster.plugin_configs = self.plugin_configs.known()
        self.cluster.device_plugin = _deployed_device_plugin(self.before)
        for resource in self.before:
            if resource.type in POOL_TYPES:
                shape = pool_shape(resource)
                size = self.clouds.steady_size(shape, self._replicas_on(shape))
                self.clouds.create(shape, size, running=True)
            elif resource.type == NODE_PATCH:
                self._patch_node(resource, running=True)
        for resource in self.after:
            if resource.type == NODE_PATCH:
                name = resource.inputs["metadata"]["name"]
                if name not in self.cluster.nodes:  # a node of the cluster not in a pool yet
                    self.cluster.add_node(Node(name, {}, []), applied="all-disabled")
        for resource in self.before:
            if resource.type == CLAIM_TEMPLATE:
                self.cluster.claim_templates[object_key(resource)] = claimed_device(resource)
            elif resource.type == DEPLOYMENT and not self._off_gpu_nodes(resource):
                self._apply_deployment(resource)
            elif resource.type == BUDGET:
                self._apply_budget(resource)
        for _ in range(3):
            self.cluster._deployments()
            self.cluster._schedule()
        for pod in self.cluster.pods:
            pod.ready_at = 0.0 if pod.node is not None else None
        for service, count in self.cluster.serving().items():
            self.served[service] = Served(count, 0, count)
        self.cluster.started.clear()  # the deployed replicas loaded before this update
        self.initial_nodes = set(self.cluster.nodes)
        self._track_gpus()
        for outcome in self.pools.values():
            outcome.gpus_before = outcome.peak_gpus

    def _replicas_on(self, shape: PoolShape) -> int:
        """Replicas the deployed version runs on the pool (its Deployments' counts)."""
        pool = shape.labels.get(POOL_LABEL, "")
        wanted = 0
        for deployment in self.before.of_type(DEPLOYMENT):
            spec = deployment.inputs.get("spec", {})
            template = pod_template(spec.get("template", {}).get("spec", {}))
            if any(key == POOL_LABEL and pool in values for key, _, values in template.affinity):
                wanted += int(spec.get("replicas", 0))
        return wanted

    # -- nodes ---------------------------------------------------------------------------------
    def _outcome(self, labels: Mapping[str, str]) -> PoolOutcome:
        return self.pools.setdefault(labels.get(POOL_LABEL, "(no pool)"), PoolOutcome())

    def _patch_node(
        self, resource: Resource, *, running: bool = False, remove: bool = False
    ) -> None:
        metadata = resource.inputs.get("metadata", {})
        name = metadata["name"]
        node = self.cluster.nodes.get(name)
        if node is None:
            node = Node(name, {}, [])
            self.cluster.add_node(node, applied="all-disabled")
        labels = metadata.get("labels") or {}
        taints = (resource.inputs.get("spec") or {}).get("taints")
        if remove:
            for key in labels:
                node.labels.pop(key, None)
            if taints is not None:
                node.taints = [t for t in node.taints if t not in {Taint.of(x) for x in taints}]
            return
        if running and labels.get(MIG_CONFIG_LABEL):
            node.labels.update(labels)
            node.labels[MIG_STATE_LABEL] = "success"
            self.cluster.add_node(node, applied=labels[MIG_CONFIG_LABEL])
        else:
            if labels.get(MIG_CONFIG_LABEL) and labels[MIG_CONFIG_LABEL] != node.config:
                self._outcome(labels).nodes_relabelled += 1
            node.labels.update(labels)
        if taints is not None:
            node.taints = [Taint.of(t) for t in taints]

    # -- Kubernetes objects ----------------------------------------------------------------------
    def _apply_deployment(self, resource: Resource, *, keep_replicas: bool = False) -> Deployment:
        inputs = resource.inputs
        metadata, spec = inputs.get("metadata", {}), inputs.get("spec", {})
        template = spec.get("template", {})
        key = (metadata.get("namespace", "default"), metadata["name"])
        labels = template.get("metadata", {}).get("labels", {})
        service = labels.get(SERVICE_LABEL) or labels.get("app.kubernetes.io/name") or key[1]
        existing = self.cluster.deployments.get(key)
        replicas = int(spec.get("replicas", 1))
        if existing is not None and keep_replicas:
            replicas = existing.replicas
        start = self.load.start_seconds.get(key) if self.load is not None else None
        deployment = Deployment(
            key[0], key[1], service, replicas,
            pod_template(template.get("spec", {})),
            self.timings.replica_start if start is None else start,
            budget=existing.budget if existing else self._budget_of(key[0], labels),
            labels=dict(labels),
        )  # fmt: skip
        self.cluster.deployments[key] = deployment
        self._deployment_labels.put(key, key[0], deployment.labels)
        self.served.setdefault(service, Served(0, 0, 0))
        return deployment

    def _apply_budget(self, resource: Resource, *, remove: bool = False) -> None:
        spec = resource.inputs.get("spec", {})
        key = self._object_key(resource)
        namespace, selector = _selector(resource)
        if not remove:
            self.budgets[key] = resource
            self._budget_selectors.put(key, namespace, selector)
        elif self.budgets.get(key) is resource:
            del self.budgets[key]
            self._budget_selectors.discard(key)
        for candidate in self._deployment_labels.candidates(namespace, selector):
            deployment = self.cluster.deployments[candidate]
            if _selects(resource, deployment.namespace, deployment.labels):
                deployment.budget = None if remove else int(spec.get("maxUnavailable", 1))

    def _budget_of(self, namespace: str, labels: Mapping[str, str]) -> int | None:
        """The maxUnavailable of the budget that selects a Deployment's pods, None when none
        does."""
        return next(
            (
                int(budget.inputs.get("spec", {}).get("maxUnavailable", 1))
                for key in self._budget_selectors.selecting(namespace, labels)
                if _selects(budget := self.budgets[key], namespace, labels)
            ),
            None,
        )

    # -- steps -----------------------------------------------------------------------------------
    def _start(self, task: _Task) -> None:
        step, cluster, t = task.step, self.cluster, self.timings
        resource = step.resource
        task.started = cluster.now
        relaunched = resource.type in POOL_TYPES and self._launch_template_changed(
            pool_shape(resource)
        )
        if step.op is Op.SAME and not relaunched:
            task.done = True
            return
        if step.op is Op.DELETE:
            self._start_delete(task)
            return
        self.plugin_configs.apply(resource)
        cluster.plugin_configs = self.plugin_configs.known()
        if resource.type in POOL_TYPES:
            new = pool_shape(resource)
            if step.op in (Op.UPDATE, Op.SAME):
                # SAME: the node group's launch template version is an output that moves with
                # the template (its new version), so the group is updated too.
                old = pool_shape(step.old) if step.old else new
                reach = node_update(resource.type, step.changed, old.labels, new.labels)
                if reach is not None and step.op is Op.UPDATE:
                    running = [n for n in self.clouds.nodes(new.physical) if not n.draining]
                    self._outcome(new.labels).node_update = reach.describe(len(running))
                update = resource.inputs.get("updateConfig") or {}
                self.clouds.update(
                    old, new, recycled=relaunched,
                    max_unavailable=int(update.get("maxUnavailable") or 1),
                )  # fmt: skip

                def updated(new: PoolShape = new) -> str | None:
                    rolled = self.clouds.roll_outcome(new.physical)
                    if rolled is None or rolled:
                        return rolled
                    return "" if self.clouds.settled(new) else None

                task.check = updated
                task.deadline = cluster.now + 6 * 3600
                return
            elif step.op is Op.REPLACE and step.delete_first and step.old is not None:
                # Delete-before-replace: the old pool is gone (drained, deleted) before the new
                # one is even asked for.
                old_shape = pool_shape(step.old)
                self.clouds.delete(old_shape, step.old)
                cluster.log(
                    f"{resource.name}: replaced delete-before-replace: the old pool goes first"
                )
                created: list[bool] = []

                def deleted_then_created(new: PoolShape = new) -> str | None:
                    if not created:
                        if self.clouds.nodes(old_shape.physical):
                            return None
                        self.clouds.create(new, new.nodes)
                        created.append(True)
                    return "" if self.clouds.settled(new) else None

                task.check = deleted_then_created
                task.deadline = cluster.now + 6 * 3600
                return
            else:
                self.clouds.create(new, new.nodes)
            task.check = lambda: "" if self.clouds.settled(new) else None
            task.deadline = cluster.now + 3 * 3600
        elif resource.type == NODE_PATCH:
            self._patch_node(resource)
            task.done = True
        elif resource.type == RELEASE:
            # The chart's ConfigMaps (the mig-parted config among them) hold the new version's.
            self.known = self.configs[1]
            finish = cluster.now + t.helm_release
            # The release's upgrade patches its ClusterPolicy with what changed between the two
            # manifests (helm's JSON merge patch of a custom resource): `devicePlugin.enabled`
            # only when the rendered value changes, on every node then.
            plugin = _release_device_plugin(resource)
            was = _release_device_plugin(step.old) if step.old is not None else None
            operator = resource.inputs.get("chart") == "gpu-operator"
            dra_driver = resource.inputs.get("chart") == DRA_DRIVER_CHART
            client = _client_selected(resource)

            def released() -> str | None:
                if cluster.now < finish:
                    return None
                if operator and plugin != was:
                    cluster.set_device_plugin(plugin, "the GPU Operator's release")
                if dra_driver:
                    cluster.select_client_label(client)
                return ""

            task.check = released
        elif resource.type == CLUSTER_POLICY_PATCH:
            on = _patched_device_plugin(resource)
            if on is not None:
                cluster.set_device_plugin(on, "the stack's ClusterPolicy patch")
            task.done = True
        elif resource.type == JOB:
            env = job_env(resource.inputs)
            run: JobRun
            if "TARGET_CONFIG" in env:
                run = RepartitionRun.of(env)
            elif "GATE_TARGETS" in env:
                run = GateRun.of(env, cluster.now)
            else:
                name = resource.inputs.get("metadata", {}).get("name", "")
                fill = self.load.job_seconds.get(name) if self.load is not None else None
                if fill is None:
                    task.done = True
                    return
                # A populate Job: the model is downloaded into the cache before its readers.
                filled = cluster.now + fill
                task.check = lambda: "" if cluster.now >= filled else None
                return
            self.jobs[step.key] = run

            def job_check(run: JobRun = run) -> str | None:
                run.advance(cluster)
                if run.outcome is None:
                    return None
                if isinstance(run, RepartitionRun) and run.released:
                    self._outcome({POOL_LABEL: run.named_pool}).released.extend(run.released)
                    run.released = []
                return "" if run.outcome == "complete" else f"Job {resource.name} {run.outcome}"

            task.check = job_check
        elif resource.type == DEPLOYMENT and self._off_gpu_nodes(resource):
            task.done = True
        elif resource.type == DEPLOYMENT:
            if step.op is Op.REPLACE and step.delete_first:
                # The old Deployment goes first, and its replicas with it (foreground deletion).
                for pod in [
                    p
                    for p in cluster.pods
                    if (p.namespace, p.deployment) == self._object_key(step.old)
                ]:
                    cluster.terminate(
                        pod, f"Deployment {resource.name} replaced delete-before-replace"
                    )
            keep = step.op is Op.UPDATE and "spec.replicas" in resource.ignore_changes
            deployment = self._apply_deployment(resource, keep_replicas=keep)
            task.check = lambda: "" if cluster.rolled_out(deployment) else None
            task.deadline = cluster.now + self._timeout(resource, step.op)
        elif resource.type == BUDGET:
            self._apply_budget(resource)
            task.done = True
        elif resource.type == CLAIM_TEMPLATE:
            # Claims made from now on take the new template's device; made ones keep theirs.
            cluster.claim_templates[object_key(resource)] = claimed_device(resource)
            task.done = True
        else:
            task.done = True

    def _off_gpu_nodes(self, resource: Resource) -> bool:
        """A Deployment whose pods hold no device (the gateway's body-based router) runs on the
        cluster's other nodes, which the simulation does not model."""
        template = resource.inputs.get("spec", {}).get("template", {}).get("spec", {})
        pod = pod_template(template)
        return pod.resource is None and not pod.claims

    @staticmethod
    def _object_key(resource: Resource | None) -> tuple[str, str]:
        metadata = (resource.inputs if resource else {}).get("metadata", {})
        return (metadata.get("namespace", "default"), metadata.get("name", ""))

    def _timeout(self, resource: Resource, op: Op) -> float:
        create, update = resource.timeouts or (None, None)
        chosen = update if op is Op.UPDATE else create
        return float(chosen.rstrip("s")) if chosen else 600.0

    def _launch_template_changed(self, shape: PoolShape) -> bool:
        if shape.launch_template is None:
            return False
        step = self.plan.step((EKS_LAUNCH_TEMPLATE, shape.launch_template))
        return step is not None and step.op is Op.UPDATE

    def _start_delete(self, task: _Task) -> None:
        resource, cluster = task.step.resource, self.cluster
        if task.step.key not in self.after:  # not the old half of a replacement
            self.plugin_configs.remove(resource)
            cluster.plugin_configs = self.plugin_configs.known()
        if resource.type in POOL_TYPES:
            shape = pool_shape(resource)
            self.clouds.delete(shape, resource)

            def gone() -> str | None:
                return "" if not self.clouds.nodes(shape.physical) else None

            task.check = gone
        elif resource.type == NODE_PATCH:
            self._patch_node(resource, remove=True)
            task.done = True
        elif resource.type == DEPLOYMENT:
            deployment = cluster.deployments.get(self._object_key(resource))
            if deployment is not None:
                deployment.deleted = True
            task.done = True
        elif resource.type == BUDGET:
            self._apply_budget(resource, remove=True)
            task.done = True
        elif resource.type == CLAIM_TEMPLATE:
            # The old half of a replacement under the same name is the new object by now.
            key = object_key(resource)
            if all(object_key(r) != key for r in self.after.of_type(CLAIM_TEMPLATE)):
                cluster.claim_templates.pop(key, None)
            task.done = True
        elif resource.type == NAMESPACE:
            namespace = resource.inputs.get("metadata", {}).get("name")
            for deployment in cluster.deployments.values():
                if deployment.namespace == namespace:
                    deployment.deleted = True
            task.done = True
        else:
            task.done = True

    # -- the run ---------------------------------------------------------------------------------
    def run(self) -> Outcome:
        self._deployed()
        failure: str | None = None
        if self.plan.refusals:
            return self._result(None)
        forward = [
            _Task(step, self.after.waits_for(step.key) if step.key in self.after else set())
            for step in self.plan.forward
            if step.resource.custom
        ]
        failure = self._run_tasks(forward)
        if failure is None:
            deletes = self._delete_tasks()
            failure = self._run_tasks(deletes)
        # After the last step (or the one Pulumi failed at) the cluster goes on until nothing
        # can change any more: nodes booting, MIG managers applying, replicas starting.
        end = self.cluster.now + HORIZON
        while not self._settled() and self.cluster.now < end:
            self._tick()
        return self._result(failure)

    def _delete_tasks(self) -> list[_Task]:
        """Deletes in reverse dependency order: a resource goes after everything that depended
        on it (its dependents and its children) went."""
        keys = [s.key for s in self.plan.deletes]
        # What each deleted resource waited for, once: asked again for every pair of deletes,
        # it made a large delete quadratic in the program's size.
        before = {key: self.before.waits_for(key) | set(self.before.ancestors(key)) for key in keys}
        tasks = []
        for step in self.plan.deletes:
            dependents = {
                other for other in keys if other != step.key and step.key in before[other]
            }
            tasks.append(_Task(step, dependents))
        return tasks

    def _run_tasks(self, tasks: list[_Task]) -> str | None:
        done: set[Key] = set()
        keys = {task.step.key for task in tasks}
        while True:
            for task in tasks:
                if task.started is None and all(k in done or k not in keys for k in task.waits_for):
                    self._start(task)
            for task in tasks:
                if task.started is not None and not task.done and task.check is not None:
                    result = task.check()
                    if result == "":
                        task.done = True
                    elif result is not None:
                        return result
                    elif self.cluster.now >= task.deadline:
                        return self._timed_out(task)
                if task.done:
                    done.add(task.step.key)
            if all(task.done for task in tasks):
                return None
            if self.cluster.now > HORIZON:
                return "the simulation did not finish (a step that never ends)"
            self._tick()

    def _timed_out(self, task: _Task) -> str:
        resource = task.step.resource
        if resource.type == DEPLOYMENT:
            deployment = self.cluster.deployments[self._object_key(resource)]
            pending = self.cluster.pending(deployment)
            need = deployment.template.resource or "a node"
            return (
                f"Deployment {deployment.namespace}/{deployment.name} did not roll out in "
                f"{self._timeout(resource, task.step.op):.0f}s: {len(pending)} replica(s) Pending "
                f"(no node admits them with a free {need})"
            )
        return f"{resource.type} {resource.name} did not finish"

    def _settled(self) -> bool:
        """A fixpoint: no controller has anything left that could change what serves (every
        timer of the simulated cluster has run out)."""
        cluster = self.cluster
        pods_moving = any(
            (p.node is not None and not p.ready(cluster.now)) or not p.active for p in cluster.pods
        )
        gone = any(d.deleted and cluster.pods_of(d) for d in cluster.deployments.values())
        nodes_busy = bool(cluster.drains) or any(
            not n.ready(cluster.now)
            or (n.name in cluster.managers and not cluster.managers[n.name].idle)
            for n in cluster.live_nodes()
        )
        return not pods_moving and not gone and not nodes_busy

    def _tick(self) -> None:
        self.clouds.advance()
        self.clouds.autoscale()
        self.cluster.tick()
        targets = self._targets()
        for service, count in self.cluster.serving().items():
            served = self.served.setdefault(service, Served(0, 0, count))
            if count < served.least:
                served.least, served.least_at = count, self.cluster.now
            target = targets.get(service, 0)
            if served.before and count < min(served.before, target or served.before):
                served.below_seconds += TICK
            if served.before and count == 0:
                served.down_seconds += TICK
        self._track_gpus()

    def _targets(self) -> dict[str, int]:
        """The replicas each service's Deployments ask for now (in one pass over them)."""
        targets: dict[str, int] = {}
        for d in self.cluster.deployments.values():
            if not d.deleted:
                targets[d.service] = targets.get(d.service, 0) + d.replicas
        return targets

    def _target(self, service: str) -> int:
        return self._targets().get(service, 0)

    def _gpus(self) -> dict[str, int]:
        totals: dict[str, int] = {}
        for node in self.cluster.live_nodes():
            if node.pool:
                totals[node.pool] = totals.get(node.pool, 0) + node.gpus
        return totals

    def _track_gpus(self) -> None:
        for pool, gpus in self._gpus().items():
            outcome = self.pools.setdefault(pool, PoolOutcome())
            outcome.peak_gpus = max(outcome.peak_gpus, gpus)
        down: dict[str, int] = {}
        for node in self.cluster.live_nodes():
            facts = self.facts.get(node.pool or "")
            serving_before = node.name in self.initial_nodes
            if facts is None or not serving_before or not node.ready(self.cluster.now):
                continue
            planned = sum(self._devices(node, node.config or "").values())
            missing = planned - sum(self._in_service(node).values())
            if missing > 0:
                down[node.pool or ""] = down.get(node.pool or "", 0) + missing
        for pool, count in down.items():
            outcome = self.pools.setdefault(pool, PoolOutcome())
            outcome.most_devices_down = max(outcome.most_devices_down, count)

    @staticmethod
    def _in_service(node: Node) -> dict[str, int]:
        """The devices pods can be given on the node now. A DRA node's published slices serve
        only while they are the layout its label asks for and its GPUs have: from the relabel
        until the restarted kubelet plugin publishes the new layout, a claim on a published
        slice names an instance the GPUs no longer have (or are about to lose)."""
        if node.dra and not (node.published == node.applied == node.config):
            return {}
        return node.devices

    def _result(self, failure: str | None) -> Outcome:
        cluster = self.cluster
        for service, served in self.served.items():
            served.after = sum(
                1 for p in cluster.pods if p.service == service and p.ready(cluster.now)
            )
            served.pending_at_end = sum(
                1
                for p in cluster.pods
                if p.service == service
                and p.node is None
                and p.active
                and not cluster.deployments[(p.namespace, p.deployment)].deleted
            )
        for node in cluster.live_nodes():
            if node.unschedulable and node.pool:
                self.pools.setdefault(node.pool, PoolOutcome()).left_cordoned.append(node.name)
        for pool, gpus in self._gpus().items():
            self.pools.setdefault(pool, PoolOutcome()).gpus_after = gpus
        for pool, count in cluster.evicted.items():
            self.pools.setdefault(pool, PoolOutcome()).evicted = count
        for name in sorted(cluster.config_missing):
            self._outcome(cluster.nodes[name].labels).config_missing.append(name)
        for name in sorted(cluster.plugin_blocked):
            self._outcome(cluster.nodes[name].labels).plugin_blocked.append(name)
        for name in cluster.switched:  # in the order they were switched
            node = cluster.nodes[name]
            self._outcome(node.labels).switched.append(f"{name} ({cluster.switched[name]})")
        for name in sorted(cluster.offered_twice):
            self._outcome(cluster.nodes[name].labels).offered_twice.append(name)
        for name, missing in sorted(cluster.mig_config_missing.items()):
            self._outcome(cluster.nodes[name].labels).mig_config_missing[name] = missing
        for name in sorted(cluster.without_plugin):
            self._outcome(cluster.nodes[name].labels).without_plugin.append(name)
        return Outcome(
            self.plan, self.served, self.pools, failure, cluster.now,
            [(e.time, e.text) for e in cluster.events], dict(cluster.started),
        )  # fmt: skip


def simulate(
    before: Program,
    after: Program,
    facts: Mapping[str, PoolFacts],
    *,
    stack: str,
    project: str,
    timings: Timings | None = None,
    configs: tuple[frozenset[str], frozenset[str]] = (frozenset(), frozenset()),
    load: LoadFacts | None = None,
) -> Outcome:
    return Rollout(
        before,
        after,
        facts,
        stack=stack,
        project=project,
        timings=timings,
        configs=configs,
        load=load,
    ).run()


def _release_device_plugin(release: Resource) -> bool:
    """The GPU Operator's device plugin as a release renders its ClusterPolicy (the chart's
    default: on)."""
    values = release.inputs.get("values") or {}
    return (values.get("devicePlugin") or {}).get("enabled", True) is not False


def _patched_device_plugin(patch: Resource) -> bool | None:
    enabled = ((patch.inputs.get("spec") or {}).get("devicePlugin") or {}).get("enabled")
    return enabled if isinstance(enabled, bool) else None


def _deployed_device_plugin(program: Program) -> bool:
    """Whether the deployed version left the operator's device plugin on: its ClusterPolicy
    patch's value, else its release's."""
    for patch in program.of_type(CLUSTER_POLICY_PATCH):
        on = _patched_device_plugin(patch)
        if on is not None:
            return on
    releases = [r for r in program.of_type(RELEASE) if r.inputs.get("chart") == "gpu-operator"]
    return all(_release_device_plugin(release) for release in releases)


def _client_selected(release: Resource) -> bool:
    """The DRA driver's release schedules its kubelet plugin by `nvidia.com/gpu.deploy.client`."""
    if release.inputs.get("chart") != DRA_DRIVER_CHART:
        return False
    plugin = (release.inputs.get("values") or {}).get("kubeletPlugin") or {}
    return (plugin.get("nodeSelector") or {}).get(CLIENT_DEPLOY_LABEL) == "true"


def _selector(budget: Resource) -> tuple[Any, Mapping[str, Any]]:
    """A PodDisruptionBudget's namespace and matchLabels."""
    metadata, spec = budget.inputs.get("metadata", {}), budget.inputs.get("spec", {})
    return metadata.get("namespace"), spec.get("selector", {}).get("matchLabels", {})


def _selects(budget: Resource, namespace: str, labels: Mapping[str, str]) -> bool:
    """Whether a PodDisruptionBudget selects the pods of a Deployment with these labels."""
    budget_namespace, selector = _selector(budget)
    return budget_namespace == namespace and all(labels.get(k) == v for k, v in selector.items())
