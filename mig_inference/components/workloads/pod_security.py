"""What the project's own small pods share to run unprivileged: the Jobs' scripts, the verify
probe, the gateway's body router. Each runs as nobody where its image lets it, with a read-only
root and a size-limited scratch folder at /tmp."""

from __future__ import annotations

import pulumi_kubernetes as k8s

NOBODY = 65534
"""The unprivileged user and group the Jobs' and the probe's pods run as."""

LOCKED_DOWN = k8s.core.v1.SecurityContextArgs(
    allow_privilege_escalation=False,
    read_only_root_filesystem=True,
    capabilities=k8s.core.v1.CapabilitiesArgs(drop=["ALL"]),
)
"""A container that gains no privilege, writes only to its volumes and holds no capability."""

TMP_MOUNT = k8s.core.v1.VolumeMountArgs(name="tmp", mount_path="/tmp")


def nobody_pod() -> k8s.core.v1.PodSecurityContextArgs:
    """A pod whose containers run as nobody (never root) with the runtime's seccomp profile."""
    return k8s.core.v1.PodSecurityContextArgs(
        run_as_non_root=True,
        run_as_user=NOBODY,
        run_as_group=NOBODY,
        seccomp_profile=k8s.core.v1.SeccompProfileArgs(type="RuntimeDefault"),
    )


def tmp_volume(size_limit: str) -> k8s.core.v1.VolumeArgs:
    """The scratch folder `TMP_MOUNT` mounts, at most `size_limit` (a quantity, `64Mi`)."""
    return k8s.core.v1.VolumeArgs(
        name="tmp", empty_dir=k8s.core.v1.EmptyDirVolumeSourceArgs(size_limit=size_limit)
    )
