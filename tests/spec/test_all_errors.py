"""One run names every independent error of a stack file, and no error that only follows from
another: the file's own errors and the plan's (of what reads cleanly) together, each at the key
the file has."""

from __future__ import annotations

import copy
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mig_inference.errors import MigError
from mig_inference.plan import plan_of
from mig_inference.spec import parse_stack
from mig_inference.versions import GPU_OPERATOR_VERSION
from tests.reference import ROOT
from tests.stack_mutations import key_paths, shipped

OKE: dict[str, Any] = {
    "cloud": "oke",
    "cluster": {"name": "c", "create": True, "compartmentId": "ocid1.compartment.oc1..aaaa",
                "subnetIds": ["ocid1.subnet.oc1.iad.aaaa"],
                "availabilityDomains": ["Uocm:US-ASHBURN-AD-1"]},
    "pools": [{"name": "h100", "gpu": "H100-80GB", "machineType": "BM.GPU.H100.8", "nodes": 1,
               "mig": "all-1g.10gb", "maxPods": 90, "imageId": "ocid1.image.oc1.iad.aaaa"}],
    "services": [{"name": "chat", "model": "m/m", "memoryGiB": 8, "replicas": 8}],
}  # fmt: skip
GKE: dict[str, Any] = {
    "cloud": "gke",
    "cluster": {"name": "c", "project": "my-gcp-project", "location": "us-central1-a"},
    "pools": [{"name": "h100", "gpu": "H100-80GB", "machineType": "a3-highgpu-8g", "nodes": 1,
               "mig": "all-3g.40gb", "maxPods": 64}],
    "services": [{"name": "chat", "model": "m/m", "memoryGiB": 30, "replicas": 4}],
}  # fmt: skip


def error_keys(values: dict[str, Any], secrets: frozenset[str] = frozenset()) -> dict[str, str]:
    """Key path -> message of every error of a stack's values ({} when it plans)."""
    try:
        plan_of(lambda: parse_stack("t", values, secret_keys=secrets,
                                    pinned_operator_version=GPU_OPERATOR_VERSION))  # fmt: skip
    except MigError as raised:
        return {str(e.path).removeprefix("mig-inference:"): e.message for e in raised.errors}
    return {}


def with_changes(base: dict[str, Any], **changes: Any) -> dict[str, Any]:
    """`base` with values at dotted paths (`pools.0.maxPods`) set, or removed when None."""
    values = copy.deepcopy(base)
    for dotted, value in changes.items():
        *parents, last = [int(p) if p.isdigit() else p for p in dotted.split("__")]
        target: Any = values
        for part in parents:
            target = target[part]
        if value is None:
            del target[last]
        else:
            target[last] = value
    return values


def test_the_required_cluster_keys_arrive_in_one_run() -> None:
    errors = error_keys(OKE)
    missing = {"cluster.vcnId", "cluster.endpointSubnetId", "cluster.podSubnetIds",
               "cluster.kubernetesVersion", "cluster.systemImageId"}  # fmt: skip
    assert set(errors) == missing, errors
    assert all("is required for cloud oke when create is true" in errors[k] for k in missing)


def test_a_too_low_max_pods_does_not_hide_a_model_that_does_not_fit() -> None:
    errors = error_keys(with_changes(GKE, pools__0__maxPods=8, services__0__memoryGiB=60))
    assert set(errors) == {"pools[0].maxPods", "services[0].memoryGiB"}, errors
    assert "is below the" in errors["pools[0].maxPods"]
    assert "no slice the pools offer holds it" in errors["services[0].memoryGiB"]


TWO_POOLS = with_changes(
    GKE,
    pools=[GKE["pools"][0], {**GKE["pools"][0], "name": "sized", "mig": "auto"}],
    services=[{**GKE["services"][0], "pool": "h100"},
              {**GKE["services"][0], "name": "c2", "pool": "sized"}],
)  # fmt: skip


@pytest.mark.parametrize(
    "change",
    [{"pools__0__gpu": "H900"}, {"pools__0__mig": "all-5g.40gb"}, {"pools__0__machineType": 5}],
    ids=["refused-by-the-file", "refused-by-the-plan", "wrong-type"],
)
def test_a_refused_pool_brings_no_error_for_the_services_on_it(change: dict[str, Any]) -> None:
    key = next(iter(change)).replace("__0__", "[0].")
    errors = error_keys(with_changes(TWO_POOLS, **change))
    assert list(errors) == [key], errors
    # The other pool and its service are still planned: their own errors still come out.
    errors = error_keys(with_changes(TWO_POOLS, services__1__memoryGiB=200, **change))
    assert set(errors) == {key, "services[1].memoryGiB"}, errors
    # A service that names no pool might have gone to the refused one: not planned either.
    errors = error_keys(with_changes(TWO_POOLS, services__0__pool=None, **change))
    assert list(errors) == [key], errors


def test_a_refused_service_leaves_out_the_auto_pool_it_may_size() -> None:
    errors = error_keys(with_changes(TWO_POOLS, services__1__replicas="many"))
    assert list(errors) == ["services[1].replicas"], errors


def test_errors_of_the_file_and_of_the_plan_name_the_files_positions() -> None:
    second = {**GKE["pools"][0], "name": "second", "maxPods": 8}
    values = with_changes(GKE, pools=[{**GKE["pools"][0], "maxPods": "many"}, second],
                          services=[{**GKE["services"][0], "pool": "second"},
                                    {**GKE["services"][0], "name": "c2", "replicas": "x"},
                                    {**GKE["services"][0], "name": "c3", "pool": "second",
                                     "profile": "7g.80gb"}])  # fmt: skip
    errors = error_keys(values)
    assert set(errors) == {"pools[0].maxPods", "services[1].replicas", "pools[1].maxPods",
                           "services[2].profile"}, errors  # fmt: skip
    assert "must be a whole number" in errors["pools[0].maxPods"]
    assert "is below the" in errors["pools[1].maxPods"]


def test_a_refused_cluster_value_is_not_blamed_again_where_the_plan_reads_it() -> None:
    errors = error_keys(with_changes(GKE, cluster__location="us central1"))
    assert list(errors) == ["cluster.location"], errors


def test_the_command_prints_them_all(tmp_path: Path) -> None:
    path = tmp_path / "Pulumi.oke.yaml"
    body = with_changes(OKE, pools__0__maxPods=8)
    path.write_text(yaml.safe_dump({"config": {f"mig-inference:{k}": v for k, v in body.items()}}))
    done = subprocess.run(
        [sys.executable, "-m", "mig", "plan", "--stack-file", str(path), "--json"],
        capture_output=True, text=True, cwd=ROOT, check=False,
    )  # fmt: skip
    assert done.returncode == 1 and "Traceback" not in done.stderr
    keys = {e["key"] for e in json.loads(done.stdout)["errors"]}
    assert "mig-inference:pools[0].maxPods" in keys and "mig-inference:cluster.vcnId" in keys


# Two errors put in one file give no error that neither gives alone: an error of the pair that
# is not one of the errors of each alone would be a consequence blamed on another key.
STACKS = {name: shipped(name) for name in ("eks-p5-auto", "oke-h100", "eks-p4de-demand",
                                           "existing")}  # fmt: skip
STACKS["two-pools"] = (TWO_POOLS, frozenset())
BAD: list[Any] = [None, [], {}, "x", -1, True, "🚀", 10**6]


def _mutated(values: dict[str, Any], path: tuple[Any, ...], bad: Any) -> dict[str, Any] | None:
    copied = copy.deepcopy(values)
    parent: Any = copied
    for part in path[:-1]:
        parent = parent[part]
    if bad is None and not isinstance(parent, dict):
        return None
    if bad is None:
        del parent[path[-1]]
    else:
        parent[path[-1]] = bad
    return copied


def _error_places(errors: dict[str, str]) -> set[str]:
    """The keys of `errors`, except that a pool's demand-fit error is one place however many
    services it names: it is reported at the first demand-sized service still read, so another
    change that refuses that service moves it to the next one."""
    fit = re.compile(r"what pool (\S+) has left serves")
    return {
        f"demand fit on {found.group(1)}" if (found := fit.search(message)) else key
        for key, message in errors.items()
    }


@st.composite
def two_changes(draw: st.DrawFn) -> tuple[str, Any, Any]:
    name = draw(st.sampled_from(sorted(STACKS)))
    values, _secrets = STACKS[name]
    paths = key_paths(values)
    first, second = draw(st.sampled_from(paths)), draw(st.sampled_from(paths))
    return name, (first, draw(st.sampled_from(BAD))), (second, draw(st.sampled_from(BAD)))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(changes=two_changes())
def test_two_errors_together_bring_no_third(changes: tuple[str, Any, Any]) -> None:
    name, (first, bad_first), (second, bad_second) = changes
    values, secrets = STACKS[name]
    if first[: len(second)] == second or second[: len(first)] == first:
        return  # one inside the other: not two changes
    if first[:-2] == second[:-2] and first[-1] == second[-1] and bad_first == bad_second:
        return  # the same value in the same key of two entries of a list: a duplicate (two
        # services named alike), which the stack refuses only when both are made
    alone_first = _mutated(values, first, bad_first)
    alone_second = _mutated(values, second, bad_second)
    both = _mutated(alone_first, second, bad_second) if alone_first is not None else None
    if alone_second is None or both is None or alone_first is None:
        return
    together = _error_places(error_keys(both, secrets))
    apart = _error_places(error_keys(alone_first, secrets)) | _error_places(
        error_keys(alone_second, secrets)
    )
    assert together <= apart, (first, bad_first, second, bad_second, together - apart)


def test_a_pool_wrong_on_capacity_and_boot_disk_hears_of_both() -> None:
    a4x = {"name": "gb", "gpu": "GB200", "machineType": "a4x-highgpu-4g", "nodes": 1,
           "mig": "all-1g.23gb", "spot": True, "bootDiskType": "pd-balanced"}  # fmt: skip
    errors = error_keys(with_changes(GKE, pools=[a4x], services=None))
    assert set(errors) == {"pools[0].spot", "pools[0].bootDiskType"}, errors
    assert "boots only from hyperdisk-balanced" in errors["pools[0].bootDiskType"]


def test_a_namespace_and_a_version_refused_in_one_run(tmp_path: Path) -> None:
    """Rules between sections run beside each section's own: a file with a cluster version the
    cloud does not offer and a namespace created twice hears of both, from the command too."""
    values = with_changes(OKE, gpuOperator={"namespace": "inference"})
    values["cluster"].update(vcnId="ocid1.vcn.oc1.iad.aaaa",
                             endpointSubnetId="ocid1.subnet.oc1.iad.aaaa",
                             podSubnetIds=["ocid1.subnet.oc1.iad.aaaa"],
                             systemImageId="ocid1.image.oc1.iad.aaaa", kubernetesVersion="v1.20.8")  # fmt: skip
    assert set(error_keys(values)) == {"cluster.kubernetesVersion", "gpuOperator.namespace"}
    path = tmp_path / "Pulumi.oke.yaml"
    path.write_text(
        yaml.safe_dump({"config": {f"mig-inference:{k}": v for k, v in values.items()}})
    )
    done = subprocess.run(
        [sys.executable, "-m", "mig", "plan", "--stack-file", str(path)],
        capture_output=True, text=True, cwd=ROOT, check=False,
    )  # fmt: skip
    assert done.returncode == 1 and done.stdout == "" and "Traceback" not in done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 2 and all(line.startswith("error: mig-inference:") for line in lines)
