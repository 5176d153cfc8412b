"""A Kubernetes Job that `pulumi up` waits on until the pools' MIG layouts are applied."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from mig.gate import gate_pools_value, gate_script
from mig.versions import GATE_IMAGE

GATE_NAME = "mig-ready-gate"
NOBODY = 65534


@dataclass
class MigReadyGateArgs:
    namespace: str
    """Namespace for the Job and its ServiceAccount (the GPU Operator's)."""
    pools: Mapping[str, int]
    """Pool name -> nodes that must report `nvidia.com/mig.config.state=success`."""
    fingerprint: str
    """Changes with the pools' MIG configs; a new Job runs when it does."""
    timeout_seconds: int
    """How long to wait before failing."""


class MigReadyGate(pulumi.ComponentResource):
    """ServiceAccount + ClusterRole (read nodes, nothing else) + binding + Job running a wait
    loop with a pinned kubectl image. Inference services depend on this component."""

    job_name: pulumi.Output[str]

    def __init__(
        self, name: str, args: MigReadyGateArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("mig-inference:index:MigReadyGate", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        labels = {
            "app.kubernetes.io/name": GATE_NAME,
            "app.kubernetes.io/managed-by": "mig-inference",
        }
        account = k8s.core.v1.ServiceAccount(
            f"{name}-sa",
            metadata=k8s.meta.v1.ObjectMetaArgs(
                name=GATE_NAME, namespace=args.namespace, labels=labels
            ),
            automount_service_account_token=False,
            opts=child,
        )
        role = k8s.rbac.v1.ClusterRole(
            f"{name}-role",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=f"mig-inference-{GATE_NAME}", labels=labels),
            rules=[
                k8s.rbac.v1.PolicyRuleArgs(
                    api_groups=[""], resources=["nodes"], verbs=["get", "list"]
                )
            ],
            opts=child,
        )
        binding = k8s.rbac.v1.ClusterRoleBinding(
            f"{name}-binding",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=f"mig-inference-{GATE_NAME}", labels=labels),
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
        job = k8s.batch.v1.Job(
            f"{name}-job",
            metadata=k8s.meta.v1.ObjectMetaArgs(
                name=f"{GATE_NAME}-{args.fingerprint}", namespace=args.namespace, labels=labels
            ),
            spec=k8s.batch.v1.JobSpecArgs(
                backoff_limit=0,
                active_deadline_seconds=args.timeout_seconds + 60,
                template=k8s.core.v1.PodTemplateSpecArgs(
                    metadata=k8s.meta.v1.ObjectMetaArgs(labels=labels),
                    spec=k8s.core.v1.PodSpecArgs(
                        service_account_name=account.metadata.name,
                        # The token is the Job's only credential: it may read nodes, nothing else.
                        automount_service_account_token=True,
                        restart_policy="Never",
                        security_context=k8s.core.v1.PodSecurityContextArgs(
                            run_as_non_root=True,
                            run_as_user=NOBODY,
                            run_as_group=NOBODY,
                            seccomp_profile=k8s.core.v1.SeccompProfileArgs(type="RuntimeDefault"),
                        ),
                        volumes=[
                            k8s.core.v1.VolumeArgs(
                                name="tmp",
                                empty_dir=k8s.core.v1.EmptyDirVolumeSourceArgs(size_limit="64Mi"),
                            )
                        ],
                        containers=[
                            k8s.core.v1.ContainerArgs(
                                name="wait",
                                image=GATE_IMAGE,
                                image_pull_policy="IfNotPresent",
                                command=["/bin/sh", "-c", gate_script()],
                                env=[
                                    k8s.core.v1.EnvVarArgs(
                                        name="GATE_POOLS", value=gate_pools_value(dict(args.pools))
                                    ),
                                    k8s.core.v1.EnvVarArgs(
                                        name="GATE_TIMEOUT_SECONDS", value=str(args.timeout_seconds)
                                    ),
                                    k8s.core.v1.EnvVarArgs(name="HOME", value="/tmp"),
                                ],
                                resources=k8s.core.v1.ResourceRequirementsArgs(
                                    requests={"cpu": "10m", "memory": "64Mi"},
                                    limits={"cpu": "200m", "memory": "128Mi"},
                                ),
                                security_context=k8s.core.v1.SecurityContextArgs(
                                    allow_privilege_escalation=False,
                                    read_only_root_filesystem=True,
                                    capabilities=k8s.core.v1.CapabilitiesArgs(drop=["ALL"]),
                                ),
                                volume_mounts=[
                                    k8s.core.v1.VolumeMountArgs(name="tmp", mount_path="/tmp")
                                ],
                            )
                        ],
                    ),
                ),
            ),
            opts=pulumi.ResourceOptions(
                parent=self,
                depends_on=[binding],
                # `pulumi up` waits for the Job to complete; give it the gate's full budget.
                custom_timeouts=pulumi.CustomTimeouts(
                    create=f"{args.timeout_seconds + 120}s", update=f"{args.timeout_seconds + 120}s"
                ),
                delete_before_replace=True,
            ),
        )
        # The gate only talks to the API server: no pod may connect to it.
        k8s.networking.v1.NetworkPolicy(
            f"{name}-deny-ingress",
            metadata=k8s.meta.v1.ObjectMetaArgs(
                name=GATE_NAME, namespace=args.namespace, labels=labels
            ),
            spec=k8s.networking.v1.NetworkPolicySpecArgs(
                pod_selector=k8s.meta.v1.LabelSelectorArgs(
                    match_labels={"app.kubernetes.io/name": GATE_NAME}
                ),
                policy_types=["Ingress"],
            ),
            opts=child,
        )
        self.job_name = job.metadata.name
        self.register_outputs({"job_name": self.job_name})
