"""How a pod asks for its slice: the extended resource `nvidia.com/mig-<profile>` (device plugin,
or the DRA bridge), or a ResourceClaimTemplate whose CEL selector names the slice (DRA)."""

import pulumi
import pulumi_kubernetes as k8s
from msgspec import Struct, field

from mig_inference.kube.dra import (
    CLAIM_NAME,
    REQUEST_NAME,
    claims_needed,
    device_class,
    slice_selector,
)
from mig_inference.plan import ServicePlan, StackPlan


class DeviceRequest(Struct):
    """What a pod spec and its GPU containers carry to get one device."""

    resources: dict[str, str] = field(default_factory=dict)
    """Extended resources a GPU container requests and limits itself to (empty with a claim)."""
    claims: list[k8s.core.v1.ResourceClaimArgs] | None = None
    """The GPU containers' references to the pod's claim."""
    pod_claims: list[k8s.core.v1.PodResourceClaimArgs] | None = None
    """The pod's claim, made from the template for each pod."""
    depends_on: list[pulumi.Resource] = field(default_factory=list)
    """The claim template, which must exist before the pods."""


def device_request(
    name: str,
    template_name: str,
    namespace: str,
    service: ServicePlan,
    plan: StackPlan,
    parent: pulumi.Resource,
) -> DeviceRequest:
    """One device of `service`'s offer; on a DRA pool (without the bridge) the
    ResourceClaimTemplate `template_name` is created in `namespace` for it."""
    if not claims_needed(service, plan):
        return DeviceRequest(resources={service.resource: "1"})
    template = k8s.resource.v1.ResourceClaimTemplate(
        name,
        metadata=k8s.meta.v1.ObjectMetaArgs(
            name=template_name,
            namespace=namespace,
            labels={"app.kubernetes.io/managed-by": "mig-inference"},
        ),
        spec=k8s.resource.v1.ResourceClaimTemplateSpecArgs(
            spec=k8s.resource.v1.ResourceClaimSpecArgs(
                devices=k8s.resource.v1.DeviceClaimArgs(
                    requests=[
                        k8s.resource.v1.DeviceRequestArgs(
                            name=REQUEST_NAME,
                            exactly=k8s.resource.v1.ExactDeviceRequestArgs(
                                device_class_name=device_class(service.offer),
                                selectors=[
                                    k8s.resource.v1.DeviceSelectorArgs(
                                        cel=k8s.resource.v1.CELDeviceSelectorArgs(
                                            expression=slice_selector(
                                                service.offer, service.spec.need_mib
                                            )
                                        )
                                    )
                                ],
                            ),
                        )
                    ]
                )
            )
        ),
        # The API server refuses any update of the spec (immutable): a new profile or memory
        # need is a new template (same name: deleted, then created; claims already made stay).
        opts=pulumi.ResourceOptions(parent=parent, replace_on_changes=["spec"]),
    )
    return DeviceRequest(
        claims=[k8s.core.v1.ResourceClaimArgs(name=CLAIM_NAME)],
        pod_claims=[
            k8s.core.v1.PodResourceClaimArgs(
                name=CLAIM_NAME, resource_claim_template_name=template_name
            )
        ],
        depends_on=[template],
    )
