"""The package's version: one number per package, read from the installed distribution.

`pyproject.toml` holds it in PEP 440's spelling, as pip and the wheel use it: a release is
`X.Y.Z`, and between releases main carries `X.Y.Z.devN` of the next one, so that no wheel
built from main has a release's number (tests/project/test_release.py holds the CHANGELOG to it).
Pulumi's engine reads plugin and package versions as SemVer, where a development build is a
pre-release: `0.4.0.dev0` is `0.4.0-dev.0` there (Pulumi's own provider SDKs map their PEP 440
versions so)."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

from packaging.version import InvalidVersion, Version

DISTRIBUTION = "mig-inference"
"""The distribution's name on an index, in pip's and the wheel's metadata."""

UNINSTALLED = "0.0.0"
"""The version reported by a copy of the source that no installer put on the path."""

PRE_RELEASE = {"a": "alpha", "b": "beta", "rc": "rc"}
"""PEP 440's pre-release letters as SemVer pre-release identifiers."""


def installed_version() -> str:
    """The installed distribution's version (PEP 440), or `UNINSTALLED`."""
    try:
        return version(DISTRIBUTION)
    except PackageNotFoundError:
        return UNINSTALLED


def semver(pep440: str) -> str:
    """`pep440` as SemVer 2.0: pre-release and development parts become pre-release
    identifiers (`0.4.0rc1.dev2` -> `0.4.0-rc.1.dev.2`), a post release and a local version
    build metadata (`0.4.0.post1+abc` -> `0.4.0+post.1.abc`)."""
    try:
        parsed = Version(pep440)
    except InvalidVersion:
        raise ValueError(f"{pep440!r} is not a PEP 440 version") from None
    major, minor, patch = (*parsed.release, 0, 0)[:3]
    pre: list[str] = []
    if parsed.pre is not None:
        pre += [PRE_RELEASE[parsed.pre[0]], str(parsed.pre[1])]
    if parsed.dev is not None:
        pre += ["dev", str(parsed.dev)]
    build: list[str] = []
    if parsed.post is not None:
        build += ["post", str(parsed.post)]
    if parsed.local is not None:
        build += parsed.local.split(".")
    return (
        f"{major}.{minor}.{patch}"
        + (f"-{'.'.join(pre)}" if pre else "")
        + (f"+{'.'.join(build)}" if build else "")
    )
