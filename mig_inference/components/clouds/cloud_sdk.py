"""Each cloud's Pulumi provider SDK is an extra of the package (`mig-inference[gke]`, `[eks]`,
`[oke]`, or `[all]`), imported only by the modules of that cloud: a GKE-only platform team installs
neither the AWS nor the OCI SDK."""

import importlib

import pulumi
from msgspec import Struct

from mig_inference.clouds import Cloud
from mig_inference.installation import extra_hint


class CloudSdk(Struct, frozen=True):
    module: str
    """The import name."""
    distribution: str
    """The distribution on PyPI."""
    extra: str
    """The package extra that installs it."""


CLOUD_SDKS: dict[Cloud, CloudSdk] = {
    Cloud.GKE: CloudSdk("pulumi_gcp", "pulumi-gcp", "gke"),
    Cloud.EKS: CloudSdk("pulumi_aws", "pulumi-aws", "eks"),
    Cloud.OKE: CloudSdk("pulumi_oci", "pulumi-oci", "oke"),
}


def require_cloud_sdk(cloud: Cloud) -> None:
    """Stop the program, naming the extra to install, when `cloud`'s SDK is missing (an
    `existing` cluster needs none): with `make setup` in a clone, where pip would fetch a
    package of that name from an index instead of this one."""
    sdk = CLOUD_SDKS.get(cloud)
    if sdk is None:
        return
    try:
        importlib.import_module(sdk.module)
    except ImportError:
        raise pulumi.RunError(
            f"mig-inference:cloud: {cloud.value} needs the Pulumi SDK {sdk.distribution}, which "
            f"is not installed: {extra_hint(sdk.extra)}"
        ) from None
