"""NVIDIA's DRA driver for GPUs, for the pools with `allocation: dra`."""

from typing import Any, TypedDict

import pulumi
import pulumi_kubernetes as k8s

from mig_inference.clouds import Cloud
from mig_inference.kube.dra import (
    dra_settings,
    driver_critical_pods,
    driver_values,
    profile_classes,
)
from mig_inference.versions import DRA_DRIVER_CHART, DRA_DRIVER_VERSION

from ..planning import planned
from ..stack_args import Stack
from .agent_namespace import agent_namespace, critical_pods_quota

RELEASE_NAME = "dra-driver-nvidia-gpu"


class DraDriverArgs(TypedDict):
    stack: Stack
    """The stack whose DRA pools the driver serves: the planner derives its namespace, the
    chart's values (driver root, the DRA pools' node label, DynamicMIG) and, with
    `dra.extendedResources`, the DeviceClass of every MIG profile those pools offer."""


class DraDriver(pulumi.ComponentResource):
    """`helm.v3.Release` of NVIDIA's DRA driver in its own namespace (on GKE with the quota
    that admits its system-node-critical pods), and the DeviceClasses that map MIG profiles to
    `nvidia.com/mig-<profile>` (Kubernetes 1.36+, `dra.extendedResources`)."""

    release_status: pulumi.Output[Any]
    """The Helm release's status."""
    namespace: pulumi.Output[str]
    """Namespace of the driver's controller and kubelet plugins."""

    def __init__(
        self, name: str, args: DraDriverArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("mig-inference:index:DraDriver", name, None, opts)
        plan = planned(args["stack"])
        settings = dra_settings(plan)
        namespace = agent_namespace(name, settings.namespace, self)
        before: list[pulumi.Resource] = [namespace]
        if plan.spec.cloud is Cloud.GKE:
            # Its kubelet plugin runs at system-node-critical: without the quota GKE asks for,
            # no plugin pod is admitted, no slice published, and the MIG-ready gate times out.
            before.append(
                critical_pods_quota(
                    f"{name}-critical-pods",
                    "dra-driver-critical-pods",
                    namespace,
                    driver_critical_pods(plan),
                    self,
                )
            )
        release = k8s.helm.v3.Release(
            name,
            k8s.helm.v3.ReleaseArgs(
                name=RELEASE_NAME,
                chart=DRA_DRIVER_CHART,
                version=DRA_DRIVER_VERSION,
                namespace=settings.namespace,
                create_namespace=False,
                values=driver_values(plan),
                cleanup_on_fail=True,
                max_history=10,
            ),
            opts=pulumi.ResourceOptions(parent=self, depends_on=before),
        )
        for device_class in profile_classes(plan):
            k8s.resource.v1.DeviceClass(
                f"{name}-{device_class.name}",
                metadata=k8s.meta.v1.ObjectMetaArgs(
                    name=device_class.name,
                    labels={"app.kubernetes.io/managed-by": "mig-inference"},
                ),
                spec=k8s.resource.v1.DeviceClassSpecArgs(
                    selectors=[
                        k8s.resource.v1.DeviceSelectorArgs(
                            cel=k8s.resource.v1.CELDeviceSelectorArgs(
                                expression=device_class.expression
                            )
                        )
                    ],
                    extended_resource_name=device_class.extended_resource,
                ),
                opts=pulumi.ResourceOptions(parent=self, depends_on=[release]),
            )
        self.release_status = release.status
        self.namespace = namespace.metadata.name
        self.register_outputs({"release_status": self.release_status, "namespace": self.namespace})
