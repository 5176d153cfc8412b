"""The Gateway implementation where the cloud runs none (EKS, OKE, existing clusters): the
Gateway API's standard CRDs, the InferencePool CRD, and Istio (its `base` and `istiod` charts)
with the inference extension switched on."""

from typing import Any, NotRequired, TypedDict

import pulumi
import pulumi_kubernetes as k8s

from mig_inference.kube.gateway import BASELINE_NAMESPACE_LABELS, istiod_values
from mig_inference.versions import (
    GATEWAY_API_CRDS,
    INFERENCE_POOL_CRD,
    ISTIO_REPO,
    ISTIO_VERSION,
)

from .node_job import MANAGED_BY


class IstioGatewayArgs(TypedDict):
    namespace: str
    """Istio's namespace (istio-system)."""
    keep_crds: NotRequired[bool]
    """Keep the Gateway API and InferencePool CRDs in the cluster when the gateway goes (a joined
    cluster: deleting a CRD deletes every object of it, other teams' too)."""


class IstioGateway(pulumi.ComponentResource):
    """Gateway API v1.6.1 (standard channel) and InferencePool v1 CRDs, applied from their
    pinned releases (server-side: the HTTPRoute CRD is 429 KB, too large for a client-side
    apply's annotation), then Istio 1.30.3's `base` and `istiod` with
    `ENABLE_GATEWAY_API_INFERENCE_EXTENSION`. istiod deploys the Envoy pods of each Gateway of
    class `istio`."""

    istiod_status: pulumi.Output[Any]
    """The istiod release's status."""

    def __init__(
        self, name: str, args: IstioGatewayArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("mig-inference:index:IstioGateway", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        # Kept on delete on a joined cluster: the component passes the option to every CRD it
        # applies. Istio's own CRDs (its `base` chart) carry `helm.sh/resource-policy: keep`.
        kept = pulumi.ResourceOptions(parent=self, retain_on_delete=args.get("keep_crds", False))
        crds = [
            k8s.yaml.v2.ConfigFile(f"{name}-gateway-api", file=GATEWAY_API_CRDS, opts=kept),
            k8s.yaml.v2.ConfigFile(f"{name}-inference-pool", file=INFERENCE_POOL_CRD, opts=kept),
        ]
        namespace = k8s.core.v1.Namespace(
            f"{name}-ns",
            metadata=k8s.meta.v1.ObjectMetaArgs(
                name=args["namespace"], labels={**BASELINE_NAMESPACE_LABELS, **MANAGED_BY}
            ),
            opts=child,
        )
        base = k8s.helm.v3.Release(
            f"{name}-base",
            k8s.helm.v3.ReleaseArgs(
                name="istio-base",
                chart="base",
                version=ISTIO_VERSION,
                repository_opts=k8s.helm.v3.RepositoryOptsArgs(repo=ISTIO_REPO),
                namespace=args["namespace"],
                create_namespace=False,
                cleanup_on_fail=True,
                max_history=10,
            ),
            opts=pulumi.ResourceOptions(parent=self, depends_on=[namespace, *crds]),
        )
        istiod = k8s.helm.v3.Release(
            f"{name}-istiod",
            k8s.helm.v3.ReleaseArgs(
                name="istiod",
                chart="istiod",
                version=ISTIO_VERSION,
                repository_opts=k8s.helm.v3.RepositoryOptsArgs(repo=ISTIO_REPO),
                namespace=args["namespace"],
                create_namespace=False,
                values=istiod_values(),
                cleanup_on_fail=True,
                max_history=10,
            ),
            opts=pulumi.ResourceOptions(parent=self, depends_on=[base]),
        )
        self.istiod_status = istiod.status
        self.register_outputs({"istiod_status": self.istiod_status})
