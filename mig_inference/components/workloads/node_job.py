"""A Job that runs one of the project's shell scripts with kubectl against the cluster's nodes:
its ServiceAccount, a ClusterRole holding only the rules it needs (and a Role for what it may do in
its own namespace only), the bindings, node affinity keeping it off the stack's GPU nodes, and a
NetworkPolicy that lets no pod connect to it. The MIG-ready gate and in-place re-partitioning are
built on it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pulumi
import pulumi_kubernetes as k8s
from msgspec import Struct, field

from mig_inference.names.labels import POOL_LABEL
from mig_inference.versions import GATE_IMAGE

from .pod_security import LOCKED_DOWN, TMP_MOUNT, nobody_pod, tmp_volume

MANAGED_BY = {"app.kubernetes.io/managed-by": "mig-inference"}


class NodeJobArgs(Struct):
    app: str
    """`app.kubernetes.io/name` of the Job's pods, and the name of its ServiceAccount."""
    job_name: str
    """The Job's name; a new name runs a new Job."""
    cluster_role_name: str
    """Name of the ClusterRole and its binding (unique per stack)."""
    namespace: str
    """Namespace of the Job and its ServiceAccount."""
    script: str
    """POSIX shell script the container runs."""
    env: Mapping[str, str]
    """Environment of the script."""
    rules: Sequence[k8s.rbac.v1.PolicyRuleArgs]
    """What the script may do through the API, and nothing more."""
    timeout_seconds: int
    """How long the script may run; `pulumi up` waits for it that long."""
    namespace_rules: Sequence[k8s.rbac.v1.PolicyRuleArgs] = ()
    """What the script may do in `namespace` only (a Role, not the ClusterRole)."""
    other_namespace_rules: Mapping[str, Sequence[k8s.rbac.v1.PolicyRuleArgs]] = field(
        default_factory=dict
    )
    """What the script may do in other namespaces, each only there (a Role per namespace)."""
    avoid_nodes: Sequence[str] = ()
    """Nodes the Job's pod must not run on, by name (the stack's `existing` pools, whose
    nodes may lack the pool label until the first `pulumi up`); nodes with the pool label are
    always avoided. The re-partitioning Job may reboot a node of its pool, the gate waits for
    them."""


class NodeJob(pulumi.ComponentResource):
    """ServiceAccount + ClusterRole + binding + Job running `script` with a pinned kubectl
    image, and a NetworkPolicy refusing all ingress to its pod."""

    job_name: pulumi.Output[str]

    def __init__(
        self, name: str, args: NodeJobArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("mig-inference:index:NodeJob", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        labels = {"app.kubernetes.io/name": args.app, **MANAGED_BY}
        account = k8s.core.v1.ServiceAccount(
            f"{name}-sa",
            metadata=k8s.meta.v1.ObjectMetaArgs(
                name=args.app, namespace=args.namespace, labels=labels
            ),
            automount_service_account_token=False,
            opts=child,
        )
        role = k8s.rbac.v1.ClusterRole(
            f"{name}-role",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=args.cluster_role_name, labels=labels),
            rules=list(args.rules),
            opts=child,
        )
        binding = k8s.rbac.v1.ClusterRoleBinding(
            f"{name}-binding",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=args.cluster_role_name, labels=labels),
            role_ref=k8s.rbac.v1.RoleRefArgs(
                api_group="rbac.authorization.k8s.io", kind="ClusterRole", name=role.metadata.name
            ),
            subjects=[
                k8s.rbac.v1.SubjectArgs(
                    kind="ServiceAccount", name=account.metadata.name, namespace=args.namespace
                )
            ],
            opts=child,
        )
        bindings: list[pulumi.Resource] = [binding]
        local_rules = {args.namespace: args.namespace_rules} if args.namespace_rules else {}
        for namespace, rules in {**local_rules, **args.other_namespace_rules}.items():
            # Resource names as they were before other namespaces existed, for the Job's own.
            prefix = f"{name}-local" if namespace == args.namespace else f"{name}-{namespace}"
            local = k8s.rbac.v1.Role(
                f"{prefix}-role",
                metadata=k8s.meta.v1.ObjectMetaArgs(
                    name=args.app, namespace=namespace, labels=labels
                ),
                rules=list(rules),
                opts=child,
            )
            bindings.append(
                k8s.rbac.v1.RoleBinding(
                    f"{prefix}-binding",
                    metadata=k8s.meta.v1.ObjectMetaArgs(
                        name=args.app, namespace=namespace, labels=labels
                    ),
                    role_ref=k8s.rbac.v1.RoleRefArgs(
                        api_group="rbac.authorization.k8s.io", kind="Role", name=local.metadata.name
                    ),
                    subjects=[
                        k8s.rbac.v1.SubjectArgs(
                            kind="ServiceAccount",
                            name=account.metadata.name,
                            namespace=args.namespace,
                        )
                    ],
                    opts=child,
                )
            )
        job = k8s.batch.v1.Job(
            f"{name}-job",
            metadata=k8s.meta.v1.ObjectMetaArgs(
                name=args.job_name,
                namespace=args.namespace,
                labels=labels,
                # A Job that failed (backoffLimit 0) is replaced on the next `pulumi up` instead
                # of awaited again, so fixing the cause and re-running is the way forward.
                annotations={"pulumi.com/replaceUnready": "true"},
            ),
            spec=k8s.batch.v1.JobSpecArgs(
                backoff_limit=0,
                active_deadline_seconds=args.timeout_seconds + 60,
                template=k8s.core.v1.PodTemplateSpecArgs(
                    metadata=k8s.meta.v1.ObjectMetaArgs(labels=labels),
                    spec=self._pod(args, account.metadata.name),
                ),
            ),
            opts=pulumi.ResourceOptions(
                parent=self,
                depends_on=bindings,
                # `pulumi up` waits for the Job to complete; give it the script's full budget.
                custom_timeouts=pulumi.CustomTimeouts(
                    create=f"{args.timeout_seconds + 120}s", update=f"{args.timeout_seconds + 120}s"
                ),
                delete_before_replace=True,
            ),
        )
        # The Job only talks to the API server: no pod may connect to it.
        k8s.networking.v1.NetworkPolicy(
            f"{name}-deny-ingress",
            metadata=k8s.meta.v1.ObjectMetaArgs(
                name=args.app, namespace=args.namespace, labels=labels
            ),
            spec=k8s.networking.v1.NetworkPolicySpecArgs(
                pod_selector=k8s.meta.v1.LabelSelectorArgs(
                    match_labels={"app.kubernetes.io/name": args.app}
                ),
                policy_types=["Ingress"],
            ),
            opts=child,
        )
        self.job_name = job.metadata.name
        self.register_outputs({"job_name": self.job_name})

    @staticmethod
    def _pod(args: NodeJobArgs, account: pulumi.Input[str]) -> k8s.core.v1.PodSpecArgs:
        return script_pod(args.script, args.env, account, args.avoid_nodes, "Never")


def script_pod(
    script: str,
    env: Mapping[str, str],
    account: pulumi.Input[str],
    avoid_nodes: Sequence[str],
    restart_policy: str,
) -> k8s.core.v1.PodSpecArgs:
    """The pod that runs one of the project's scripts with the pinned kubectl image, as
    `account`, off the stack's GPU nodes, unprivileged and with a read-only root."""
    return k8s.core.v1.PodSpecArgs(
        service_account_name=account,
        # The token is the pod's only credential, bound to its rules and nothing else.
        automount_service_account_token=True,
        restart_policy=restart_policy,
        affinity=_off_gpu_nodes(avoid_nodes),
        security_context=nobody_pod(),
        volumes=[tmp_volume("64Mi")],
        containers=[
            k8s.core.v1.ContainerArgs(
                name="run",
                image=GATE_IMAGE,
                image_pull_policy="IfNotPresent",
                command=["/bin/sh", "-c", script],
                env=[
                    *(k8s.core.v1.EnvVarArgs(name=k, value=v) for k, v in env.items()),
                    k8s.core.v1.EnvVarArgs(name="HOME", value="/tmp"),
                ],
                resources=k8s.core.v1.ResourceRequirementsArgs(
                    requests={"cpu": "10m", "memory": "64Mi"},
                    limits={"cpu": "200m", "memory": "128Mi"},
                ),
                security_context=LOCKED_DOWN,
                volume_mounts=[TMP_MOUNT],
            )
        ],
    )


def _off_gpu_nodes(names: Sequence[str]) -> k8s.core.v1.AffinityArgs:
    """Only nodes without the pool label and not named by an `existing` pool (by name, through
    `matchFields`: the `kubernetes.io/hostname` label need not equal the node's name)."""
    term = k8s.core.v1.NodeSelectorTermArgs(
        match_expressions=[
            k8s.core.v1.NodeSelectorRequirementArgs(key=POOL_LABEL, operator="DoesNotExist")
        ],
        match_fields=[
            k8s.core.v1.NodeSelectorRequirementArgs(
                key="metadata.name", operator="NotIn", values=sorted(names)
            )
        ]
        if names
        else None,
    )
    return k8s.core.v1.AffinityArgs(
        node_affinity=k8s.core.v1.NodeAffinityArgs(
            required_during_scheduling_ignored_during_execution=k8s.core.v1.NodeSelectorArgs(
                node_selector_terms=[term]
            )
        )
    )
