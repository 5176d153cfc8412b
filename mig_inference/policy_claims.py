"""What DRA objects ask for, read from resource properties for the policy pack: the device
requests of a ResourceClaim or ResourceClaimTemplate, the profile a DeviceClass bridges to an
extended resource, and the claimed requests each container of a pod holds.

A CEL selector is read with a CEL parser (cel-python). The MIG profiles it names are the string
literals it compares with the `profile` attribute of NVIDIA's DRA driver
(`device.attributes['gpu.nvidia.com'].profile`, by dot or index, on either side of `==`, or
through `in [...]`). A selector that names no profile says nothing about one; a selector that does
not parse is left to the API server, which refuses it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from functools import lru_cache
from typing import Any, TypeAlias

from celpy.celparser import CELParseError, CELParser
from lark import Token, Tree
from msgspec import Struct

from mig_inference.gpus.catalog import RESOURCE_PREFIX
from mig_inference.names.labels import DRA_DRIVER, GPU_DEVICE_CLASS, MIG_DEVICE_CLASS
from mig_inference.resource_props import dig as _dig
from mig_inference.resource_props import mapping as _mapping
from mig_inference.resource_props import sequence as _sequence

Node: TypeAlias = Tree[Token] | Token
"""A node of cel-python's parse tree: a subtree or a token."""

RESOURCE_GROUP = "resource.k8s.io/"
CLAIM_TEMPLATE = "ResourceClaimTemplate"
CLAIM = "ResourceClaim"
DEVICE_CLASS = "DeviceClass"
_REQUESTS = {
    CLAIM_TEMPLATE: ("spec", "spec", "devices", "requests"),
    CLAIM: ("spec", "devices", "requests"),
}
_PROFILE_PATH = ("device", "attributes", DRA_DRIVER, "profile")
# Nodes that wrap one operand in cel-python's grammar (precedence levels).
_WRAPPERS = frozenset(
    {"expr", "conditionalor", "conditionaland", "relation", "addition", "multiplication",
     "unary", "member", "primary"}
)  # fmt: skip
ALL = "All"
"""`allocationMode: All`: every matching device on the node."""


def profile_key(profile: str) -> str:
    """One spelling of a profile for comparisons: `1g.10gb+me`, `1g.10gb.me` and
    `nvidia.com/mig-1g.10gb.me` all read `1g.10gb.me`."""
    return profile.strip().lower().removeprefix(RESOURCE_PREFIX).replace("+", ".")


def resource_kind(resource_type: str) -> str | None:
    """`kubernetes:resource.k8s.io/v1:ResourceClaim` -> `ResourceClaim`; None for other types."""
    provider, _, rest = resource_type.partition(":")
    group_version, _, kind = rest.rpartition(":")
    if provider != "kubernetes" or not group_version.startswith(RESOURCE_GROUP):
        return None
    return kind.removesuffix("Patch")


# --- CEL --------------------------------------------------------------------------------------


def _operand(tree: Node) -> Node:
    """The one operand a chain of precedence wrappers holds."""
    while isinstance(tree, Tree) and tree.data in _WRAPPERS and len(tree.children) == 1:
        tree = tree.children[0]
    return tree


def _string(tree: Node) -> str | None:
    """The value of a string literal operand; None for anything else."""
    found = _operand(tree)
    if isinstance(found, Tree) and found.data == "literal":
        found = found.children[0]
    if not isinstance(found, Token) or found.type not in ("STRING_LIT", "MLSTRING_LIT"):
        return None
    text = str(found)
    if text[:1] in "rR":
        text = text[1:]
    quote = 3 if text[:3] in ('"""', "'''") else 1
    return text[quote:-quote]


def _path(tree: Node) -> tuple[str, ...] | None:
    """`device.attributes['gpu.nvidia.com'].profile` -> its names; None for other operands."""
    found = _operand(tree)
    if isinstance(found, Token):
        return (str(found),) if found.type == "IDENT" else None
    if found.data == "ident":
        return (str(found.children[0]),)
    if found.data == "member_dot":
        head, name = found.children
        base = _path(head)
        return (*base, str(name)) if base is not None else None
    if found.data == "member_index":
        head, index = found.children
        base, key = _path(head), _string(index)
        return (*base, key) if base is not None and key is not None else None
    return None


def _list_strings(tree: Node) -> list[str] | None:
    found = _operand(tree)
    if not (isinstance(found, Tree) and found.data == "list_lit"):
        return None
    items = [c for c in found.children if isinstance(c, Tree) and c.data == "exprlist"]
    values = [_string(item) for exprlist in items for item in exprlist.children]
    return [v for v in values if v is not None]


def _relations(tree: Tree[Token]) -> Iterator[tuple[str, Node, Node]]:
    """Every `left == right` and `left in right` of the expression, as (operator, left, right):
    cel-python parses them as relation(relation_eq(left), right)."""
    for node in tree.iter_subtrees():
        if node.data != "relation" or len(node.children) != 2:
            continue
        operator, right = node.children
        if isinstance(operator, Tree) and operator.data in ("relation_eq", "relation_in"):
            yield operator.data, operator.children[0], right


@lru_cache(maxsize=512)
def _parse(expression: str) -> Tree[Token] | None:
    try:
        return CELParser().parse(expression)
    except CELParseError:
        return None


def selected_profiles(expression: str) -> frozenset[str] | None:
    """The MIG profiles a CEL device selector names (as written); None when it does not parse."""
    tree = _parse(expression)
    if tree is None:
        return None
    found: set[str] = set()
    for operator, left, right in _relations(tree):
        if operator == "relation_eq":
            for attribute, literal in ((left, right), (right, left)):
                value = _string(literal)
                if _path(attribute) == _PROFILE_PATH and value is not None:
                    found.add(value)
        elif _path(left) == _PROFILE_PATH:
            found.update(_list_strings(right) or ())
    return frozenset(found)


# --- claims and classes -----------------------------------------------------------------------


class ClaimedRequest(Struct, frozen=True):
    """One device request of a claim (a `firstAvailable` alternative is one of its own)."""

    name: str
    """The request's name (`request/alternative` for a `firstAvailable` alternative)."""
    group: str
    """The request it belongs to: its own name, or the `firstAvailable` request it is one
    alternative of (a claim gets one alternative of each)."""
    device_class: str
    """The DeviceClass it asks from."""
    profiles: frozenset[str]
    """MIG profiles its selectors name, as written."""
    count: int | None
    """Devices it takes; None for `allocationMode: All` (every matching device)."""

    @property
    def mig(self) -> bool:
        """A MIG slice: from the driver's MIG class, or by a selector naming a profile."""
        return self.device_class == MIG_DEVICE_CLASS or bool(self.profiles)

    @property
    def whole_gpu(self) -> bool:
        return self.device_class == GPU_DEVICE_CLASS and not self.profiles

    def describe(self) -> str:
        amount = "every matching device" if self.count is None else f"{self.count}"
        named = ", ".join(sorted(self.profiles)) or "any profile"
        return f'request "{self.name}" ({self.device_class}, {named}, {amount})'


def _selector_profiles(selectors: object) -> frozenset[str]:
    """MIG profiles a list of device selectors (`[{cel: {expression}}]`) names."""
    found: set[str] = set()
    for selector in _sequence(selectors):
        expression = _dig(selector, ("cel", "expression"))
        if isinstance(expression, str):
            found.update(selected_profiles(expression) or ())
    return frozenset(found)


def _request(name: str, group: str, body: Mapping[str, Any]) -> ClaimedRequest:
    count = body.get("count", 1)
    return ClaimedRequest(
        name=name,
        group=group,
        device_class=str(body.get("deviceClassName") or ""),
        profiles=_selector_profiles(body.get("selectors")),
        count=None if body.get("allocationMode") == ALL else _whole(count),
    )


def _whole(value: object) -> int:
    """A request's `count` (1 when absent or not a number: the API's default)."""
    if isinstance(value, bool):
        return 1
    if isinstance(value, int | float):
        return int(value)
    return 1


def claim_requests(kind: str, props: Mapping[str, Any]) -> list[ClaimedRequest]:
    """The device requests of a ResourceClaim or ResourceClaimTemplate (`resource.k8s.io/v1`:
    `exactly` or `firstAvailable`; v1beta1 kept the fields on the request itself)."""
    path = _REQUESTS.get(kind)
    if path is None:
        return []
    found = []
    for item in _sequence(_dig(props, path)):
        request = _mapping(item)
        name = str(request.get("name") or "")
        if "firstAvailable" in request:
            for alternative in _sequence(request.get("firstAvailable")):
                sub = _mapping(alternative)
                found.append(_request(f"{name}/{sub.get('name') or ''}", name, sub))
        else:
            found.append(_request(name, name, _mapping(request.get("exactly")) or request))
    return found


def class_profiles(props: Mapping[str, Any]) -> frozenset[str]:
    """MIG profiles a DeviceClass's selectors name."""
    return _selector_profiles(_dig(props, ("spec", "selectors")))


# --- pods and the claims they hold ------------------------------------------------------------


class ClaimSource(Struct, frozen=True):
    """A ResourceClaim or ResourceClaimTemplate of the stack."""

    kind: str
    name: str
    namespace: str | None
    requests: tuple[ClaimedRequest, ...]


def claim_source(resource_type: str, props: Mapping[str, Any]) -> ClaimSource | None:
    """The ResourceClaim or ResourceClaimTemplate a resource is; None for other resources."""
    kind = resource_kind(resource_type)
    if kind not in _REQUESTS:
        return None
    metadata = _mapping(props.get("metadata"))
    name, namespace = metadata.get("name"), metadata.get("namespace")
    if not isinstance(name, str):
        return None
    return ClaimSource(
        kind,
        name,
        namespace if isinstance(namespace, str) else None,
        tuple(claim_requests(kind, props)),
    )


class ClaimIndex:
    """The stack's claims and claim templates, by kind and name."""

    def __init__(self, sources: Iterable[ClaimSource]) -> None:
        self._sources: dict[tuple[str, str], list[ClaimSource]] = {}
        for source in sources:
            self._sources.setdefault((source.kind, source.name), []).append(source)

    def find(self, kind: str, name: str, namespace: str | None) -> ClaimSource | None:
        """The claim (template) called `name` in `namespace`; when either side has no namespace,
        the only one of that name."""
        candidates = self._sources.get((kind, name), [])
        same = [s for s in candidates if s.namespace == namespace]
        if same:
            return same[0]
        if len(candidates) == 1 and (namespace is None or candidates[0].namespace is None):
            return candidates[0]
        return None


class HeldClaim(Struct, frozen=True):
    """Requests of one of the pod's claims that a container holds."""

    claim: str
    """The pod-level claim name."""
    source: ClaimSource
    requests: tuple[ClaimedRequest, ...]

    def describe(self) -> str:
        return f'claim "{self.claim}" ({self.source.kind} {self.source.name})'


def held_claims(
    pod: Mapping[str, Any],
    container: Mapping[str, Any],
    index: ClaimIndex,
    namespace: str | None,
) -> list[HeldClaim]:
    """The claims of the stack a container holds (`resources.claims`, by the pod's
    `resourceClaims`), each with the requests it gets: all of them, or the one it names."""
    pod_claims = {
        str(entry.get("name")): entry
        for entry in (_mapping(item) for item in _sequence(pod.get("resourceClaims")))
    }
    held = []
    for item in _sequence(_mapping(container.get("resources")).get("claims")):
        reference = _mapping(item)
        entry = pod_claims.get(str(reference.get("name")))
        if entry is None:
            continue
        template, claim = entry.get("resourceClaimTemplateName"), entry.get("resourceClaimName")
        if isinstance(template, str):
            source = index.find(CLAIM_TEMPLATE, template, namespace)
        elif isinstance(claim, str):
            source = index.find(CLAIM, claim, namespace)
        else:
            source = None
        if source is None:
            continue
        wanted = reference.get("request")
        requests = tuple(
            r for r in source.requests if not wanted or r.name == wanted or r.group == wanted
        )
        held.append(HeldClaim(str(reference.get("name")), source, requests))
    return held
