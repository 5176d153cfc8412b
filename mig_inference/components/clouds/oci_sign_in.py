"""How the OCI provider the component configures signs in: as the stack's `oci:` config says
(`oci:auth`, `oci:configFileProfile`, the keys Pulumi's default OCI provider reads), else as the
OCI CLI of the same environment is told to (`OCI_CLI_AUTH`, `OCI_CLI_PROFILE`). A job that
exchanged its CI identity for an OCI session token and set `OCI_CLI_AUTH=security_token` for
the CLI (which OKE's kubeconfig runs) thus signs the provider in with the same session, instead
of the API key the provider assumes by default."""

from __future__ import annotations

from collections.abc import Mapping

from msgspec import Struct

CLI_AUTH = {
    "api_key": "ApiKey",
    "security_token": "SecurityToken",
    "instance_principal": "InstancePrincipal",
    "resource_principal": "ResourcePrincipal",
    "oke_workload_identity": "OKEWorkloadIdentity",
}
"""The OCI CLI's `--auth` values (`OCI_CLI_AUTH`) and the provider's `auth` of the same
sign-in (OCI CLI "CLI Environment Variables"; pulumi-oci's Provider `auth`)."""


class OciSignIn(Struct, frozen=True):
    """The OCI provider's sign-in settings (None: the provider's own default)."""

    auth: str | None
    """The provider's `auth`: `ApiKey`, `SecurityToken`, `InstancePrincipal`, ..."""
    profile: str | None
    """The provider's `config_file_profile`: the profile of the OCI config file."""


def oci_provider_sign_in(
    auth: str | None, profile: str | None, environ: Mapping[str, str]
) -> OciSignIn:
    """The provider's `auth` and `config_file_profile`: from the stack's `oci:` config when it
    sets them, else from the OCI CLI's environment; neither: the provider's own defaults."""
    return OciSignIn(
        auth or CLI_AUTH.get(environ.get("OCI_CLI_AUTH", "").strip().lower()),
        profile or environ.get("OCI_CLI_PROFILE") or None,
    )
