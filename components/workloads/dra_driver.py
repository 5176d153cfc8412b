"""NVIDIA's DRA driver for GPUs, for the pools with `allocation: dra`."""

from typing import Any, TypedDict

import pulumi
import pulumi_kubernetes as k8s

from mig_inference.kube.dra import dra_settings, driver_values, profile_classes
from mig_inference.versions import DRA_DRIVER_CHART, DRA_DRIVER_VERSION

from ..planning import planned
from ..stack_args import Stack
from .agent_namespace import agent_namespace

RELEASE_NAME = "dra-driver-nvidia-gpu"


class DraDriverArgs(TypedDict):
    stack: Stack
    """The stack whose DRA pools the driver serves: the planner derives its namespace, the
    chart's values (driver root, the DRA pools' node label, DynamicMIG) and, with
    `dra.extendedResources`, the DeviceClass of every MIG profile those pools offer."""


class DraDriver(pulumi.ComponentResource):
    """`helm.v3.Release` of NVIDIA's DRA driver in its own namespace, and the DeviceClasses that
    map MIG profiles to `nvidia.com/mig-<profile>` (Kubernetes 1.36+, `dra.extendedResources`)."""

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
            opts=pulumi.ResourceOptions(parent=self, depends_on=[namespace]),
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
