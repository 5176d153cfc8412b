"""How the OCI provider the component configures signs in: as the stack's `oci:` config says
(`oci:auth`, `oci:configFileProfile`, the keys Pulumi's default OCI provider reads), else as the
OCI CLI of the same environment is told to (`OCI_CLI_AUTH`, `OCI_CLI_PROFILE`). A job that
exchanged its CI identity for an OCI session token and set `OCI_CLI_AUTH=security_token` for
the CLI (which OKE's kubeconfig runs) thus signs the provider in with the same session, instead
of the API key the provider assumes by default."""

from __future__ import annotations

from collections.abc import Mapping

CLI_AUTH = {
    "api_key": "ApiKey",
    "security_token": "SecurityToken",
    "instance_principal": "InstancePrincipal",
    "resource_principal": "ResourcePrincipal",
    "oke_workload_identity": "OKEWorkloadIdentity",
}
"""The OCI CLI's `--auth` values (`OCI_CLI_AUTH`) and the provider's `auth` of the same
sign-in (OCI CLI "CLI Environment Variables"; pulumi-oci's Provider `auth`)."""


def oci_provider_sign_in(
    auth: str | None, profile: str | None, environ: Mapping[str, str]
) -> dict[str, str]:
    """The provider's `auth` and `config_file_profile`: from the stack's `oci:` config when it
    sets them, else from the OCI CLI's environment; neither: the provider's own defaults."""
    chosen = auth or CLI_AUTH.get(environ.get("OCI_CLI_AUTH", "").strip().lower())
    chosen_profile = profile or environ.get("OCI_CLI_PROFILE") or None
    return {
        **({"auth": chosen} if chosen else {}),
        **({"config_file_profile": chosen_profile} if chosen_profile else {}),
    }
