"""Property tests: stack files generated from the schema (the shipped stacks, with keys of the
schema added, replaced, removed or given trap values, written as YAML that Pulumi may read
otherwise than it looks), and for each one: `plan` exits 0 or 1, never with a traceback; every
error names a key the file has (or the missing key of a mapping it has); and an accepted file
renders Kubernetes objects that the Kubernetes schema accepts (a bounded sample: rendering runs
the whole program)."""

from __future__ import annotations

import copy
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from mig_inference.cli import main
from mig_inference.clouds import Cloud
from mig_inference.clouds.kubernetes_versions import offered_minors
from mig_inference.errors import MigError
from mig_inference.render import run_program
from mig_inference.spec.cluster import ACCESS_KEYS, CLUSTER_KEYS
from mig_inference.spec.files import load_stack_file, stack_names, stack_path
from mig_inference.spec.namespaces import CLOUD_NAMESPACES, EVERY_CLUSTER
from mig_inference.spec.pools import POOL_KEYS
from mig_inference.spec.services import SERVICE_KEYS
from mig_inference.spec.stack import TOP_KEYS
from mig_inference.stackfile.pulumi_config import project_values, read_stack_config
from mig_inference.stackfile.yamlfile import MAX_DEPTH, parse_text
from tests.render.test_stacks import CUSTOM_RESOURCE_GROUPS, schema_version
from tests.stack_mutations import key_paths


def _shipped(name: str) -> tuple[dict[str, Any], frozenset[str]]:
    engine = read_stack_config(stack_path(name))
    return project_values(engine.values, engine.secret_keys.__contains__)


STACKS = {name: _shipped(name) for name in stack_names()}
SEEN: dict[str, list[Any]] = {}
"""Every value the shipped stacks give each key name: plausible replacements."""
SCHEMA_KEYS = {
    "pools": POOL_KEYS,
    "services": SERVICE_KEYS,
    "cluster": tuple(
        sorted({k for keys in CLUSTER_KEYS.values() for k in keys} | set(ACCESS_KEYS))
    ),
}
TRAPS = ["yes", "no", "on", "off", "1e3", "0o17", "017", "0x1F", "~", "null", "2024-01-02",
         ".inf", ".nan", "1_000", "08", "1.0e-309", "100000000000000000000", "🚀",
         "../../etc/passwd", "GPU_Node_01", "kube prometheus stack", "-tp", "2g.20g", ""]  # fmt: skip
scalars = st.one_of(
    st.sampled_from(TRAPS),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.booleans(),
    st.none(),
    st.text(max_size=12),
)
values = st.one_of(
    scalars,
    scalars,
    scalars,
    st.lists(scalars, max_size=3),
    st.dictionaries(st.text(max_size=8), scalars, max_size=3),
)


class _PlainDumper(yaml.SafeDumper):
    """Writes every string it can unquoted: Pulumi's reader then decides what it is."""


_PlainDumper.yaml_implicit_resolvers = {}


def _collect(value: Any) -> None:
    if isinstance(value, dict):
        for key, item in value.items():
            SEEN.setdefault(key, [])
            if item not in SEEN[key]:
                SEEN[key].append(item)
            _collect(item)
    elif isinstance(value, list):
        for item in value:
            _collect(item)


for _values, _secrets in STACKS.values():
    _collect(_values)


def _schema_mutation(draw: st.DrawFn, stack: dict[str, Any]) -> None:
    """A key of the schema, in one section of the stack, set to a plausible or a trap value, or
    removed."""
    section = draw(st.sampled_from(sorted(SCHEMA_KEYS)))
    target = stack.setdefault(section, [{}] if section in ("pools", "services") else {})
    if isinstance(target, list):
        if not target or not all(isinstance(item, dict) for item in target):
            return
        target = target[draw(st.integers(0, len(target) - 1))]
    if not isinstance(target, dict):
        return
    key = draw(st.sampled_from(SCHEMA_KEYS[section]))
    choice = draw(st.sampled_from(["seen", "value", "remove"]))
    if choice == "remove":
        target.pop(key, None)
    elif choice == "seen" and SEEN.get(key):
        target[key] = copy.deepcopy(draw(st.sampled_from(SEEN[key])))
    else:
        target[key] = draw(values)


@st.composite
def stack_files(draw: st.DrawFn) -> tuple[dict[str, Any], frozenset[str]]:
    """A shipped stack's values (and its secret keys), mutated a few times."""
    values_of, secrets = STACKS[draw(st.sampled_from(sorted(STACKS)))]
    stack = copy.deepcopy(values_of)
    for _ in range(draw(st.integers(1, 3))):
        if draw(st.booleans()):
            _schema_mutation(draw, stack)
            continue
        paths = key_paths(stack)
        path: tuple[Any, ...] = draw(st.sampled_from(paths))
        parent: Any = stack
        for part in path[:-1]:
            parent = parent[part]
        action = draw(st.sampled_from(["swap", "swap", "replace", "remove", "add", "duplicate"]))
        if action == "swap" and isinstance(path[-1], str) and SEEN.get(path[-1]):
            parent[path[-1]] = copy.deepcopy(draw(st.sampled_from(SEEN[path[-1]])))
        elif action == "replace":
            parent[path[-1]] = draw(values)
        elif action == "remove" and isinstance(parent, dict):
            del parent[path[-1]]
        elif action == "duplicate" and isinstance(parent, list):
            parent.append(copy.deepcopy(parent[path[-1]]))
        elif action == "add" and isinstance(parent, dict):
            section = next((p for p in path if isinstance(p, str) and p in SCHEMA_KEYS), None)
            keys = SCHEMA_KEYS.get(section or "", TOP_KEYS)
            parent[draw(st.sampled_from(keys))] = draw(values)
    return stack, secrets


def write(tmp: Path, generated: tuple[dict[str, Any], frozenset[str]], plain: bool) -> Path:
    stack, secrets = generated
    path = tmp / "Pulumi.prop.yaml"
    body = {"config": {f"mig-inference:{k}": v for k, v in stack.items()}}
    body["config"].update({f"mig-inference:{k}": {"secure": "v1:test"} for k in secrets})
    dumper = _PlainDumper if plain else yaml.SafeDumper
    path.write_text(yaml.dump(body, Dumper=dumper, allow_unicode=True), encoding="utf-8")
    return path


def _resolves(values: Any, rest: str) -> bool:
    """Whether a key path (after `mig-inference:`) names a value of `values`, or a key missing
    from a mapping it names."""
    if not rest:
        return True
    if rest.startswith("["):
        found = re.match(r"\[(\d+)\]", rest)
        return (
            found is not None
            and isinstance(values, list)
            and int(found.group(1)) < len(values)
            and _resolves(values[int(found.group(1))], rest[found.end() :])
        )
    rest = rest.removeprefix(".")
    if not isinstance(values, dict):
        return False
    # Keys may hold dots (labels): try every key the path starts with, then a missing one.
    for key in sorted(values, key=len, reverse=True):
        starts = rest == key or rest.startswith((f"{key}.", f"{key}["))
        if starts and _resolves(values[key], rest[len(key) :]):
            return True
    return re.fullmatch(r"[A-Za-z0-9_]+", rest) is not None


def check_plan(path: Path, capsys: pytest.CaptureFixture[str]) -> int:
    code = main(["plan", "--stack-file", str(path), "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code in (0, 1)
    if code == 1:
        assert out["errors"]
        try:
            engine = read_stack_config(path)
            file_values = project_values(engine.values, engine.secret_keys.__contains__)[0]
        except MigError:  # refused while reading: its errors name the file or a value of it
            try:
                raw = parse_text(path.read_text(), str(path), go_times=True).value or {}
            except MigError:
                raw = {}  # not YAML Pulumi reads: every error names the file
            file_values = {k.partition(":")[2]: v for k, v in (raw.get("config") or {}).items()}
        for error in out["errors"]:
            key = error["key"]
            assert key, error
            if key.startswith(str(path)):
                continue
            assert key.startswith("mig-inference:"), error
            assert _resolves(file_values, key.removeprefix("mig-inference:")), (error, file_values)
    return code


FAST = settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@FAST
@given(stack=stack_files(), plain=st.booleans())
def test_plan_never_crashes_and_names_keys_the_file_has(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    stack: tuple[dict[str, Any], frozenset[str]],
    plain: bool,
) -> None:
    check_plan(write(tmp_path, stack, plain), capsys)


@settings(
    max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(stack=stack_files(), plain=st.booleans())
def test_accepted_files_render_objects_kubernetes_accepts(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    stack: tuple[dict[str, Any], frozenset[str]],
    plain: bool,
) -> None:
    path = write(tmp_path, stack, plain)
    # Only accepted files count: Hypothesis fails the test if it finds too few of them.
    assume(check_plan(path, capsys) == 0)
    rendering = run_program("prop", path)
    assert rendering.error is None, rendering.error
    version = schema_version(load_stack_file(path, "prop"))
    for obj in rendering.kubernetes_objects():
        if obj["apiVersion"].split("/")[0] in CUSTOM_RESOURCE_GROUPS:
            continue
        kubernetes_validate.validate(obj, version, strict=True)


@settings(
    max_examples=4, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(stack=stack_files(), plain=st.booleans())
def test_the_installed_command_exits_0_or_1_without_a_traceback(
    tmp_path: Path, stack: tuple[dict[str, Any], frozenset[str]], plain: bool
) -> None:
    path = write(tmp_path, stack, plain)
    done = subprocess.run(
        [sys.executable, "-m", "mig_inference", "plan", "--stack-file", str(path)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode in (0, 1) and "Traceback" not in done.stderr, done.stderr


# Deep and wide values: nested past the reader's bound (and far past Python's recursion
# limit), or wide (long lists and mappings, long strings), anywhere in a shipped stack. The
# deep part is written as flow YAML text (PyYAML's dumper recurses as deep as the value).
DEEP_MARK = "__deep_value__"


@st.composite
def deep_or_wide(draw: st.DrawFn) -> tuple[Any, str]:
    """A value and its flow YAML text."""
    leaf = draw(st.sampled_from(["1", "x", "[]", "{}", "null"]))
    kind = draw(st.sampled_from(["deep", "wide-list", "wide-map", "long-string"]))
    if kind == "deep":
        depth = draw(st.one_of(st.integers(MAX_DEPTH - 5, MAX_DEPTH + 5), st.integers(1, 3000)))
        shape = draw(st.sampled_from(["lists", "mappings", "alternating"]))
        value: Any = yaml.safe_load(leaf)
        kinds = [shape == "lists" or (shape == "alternating" and level % 2 == 0)
                 for level in range(depth)]  # fmt: skip
        for as_list in kinds:  # from the leaf outwards
            value = [value] if as_list else {"k": value}
        opening = "".join("[" if as_list else "{k: " for as_list in reversed(kinds))
        closing = "".join("]" if as_list else "}" for as_list in kinds)
        return value, opening + leaf + closing
    size = draw(st.integers(0, 5_000))
    if kind == "wide-list":
        return [yaml.safe_load(leaf)] * size, "[" + ", ".join([leaf] * size) + "]"
    if kind == "wide-map":
        items = {f"k{i}": yaml.safe_load(leaf) for i in range(size)}
        return items, "{" + ", ".join(f"k{i}: {leaf}" for i in range(size)) + "}"
    return "x" * size * 20, "x" * size * 20


@st.composite
def stacks_with_deep_or_wide_values(draw: st.DrawFn) -> tuple[dict[str, Any], str]:
    """A shipped stack with one value replaced by a deep or wide one, and its stack file text."""
    values_of, secrets = STACKS[draw(st.sampled_from(sorted(STACKS)))]
    stack = copy.deepcopy(values_of)
    path = draw(st.sampled_from(key_paths(stack)))
    parent: Any = stack
    for part in path[:-1]:
        parent = parent[part]
    value, text = draw(deep_or_wide())
    parent[path[-1]] = DEEP_MARK
    body = {"config": {f"mig-inference:{k}": v for k, v in stack.items()}}
    body["config"].update({f"mig-inference:{k}": {"secure": "v1:test"} for k in secrets})
    written = yaml.safe_dump(body, width=10**9).replace(DEEP_MARK, text)
    parent[path[-1]] = value
    return stack, written


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                            HealthCheck.too_slow,
                                                            HealthCheck.data_too_large]
)  # fmt: skip
@given(generated=stacks_with_deep_or_wide_values())
def test_deep_and_wide_values_are_refused_at_keys_the_file_has(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    generated: tuple[dict[str, Any], str],
) -> None:
    stack, text = generated
    path = tmp_path / "Pulumi.prop.yaml"
    path.write_text(text, encoding="utf-8")
    code = main(["plan", "--stack-file", str(path), "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code in (0, 1)
    for error in out.get("errors", []):
        key = error["key"]
        assert key.startswith("mig-inference:"), error
        assert _resolves(stack, key.removeprefix("mig-inference:")), error
        assert len(error["message"]) < 2_000, error["message"][:200]


# Namespaces created twice or existing already, and versions outside each cloud's offer: every
# one generated is refused at a key it names (mig_inference.spec.namespaces, clouds.
# kubernetes_versions). Generated from the shipped stacks' own sections: services, the GPU
# Operator (operator-managed pools), the DRA driver, the gateway.
_LABEL = st.from_regex(r"[a-z][a-z0-9-]{0,20}[a-z0-9]", fullmatch=True).filter(
    lambda name: not name.startswith("kube-") and name not in ("null", "true", "false")
)
"""A namespace of the user's own (written plain, yaml.v3 would read null, true, false as
something else)."""


def _namespace_sites(stack: dict[str, Any]) -> list[tuple[str, Any]]:
    """Where the stack may name a namespace it creates: (key path, how to set it)."""
    sites: list[tuple[str, Any]] = []
    for index, _service in enumerate(stack.get("services") or []):
        sites.append((f"services[{index}].namespace",
                      lambda v, n, i=index: v["services"][i].update(namespace=n)))  # fmt: skip
    if any(p.get("migManager", "operator") == "operator" for p in stack.get("pools") or []):
        sites.append(("gpuOperator.namespace",
                      lambda v, n: v.setdefault("gpuOperator", {}).update(namespace=n)))  # fmt: skip
    if stack.get("dra") is not None:
        sites.append(("dra.namespace", lambda v, n: v["dra"].update(namespace=n)))
    if stack.get("gateway") is not None:
        sites.append(("gateway.namespace", lambda v, n: v["gateway"].update(namespace=n)))
    return sites


@st.composite
def colliding_namespaces(draw: st.DrawFn) -> tuple[dict[str, Any], frozenset[str], set[str]]:
    """A shipped stack where two parts that create their namespace name the same one (a
    service sharing another service's is allowed, so one of the two is never a service then),
    or one names a namespace the cluster has already; and the keys the refusal may name."""
    name = draw(st.sampled_from(sorted(STACKS)))
    values_of, secrets = STACKS[name]
    stack = copy.deepcopy(values_of)
    sites = _namespace_sites(stack)
    assume(sites)
    if draw(st.booleans()) or len(sites) < 2:
        key, setter = draw(st.sampled_from(sites))
        existing = [*EVERY_CLUSTER, *CLOUD_NAMESPACES.get(Cloud(stack["cloud"]), ())]
        namespace = draw(st.one_of(st.sampled_from(existing), _LABEL.map(lambda n: f"kube-{n}")))
        setter(stack, namespace)
        return stack, secrets, {key}
    first = draw(st.sampled_from(sites))
    others = [s for s in sites if s[0] != first[0] and not (
        s[0].startswith("services") and first[0].startswith("services"))]  # fmt: skip
    assume(others)
    second = draw(st.sampled_from(others))
    namespace = draw(_LABEL)
    assume(namespace != stack.get("monitoring", {}).get("prometheusNamespace", "monitoring"))
    for _key, setter in (first, second):
        setter(stack, namespace)
    return stack, secrets, {first[0], second[0]}


@settings(max_examples=200, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.filter_too_much])  # fmt: skip
@given(generated=colliding_namespaces())
def test_every_colliding_or_existing_namespace_is_refused(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    generated: tuple[dict[str, Any], frozenset[str], set[str]],
) -> None:
    # Written as PyYAML quotes it: a plain version (1.35) would be refused as a number first.
    stack, secrets, keys = generated
    path = write(tmp_path, (stack, secrets), plain=False)
    assert check_plan(path, capsys) == 1
    main(["plan", "--stack-file", str(path), "--json"])
    named = {e["key"].removeprefix("mig-inference:") for e in json.loads(
        capsys.readouterr().out)["errors"]}  # fmt: skip
    assert named & keys, (keys, named)


@st.composite
def unoffered_versions(draw: st.DrawFn) -> tuple[dict[str, Any], frozenset[str], str]:
    """A shipped OKE stack, or a shipped EKS stack made to create its cluster, with a version
    its cloud did not offer as of the version table's date (a minor outside, or on OKE a patch
    it does not list); and the key that gives it."""
    clouds = {"oke": Cloud.OKE, "eks": Cloud.EKS}
    name = draw(st.sampled_from(sorted(n for n, (v, _s) in STACKS.items()
                                       if v["cloud"] in clouds)))  # fmt: skip
    values_of, secrets = STACKS[name]
    stack = copy.deepcopy(values_of)
    cloud = clouds[stack["cloud"]]
    rows = {row.minor: row for row in offered_minors(cloud)}
    minor = draw(st.integers(0, 99))
    patch = draw(st.integers(0, 999))
    if minor in rows:
        assume(cloud is Cloud.OKE and rows[minor].patches)
        assume(f"v1.{minor}.{patch}" not in rows[minor].patches)
    if cloud is Cloud.OKE:
        stack["cluster"]["kubernetesVersion"] = f"v1.{minor}.{patch}"
        return stack, secrets, "cluster.kubernetesVersion"
    stack["cluster"].update(create=True, vpcId="vpc-0a1b2c3d", version=f"1.{minor}",
                            publicAccessCidrs=["198.51.100.0/24"])  # fmt: skip
    return stack, secrets, "cluster.version"


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.filter_too_much])  # fmt: skip
@given(generated=unoffered_versions())
def test_every_version_outside_its_clouds_offer_is_refused(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    generated: tuple[dict[str, Any], frozenset[str], str],
) -> None:
    stack, secrets, key = generated
    path = write(tmp_path, (stack, secrets), plain=False)
    assert main(["plan", "--stack-file", str(path), "--json"]) == 1
    errors = {e["key"]: e for e in json.loads(capsys.readouterr().out)["errors"]}
    assert f"mig-inference:{key}" in errors, errors
    assert errors[f"mig-inference:{key}"]["allowed"], errors  # what the cloud offers instead
