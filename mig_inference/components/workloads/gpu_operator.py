"""The NVIDIA GPU Operator (mixed MIG strategy), with GKE's prerequisites when on GKE."""

from typing import Any, TypedDict

import pulumi
import pulumi_kubernetes as k8s
from msgspec import Struct

from mig_inference.clouds import Cloud
from mig_inference.clouds.capacity import Arch
from mig_inference.kube.device_plugin_switch import API_VERSION, KIND, switch_patch
from mig_inference.kube.operator_values import (
    DEVICE_PLUGIN_CONFIG_MAP,
    DEVICE_PLUGIN_DEFAULT_CONFIG,
    GKE_NVIDIA_DIR,
    device_plugin_configs,
    device_plugin_default_config,
    gpu_operator_values,
    operator_critical_pods,
)
from mig_inference.names.labels import GKE_NO_DEVICE_PLUGIN_LABEL
from mig_inference.plan import StackPlan
from mig_inference.versions import (
    GKE_A4X_DRIVER_INSTALLER_MANIFEST,
    GKE_A4X_PAUSE_IMAGE,
    GKE_DRIVER_INSTALLER_IMAGE,
    GKE_DRIVER_INSTALLER_MANIFEST,
    GKE_PAUSE_IMAGE,
    GPU_OPERATOR_CHART,
    GPU_OPERATOR_REPO,
)

from ..planning import planned
from ..stack_args import Stack
from .agent_namespace import agent_namespace, critical_pods_quota

DRIVER_INSTALLER = "nvidia-driver-installer"
MANAGED_BY = {"app.kubernetes.io/managed-by": "mig-inference"}
FIELD_MANAGER_PREFIX = "mig-inference-device-plugin-"
"""A field manager per config key: deleting one key's patch relinquishes that key alone."""
INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"


class DriverInstaller(Struct, frozen=True):
    """One of Google's COS driver-installer manifests."""

    suffix: str
    """Appended to the DaemonSet's names ("" for the manifest every stack had first)."""
    follows: str
    """The manifest release it follows."""
    pause_image: str
    command: list[str]
    arm: bool
    """Runs on the Arm machine types (else on every other GPU node)."""


AMD64_INSTALLER = DriverInstaller(
    "", GKE_DRIVER_INSTALLER_MANIFEST, GKE_PAUSE_IMAGE,
    ["/cos-gpu-installer", "install", "--version=latest"], arm=False,
)  # fmt: skip
A4X_INSTALLER = DriverInstaller(
    "-a4x", GKE_A4X_DRIVER_INSTALLER_MANIFEST, GKE_A4X_PAUSE_IMAGE,
    # As Google's A4X manifest: a driver already loaded is kept.
    ["bash", "-c", "lsmod | grep -q nvidia || /cos-gpu-installer install --version=latest"],
    arm=True,
)  # fmt: skip


def device_plugin_switch(
    name: str, on: bool, opts: pulumi.ResourceOptions
) -> k8s.apiextensions.CustomResourcePatch:
    """The patch of the operator's ClusterPolicy that turns its device plugin on or off on every
    node (`mig_inference.kube.device_plugin_switch`). The caller orders it by its value: on
    before whatever needs a device plugin, off after whatever may still need one."""
    patch = switch_patch(on)
    return k8s.apiextensions.CustomResourcePatch(
        name,
        api_version=API_VERSION,
        kind=KIND,
        metadata=k8s.meta.v1.ObjectMetaArgs(
            name=patch["metadata"]["name"], annotations=patch["metadata"]["annotations"]
        ),
        spec=patch["spec"],
        opts=opts,
    )


class GpuOperatorArgs(TypedDict):
    stack: Stack
    """The stack whose pools the operator serves: the planner derives the chart's values (mixed
    strategy, the mig-parted config of every pool's layout, sharing configs), the namespace, the
    version and, on GKE, the critical-pods quota from it."""


class GpuOperator(pulumi.ComponentResource):
    """`helm.v3.Release` of the GPU Operator in its own namespace.

    With time-sliced pools it owns the device plugin's ConfigMap, one patch per pool's config, so
    a config exists as long as a node may name it. On GKE operator-mode pools it also creates
    Google's COS driver installer as a DaemonSet and the ResourceQuota that lets system-critical
    pods run outside kube-system."""

    release_status: pulumi.Output[Any]
    """The Helm release's status."""
    namespace: pulumi.Output[str]
    """Namespace of the operator and its operands."""

    def __init__(
        self, name: str, args: GpuOperatorArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("mig-inference:index:GpuOperator", name, None, opts)
        plan = planned(args["stack"])
        settings = plan.spec.gpu_operator
        namespace = agent_namespace(name, settings.namespace, self)
        depends: list[pulumi.Resource] = [namespace]
        if plan.spec.cloud is Cloud.GKE:
            depends.append(
                critical_pods_quota(
                    f"{name}-critical-pods",
                    "gpu-operator-critical-pods",
                    namespace,
                    operator_critical_pods(plan),
                    self,
                )
            )
            arm = sorted(
                {
                    pool.machine.name
                    for pool in plan.pools
                    if pool.operator_managed and pool.machine and pool.machine.arch is Arch.ARM64
                }
            )
            # Google's A4X installer on the Arm machines: its pause image has an arm64 build.
            for installer in (AMD64_INSTALLER, *([A4X_INSTALLER] if arm else [])):
                depends.append(
                    self._gke_driver_installer(name, settings.namespace, namespace, installer, arm)
                )
        # Before the release: no device plugin starts without its ConfigMap, and the pools (which
        # wait for this component) are labelled only once their configs are there.
        depends.extend(self._device_plugin_configs(name, settings.namespace, namespace, plan))
        release = k8s.helm.v3.Release(
            name,
            k8s.helm.v3.ReleaseArgs(
                name="gpu-operator",
                chart=GPU_OPERATOR_CHART,
                version=settings.version,
                repository_opts=k8s.helm.v3.RepositoryOptsArgs(repo=GPU_OPERATOR_REPO),
                namespace=settings.namespace,
                create_namespace=False,
                values=gpu_operator_values(plan),
                timeout=settings.timeout_seconds,
                cleanup_on_fail=True,
                max_history=10,
            ),
            opts=pulumi.ResourceOptions(parent=self, depends_on=depends),
        )
        self.release_status = release.status
        self.namespace = namespace.metadata.name
        self.register_outputs({"release_status": self.release_status, "namespace": self.namespace})

    def _device_plugin_configs(
        self, name: str, namespace: str, ns: k8s.core.v1.Namespace, plan: StackPlan
    ) -> list[pulumi.Resource]:
        """The device plugin's ConfigMap with its default config, and one server-side apply
        patch per pool's config key, each with its own field manager: a new key is a new patch,
        created with the other creates; a key no pool has any more is a removed patch, which
        Pulumi deletes after every create and update (pulumi/pulumi
        `pkg/resource/deploy/deployment_executor.go`: deletes run last, in reverse dependency
        order, after the pools that named it); deleting a patch relinquishes its field manager's
        fields, that key alone (pulumi-kubernetes `provider/pkg/await/await.go`, a Patch's delete
        is `ssa.Relinquish`)."""
        configs = device_plugin_configs(plan)
        if not configs:
            return []
        base = k8s.core.v1.ConfigMap(
            f"{name}-device-plugin-configs",
            metadata=k8s.meta.v1.ObjectMetaArgs(
                name=DEVICE_PLUGIN_CONFIG_MAP, namespace=namespace, labels=MANAGED_BY
            ),
            data={DEVICE_PLUGIN_DEFAULT_CONFIG: device_plugin_default_config()},
            opts=pulumi.ResourceOptions(parent=self, depends_on=[ns]),
        )
        patches: list[pulumi.Resource] = [
            k8s.core.v1.ConfigMapPatch(
                f"{name}-device-plugin-config-{key}",
                metadata=k8s.meta.v1.ObjectMetaPatchArgs(
                    name=DEVICE_PLUGIN_CONFIG_MAP,
                    namespace=namespace,
                    annotations={"pulumi.com/patchFieldManager": f"{FIELD_MANAGER_PREFIX}{key}"},
                ),
                data={key: text},
                opts=pulumi.ResourceOptions(parent=self, depends_on=[base]),
            )
            for key, text in configs.items()
        ]
        return [base, *patches]

    def _gke_driver_installer(
        self,
        name: str,
        namespace: str,
        ns: k8s.core.v1.Namespace,
        installer: DriverInstaller,
        arm_machines: list[str],
    ) -> k8s.apps.v1.DaemonSet:
        """Google's COS driver installer, following the manifest release named in
        `mig.versions`, restricted to the operator-mode pools (GKE installs the driver itself
        on native-MIG pools): Google's A4X manifest on the Arm machine types, the other one
        everywhere else."""
        app = f"{DRIVER_INSTALLER}{installer.suffix}"
        labels = {"k8s-app": app, **MANAGED_BY}
        by_machine = (
            [
                k8s.core.v1.NodeSelectorRequirementArgs(
                    key=INSTANCE_TYPE_LABEL,
                    operator="In" if installer.arm else "NotIn",
                    values=arm_machines,
                )
            ]
            if arm_machines
            else []
        )
        host_paths = {
            "dev": "/dev",
            "vulkan-icd-mount": f"{GKE_NVIDIA_DIR}/vulkan/icd.d",
            "nvidia-install-dir-host": GKE_NVIDIA_DIR,
            "root-mount": "/",
            "cos-tools": "/var/lib/cos-tools",
        }
        mounts = {
            "nvidia-install-dir-host": "/usr/local/nvidia",
            "vulkan-icd-mount": "/etc/vulkan/icd.d",
            "dev": "/dev",
            "root-mount": "/root",
            "cos-tools": "/build/cos-tools",
        }
        env = {
            "NVIDIA_INSTALL_DIR_HOST": GKE_NVIDIA_DIR,
            "NVIDIA_INSTALL_DIR_CONTAINER": "/usr/local/nvidia",
            "VULKAN_ICD_DIR_HOST": f"{GKE_NVIDIA_DIR}/vulkan/icd.d",
            "VULKAN_ICD_DIR_CONTAINER": "/etc/vulkan/icd.d",
            "ROOT_MOUNT_DIR": "/root",
            "COS_TOOLS_DIR_HOST": "/var/lib/cos-tools",
            "COS_TOOLS_DIR_CONTAINER": "/build/cos-tools",
        }
        return k8s.apps.v1.DaemonSet(
            f"{name}-driver-installer{installer.suffix}",
            metadata=k8s.meta.v1.ObjectMetaArgs(
                name=app,
                namespace=namespace,
                labels=labels,
                annotations={"mig-inference.io/follows": installer.follows},
            ),
            spec=k8s.apps.v1.DaemonSetSpecArgs(
                selector=k8s.meta.v1.LabelSelectorArgs(match_labels={"k8s-app": app}),
                update_strategy=k8s.apps.v1.DaemonSetUpdateStrategyArgs(type="RollingUpdate"),
                template=k8s.core.v1.PodTemplateSpecArgs(
                    metadata=k8s.meta.v1.ObjectMetaArgs(labels=labels),
                    spec=k8s.core.v1.PodSpecArgs(
                        priority_class_name="system-node-critical",
                        affinity=k8s.core.v1.AffinityArgs(
                            node_affinity=k8s.core.v1.NodeAffinityArgs(
                                required_during_scheduling_ignored_during_execution=k8s.core.v1.NodeSelectorArgs(
                                    node_selector_terms=[
                                        k8s.core.v1.NodeSelectorTermArgs(
                                            match_expressions=[
                                                k8s.core.v1.NodeSelectorRequirementArgs(
                                                    key="cloud.google.com/gke-accelerator",
                                                    operator="Exists",
                                                ),
                                                k8s.core.v1.NodeSelectorRequirementArgs(
                                                    key=GKE_NO_DEVICE_PLUGIN_LABEL,
                                                    operator="In",
                                                    values=["true"],
                                                ),
                                                *by_machine,
                                            ]
                                        )
                                    ]
                                )
                            )
                        ),
                        tolerations=[k8s.core.v1.TolerationArgs(operator="Exists")],
                        host_network=True,
                        host_pid=True,
                        automount_service_account_token=False,
                        volumes=[
                            k8s.core.v1.VolumeArgs(
                                name=volume,
                                host_path=k8s.core.v1.HostPathVolumeSourceArgs(path=path),
                            )
                            for volume, path in host_paths.items()
                        ],
                        init_containers=[
                            k8s.core.v1.ContainerArgs(
                                name=DRIVER_INSTALLER,
                                image=GKE_DRIVER_INSTALLER_IMAGE,
                                image_pull_policy="Never",
                                command=installer.command,
                                resources=k8s.core.v1.ResourceRequirementsArgs(
                                    requests={"cpu": "150m"}
                                ),
                                security_context=k8s.core.v1.SecurityContextArgs(privileged=True),
                                env=[
                                    k8s.core.v1.EnvVarArgs(name=k, value=v) for k, v in env.items()
                                ],
                                volume_mounts=[
                                    k8s.core.v1.VolumeMountArgs(name=volume, mount_path=path)
                                    for volume, path in mounts.items()
                                ],
                            )
                        ],
                        containers=[
                            k8s.core.v1.ContainerArgs(
                                name="pause",
                                image=installer.pause_image,
                                resources=k8s.core.v1.ResourceRequirementsArgs(
                                    requests={"cpu": "10m", "memory": "16Mi"},
                                    limits={"memory": "16Mi"},
                                ),
                                security_context=k8s.core.v1.SecurityContextArgs(
                                    allow_privilege_escalation=False,
                                    capabilities=k8s.core.v1.CapabilitiesArgs(drop=["ALL"]),
                                ),
                            )
                        ],
                    ),
                ),
            ),
            opts=pulumi.ResourceOptions(parent=self, depends_on=[ns]),
        )
