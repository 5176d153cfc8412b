"""The Kubernetes versions each cloud creates clusters and node pools with: one table, each row
with its source, the whole table as of one date (TABLE_DATE).

What a row says holds on that date: a version whose support ended before it is no longer offered
(the refusal says when it ended), one newer than the table knows is refused until the table is
brought up to date (the refusal says the table's date). Nothing here reads the clock: "has left
standard support" means "had left it by TABLE_DATE", so a result never changes as the calendar
moves on, only when the table is updated.

Sources, each read for this table (the stored copies the project's search reaches). TABLE_DATE
is 2026-09-17, the GKE release notes (2026-R39) the channel table goes with (its copy predates
2026-R40 of 2026-09-23); no EKS or OKE source read is later:

- EKS: the Amazon EKS User Guide, "Understand the Kubernetes version lifecycle on EKS", release
  calendar (awsdocs/amazon-eks-user-guide `latest/ug/versioning/kubernetes-versions.adoc`
  @0138560441, rows 1.29-1.34); 1.35 from endoflife.date/amazon-eks (AWS What's New, January
  2026: EKS 1.35); 1.36 from the User Guide's "Review release notes for Kubernetes versions on
  standard support" ("Kubernetes 1.36 is now available in Amazon EKS"; its EKS release date is
  not in the copy read, so its support dates are unknown here); 1.37 not yet offered
  (aws/containers-roadmap#2864, "Support for Kubernetes 1.37", open, filed 2026-08-28). EKS gives
  a minor 14 months of standard support from its EKS release, then 12 of extended support (at
  extra cost); a cluster cannot be created on a version past its extended support.
- OKE: Oracle's "Cluster Add-on Supported Versions" (Kubernetes Engine, en-us, 2026: kube-proxy
  1.34.2 for Kubernetes 1.34, the newest patch it lists) and "Supported Versions of Kubernetes"
  (OKE supports three minor versions for new clusters, and the fourth-newest for at least 30
  days after it announces a new one). OKE's support of 1.36 was announced on 2026-05-28
  (reported by third parties, horizonjournal.online and primeglobe.online; Oracle's own notice
  was not in the copies read), so 1.33 left on 2026-06-27. OKE takes exact patch versions; the
  patches of 1.35 and 1.36 are not in the copies read, and are not checked here.
- GKE: the GKE release notes' "Current versions" table (docs.cloud.google.com/kubernetes-engine/
  docs/release-notes; the copy whose Rapid default is 1.36.4-gke.1082000, which 2026-R40 of
  2026-09-23 replaced): the minors each release channel offers for new clusters. GKE's per-minor
  support dates (its release schedule page) are not in the copies read.
"""

from __future__ import annotations

import re
from datetime import date

from msgspec import Struct

from mig_inference.clouds import Cloud

TABLE_DATE = date(2026, 9, 17)
"""The date the whole table holds on (see the module's sources)."""

EKS_CALENDAR = (
    "Amazon EKS User Guide, Kubernetes release calendar "
    "(awsdocs/amazon-eks-user-guide latest/ug/versioning/kubernetes-versions.adoc @0138560441)"
)
EKS_135 = "endoflife.date/amazon-eks (AWS What's New, January 2026: EKS 1.35)"
EKS_136 = (
    "Amazon EKS User Guide, Review release notes for Kubernetes versions on standard support "
    '("Kubernetes 1.36 is now available in Amazon EKS"; release date not in the copy read)'
)
EKS_NOT_YET = "aws/containers-roadmap#2864 (EKS support for Kubernetes 1.37: open, 2026-08-28)"
OKE_ADDONS = "Oracle, OKE Cluster Add-on Supported Versions (en-us, 2026)"
OKE_POLICY = (
    "Oracle, OKE Supported Versions of Kubernetes (three minors, the fourth for 30 days after "
    "a new one); 1.36 announced 2026-05-28 (third-party reports)"
)
GKE_RELEASE_NOTES = (
    "GKE release notes, Current versions (docs.cloud.google.com/kubernetes-engine/docs/"
    "release-notes, before 2026-R40 of 2026-09-23)"
)


class OfferedMinor(Struct, frozen=True):
    """One Kubernetes minor a cloud creates clusters with, and until when."""

    minor: int
    standard_support_ends: date | None
    """The last day of standard support (EKS: extended support, at extra cost, follows);
    None when the sources read do not state it."""
    offered_until: date | None
    """The last day a cluster may be created on it; None when not stated (still offered)."""
    source: str
    patches: tuple[str, ...] = ()
    """OKE: the patch versions offered (`v1.34.2`); empty when not known (then not checked)."""

    @property
    def version(self) -> str:
        return f"1.{self.minor}"


EKS_MINORS = (
    OfferedMinor(29, date(2025, 3, 23), date(2026, 3, 23), EKS_CALENDAR),
    OfferedMinor(30, date(2025, 7, 23), date(2026, 7, 23), EKS_CALENDAR),
    OfferedMinor(31, date(2025, 11, 26), date(2026, 11, 26), EKS_CALENDAR),
    OfferedMinor(32, date(2026, 3, 23), date(2027, 3, 23), EKS_CALENDAR),
    OfferedMinor(33, date(2026, 7, 29), date(2027, 7, 29), EKS_CALENDAR),
    OfferedMinor(34, date(2026, 12, 2), date(2027, 12, 2), EKS_CALENDAR),
    OfferedMinor(35, date(2027, 3, 27), date(2028, 3, 27), EKS_135),
    OfferedMinor(36, None, None, EKS_136),
)
OKE_MINORS = (
    OfferedMinor(33, None, date(2026, 6, 27), OKE_POLICY, ("v1.33.1",)),
    OfferedMinor(34, None, None, OKE_ADDONS, ("v1.34.2",)),
    OfferedMinor(35, None, None, OKE_POLICY),
    OfferedMinor(36, None, None, OKE_POLICY),
)
GKE_CHANNEL_MINORS: dict[str, tuple[int, int]] = {
    "RAPID": (34, 37),
    "REGULAR": (34, 36),
    "STABLE": (34, 35),
    "EXTENDED": (31, 36),
}
"""The minors each GKE release channel offers for new clusters (first, last)."""
GKE_DEFAULT_CHANNEL = "REGULAR"
"""The release channel of a cluster the stack creates when `cluster.releaseChannel` is not
given."""
CLOUD_MINORS: dict[Cloud, tuple[OfferedMinor, ...]] = {Cloud.EKS: EKS_MINORS, Cloud.OKE: OKE_MINORS}
CLOUD_SOURCES = {Cloud.EKS: EKS_CALENDAR, Cloud.OKE: OKE_ADDONS, Cloud.GKE: GKE_RELEASE_NOTES}
_VERSION = re.compile(r"v?1\.(\d{1,2})(?:\.(\d{1,3}))?")


def offered_minors(cloud: Cloud) -> tuple[OfferedMinor, ...]:
    """The minors the cloud still offered on TABLE_DATE."""
    return tuple(
        row
        for row in CLOUD_MINORS.get(cloud, ())
        if row.offered_until is None or row.offered_until >= TABLE_DATE
    )


def offered_versions(cloud: Cloud) -> list[str]:
    """What may be written for the cloud's version key, as it is written there."""
    if cloud is Cloud.OKE:
        return [
            patch if patch else f"v1.{row.minor}.N"
            for row in offered_minors(cloud)
            for patch in (row.patches or ("",))
        ]
    return [row.version for row in offered_minors(cloud)]


def version_problem(cloud: Cloud, version: str) -> str | None:
    """Why the cloud creates no cluster or node pool of `version` (its format already checked),
    as of TABLE_DATE; None when it does."""
    found = _VERSION.fullmatch(version)
    rows = CLOUD_MINORS.get(cloud)
    if found is None or rows is None:
        return None
    minor = int(found.group(1))
    offered = offered_minors(cloud)
    listed = ", ".join(offered_versions(cloud))
    name = cloud.value.upper()
    row = next((r for r in rows if r.minor == minor), None)
    if row is not None and row not in offered:
        return (
            f"{name} stopped offering Kubernetes 1.{minor} on {row.offered_until} ({row.source}); "
            f"it offers {listed} (as of {TABLE_DATE})"
        )
    if row is None:
        where = "older than" if minor < offered[0].minor else "newer than"
        later = f"; {EKS_NOT_YET}" if cloud is Cloud.EKS and minor > offered[-1].minor else ""
        return (
            f"{name} offers no Kubernetes 1.{minor} ({where} every version it offers as of "
            f"{TABLE_DATE}: {listed}; {CLOUD_SOURCES[cloud]}{later})"
        )
    if cloud is Cloud.OKE and row.patches and version not in row.patches:
        return (
            f"OKE takes only the patch versions it lists: for 1.{minor} {', '.join(row.patches)} "
            f"({row.source}, as of {TABLE_DATE})"
        )
    return None


def support_note(cloud: Cloud, version: str) -> str | None:
    """A word on an offered version that had left standard support by TABLE_DATE (EKS:
    extended support, billed extra); None otherwise."""
    found = _VERSION.fullmatch(version)
    if found is None:
        return None
    row = next((r for r in offered_minors(cloud) if r.minor == int(found.group(1))), None)
    ends = row.standard_support_ends if row is not None else None
    if row is None or ends is None or ends >= TABLE_DATE:
        return None
    return (
        f"{cloud.value.upper()} {row.version} left standard support on {ends} (as of the version "
        f"table of {TABLE_DATE}): extended support, billed extra, until {row.offered_until} "
        f"({row.source})"
    )


def gke_channels_offering(minor: int) -> list[str]:
    return [name for name, (first, last) in GKE_CHANNEL_MINORS.items() if first <= minor <= last]
