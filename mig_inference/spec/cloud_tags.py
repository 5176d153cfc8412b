"""`tags`, `definedTags` and `labels`: what every cloud resource of the stack carries, in the
cloud's own terms (AWS and OCI tags, OCI defined tags, Google Cloud labels)."""

from __future__ import annotations

from msgspec import Struct, field

from mig_inference.clouds import Cloud
from mig_inference.errors import shown
from mig_inference.spec import formats
from mig_inference.spec.formats import Format
from mig_inference.spec.reader import ConfigNode

TAG_KEYS = ("tags", "definedTags", "labels")
"""The stack's top-level keys for cloud resource tags."""
ACCEPTED = {
    Cloud.EKS: ("tags",),
    Cloud.OKE: ("tags", "definedTags"),
    Cloud.GKE: ("labels",),
    Cloud.EXISTING: (),
}
FORMATS: dict[tuple[Cloud, str], tuple[Format, Format, int | None]] = {
    (Cloud.EKS, "tags"): (formats.AWS_TAG_KEY, formats.AWS_TAG_VALUE, formats.AWS_TAGS_MAX),
    (Cloud.GKE, "labels"): (formats.GCP_LABEL_KEY, formats.GCP_LABEL_VALUE, formats.GCP_LABELS_MAX),
    (Cloud.OKE, "tags"): (formats.OCI_FREEFORM_TAG_KEY, formats.OCI_TAG_VALUE, None),
    (Cloud.OKE, "definedTags"): (formats.OCI_DEFINED_TAG_KEY, formats.OCI_TAG_VALUE, None),
}
ELSEWHERE = {
    "tags": "Google Cloud calls them labels: use `labels`",
    "labels": "AWS and OCI call them tags: use `tags` (these are not Kubernetes labels: a "
    "pool's node labels are pools[].labels)",
    "definedTags": "defined tags are OCI's",
}


UNPROTECTED_TAG = ("mig-inference-unprotected", "by-design")
"""The tag (label on GKE) a GPU pool of a stack with `cluster.protect: false` carries: the
policy pack's `gpu-node-pools-protected` lets such a pool through. Valid on all three clouds."""


class CloudTags(Struct, frozen=True):
    """What the cloud resources the stack creates carry, besides the provider's defaults."""

    tags: dict[str, str] = field(default_factory=dict)
    """AWS tags, OCI freeform tags or Google Cloud labels (the stack's cloud decides)."""
    defined: dict[str, str] = field(default_factory=dict)
    """OCI defined tags, `<namespace>.<key>` to value."""

    def oci_defined(self) -> dict[str, str] | None:
        return dict(self.defined) or None

    def given(self) -> dict[str, str] | None:
        """The tags, or None when there are none (so a stack without tags renders as before)."""
        return dict(self.tags) or None

    def of_gpu_pool(self, protected: bool) -> dict[str, str] | None:
        """What a GPU pool resource carries: the tags, and what the project adds to them."""
        return {**self.tags, **added_by_project(protected)} or None


def added_by_project(protected: bool) -> dict[str, str]:
    """The tags (labels on GKE) the project adds to a GPU pool's own: the opt-out of the policy
    pack's protection rule when the stack turns protection off. Every count limit counts them."""
    key, value = UNPROTECTED_TAG
    return {} if protected else {key: value}


def _read(
    node: ConfigNode,
    key_format: Format,
    value_format: Format,
    most: int | None,
    added: dict[str, str],
) -> dict[str, str]:
    if node.value is None:
        return {}
    if not isinstance(node.value, dict):
        return node.problem(
            f"must be a mapping of keys to string values, got {shown(node.value)}", {}
        )
    carried = set(node.value) | set(added)
    if most is not None and len(carried) > most:
        ours = set(added) - set(node.value)
        adds = (
            f" and the project adds {', '.join(sorted(ours))} (cluster.protect is false)"
            if ours
            else ""
        )
        return node.problem(
            f"has {len(node.value)} entries{adds}: {len(carried)} on a GPU pool; the cloud takes "
            f"at most {most}",
            {},
        )
    found: dict[str, str] = {}
    for key, value in node.value.items():
        where = node.child(str(key))
        problem = key_format.problem(key) if isinstance(key, str) else "not a string"
        if problem is None:
            problem = (
                value_format.problem(value)
                if isinstance(value, str)
                else f"{shown(value)} is not a string (quote numbers and booleans)"
            )
        if problem is not None:
            where.problem(problem, None)
        else:
            found[key] = value
    return found


def cloud_tags_spec(top: dict[str, ConfigNode], cloud: Cloud, protected: bool) -> CloudTags:
    """The stack's tags, checked against its cloud's rules, counting what the project adds
    (`protected`: cluster.protect); a key of another cloud is refused with the one to use."""
    read: dict[str, dict[str, str]] = {}
    for key in TAG_KEYS:
        node = top[key]
        if node.value is None:
            continue
        if key not in ACCEPTED[cloud]:
            why = (
                "an existing cluster's nodes are not created here"
                if cloud is Cloud.EXISTING
                else ELSEWHERE[key]
            )
            node.problem(f"is not taken on {cloud.value}: {why}", None, list(ACCEPTED[cloud]))
            continue
        added = added_by_project(protected) if key != "definedTags" else {}
        read[key] = _read(node, *FORMATS[(cloud, key)], added)
    return CloudTags(read.get("tags") or read.get("labels") or {}, read.get("definedTags") or {})
