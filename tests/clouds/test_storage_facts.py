"""The model cache's storage facts (mig_inference/clouds/storage.py): every storage each cloud
offers has its facts with their sources, and `plan` (text and `--json`, run as users run it)
prints every unconfirmed one as unconfirmed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from mig_inference.clouds import Cloud
from mig_inference.clouds import storage as storage_table
from mig_inference.clouds.prices import shipped_storage_prices
from mig_inference.clouds.storage import storage_facts
from mig_inference.errors import MigErrors
from mig_inference.plan.model_cache import FSX_PER_UNIT, fsx_lustre_size
from mig_inference.reports.stack import plan_text
from mig_inference.spec.files import stack_path
from mig_inference.spec.model_cache import STORAGE_BY_CLOUD
from tests.plan.test_model_cache import _with_cache

STACK_OF = {Cloud.GKE: "gke-h100", Cloud.EKS: "eks-p4d", Cloud.OKE: "oke-h100",
            Cloud.EXISTING: "existing"}  # fmt: skip
KEYS_OF: dict[str, dict[str, Any]] = {"fsx-lustre": {"securityGroupIds": ["sg-0a1b2c3d"]},
           "storage-class": {"storageClass": "nfs-rwx"}}  # fmt: skip
COMBINATIONS = [(cloud, storage.value) for cloud, offered in STORAGE_BY_CLOUD.items()
                for storage in offered]  # fmt: skip


def _cache(storage: str) -> dict[str, Any]:
    return {"storage": storage, **KEYS_OF.get(storage, {})}


def test_every_cloud_offers_a_storage_and_each_has_facts() -> None:
    assert {cloud for cloud, _ in COMBINATIONS} == set(Cloud)
    for cloud, storage in COMBINATIONS:
        facts = storage_facts(cloud, storage)
        kinds = [f.fact for f in facts]
        assert kinds[0] == "offered", (cloud, storage)
        assert {"read rate", "throughput"} & set(kinds), (cloud, storage)
        assert ("price" in kinds) == (storage in shipped_storage_prices()), (cloud, storage)
        for fact in facts:
            assert fact.value
            assert fact.source or (storage, fact.fact) == ("storage-class", "offered")
    assert storage_facts(Cloud.EKS, "hyperdisk-ml") == ()


@pytest.mark.parametrize(("cloud", "storage"), COMBINATIONS)
def test_plan_prints_every_unconfirmed_fact_as_unconfirmed(
    cloud: Cloud, storage: str, tmp_path: Path
) -> None:
    document = yaml.safe_load(Path(stack_path(STACK_OF[cloud])).read_text())
    document["config"]["mig-inference:modelCache"] = _cache(storage)
    path = tmp_path / "Pulumi.facts.yaml"
    path.write_text(yaml.safe_dump(document))
    text, answer = (
        subprocess.run(
            [sys.executable, "-m", "mig", "plan", "--stack-file", str(path), *json_flag],
            capture_output=True, text=True, check=True, timeout=300,
        ).stdout
        for json_flag in ([], ["--json"])
    )  # fmt: skip
    facts = storage_facts(cloud, storage)
    assert any(not f.confirmed for f in facts)  # every storage has an assumption behind it
    for fact in facts:
        [line] = [line for line in text.splitlines() if line.startswith(f"  {fact.fact}: ")]
        assert line.endswith("(unconfirmed)") == (not fact.confirmed), line
    printed = json.loads(answer)["model_cache"]["facts"]
    assert [(f["fact"], f["unconfirmed"]) for f in printed] == [
        (f.fact, not f.confirmed) for f in facts
    ]


def test_flipping_a_facts_mark_changes_what_plan_prints(monkeypatch: pytest.MonkeyPatch) -> None:
    """The mark comes from the rows: a confirmed read rate prints as settled, an unconfirmed one
    as unconfirmed."""
    plan = _with_cache("gke-h100", {"storage": "hyperdisk-ml"})
    rate = "  read rate: 2,400 MiB/s per node"
    assert f"{rate} (unconfirmed)" in plan_text(plan).splitlines()
    data = storage_table.load_bandwidth()
    flipped = {**data, "hyperdisk-ml": {**data["hyperdisk-ml"], "per_node_unconfirmed": False}}
    monkeypatch.setattr(storage_table, "load_bandwidth", lambda: flipped)
    assert rate in plan_text(plan).splitlines()


def test_fsx_for_lustre_figures_are_kept_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """The per-unit throughputs `plan` prints are the ones a stack may give (one list, in the
    data file), and the sizes it prints are the ones the cache is sized in (1,200 or 2,400 GiB,
    then steps of 2,400: never 3,600)."""
    assert FSX_PER_UNIT in storage_table.fsx_per_unit_throughputs()  # the default is one of them
    data = storage_table.load_bandwidth()
    fewer = {**data, "fsx-lustre": {**data["fsx-lustre"], "per_unit_mb_per_s_per_tib": [125, 500]}}
    monkeypatch.setattr(storage_table, "load_bandwidth", lambda: fewer)
    facts = {f.fact: f for f in storage_facts(Cloud.EKS, "fsx-lustre")}
    assert facts["throughput"].value == "125, 500 MB/s per TiB of the file system's size"
    fsx = {"storage": "fsx-lustre", "securityGroupIds": ["sg-0a1b2c3d"]}
    with pytest.raises(MigErrors) as refused:
        _with_cache("eks-p4d", {**fsx, "throughputMiBps": 250})
    assert [str(e) for e in refused.value.errors] == [
        "mig-inference:modelCache.throughputMiBps: FSx for Lustre takes a per-unit throughput "
        "(MB/s per TiB) of 125, 500; got 250"
    ]
    assert facts["size"].value == "1,200 or 2,400 GiB, then steps of 2,400 GiB (PERSISTENT_2)"
    assert facts["size"].confirmed
    assert [fsx_lustre_size(n) for n in (1200, 2400, 2401, 4801)] == [1200, 2400, 4800, 7200]
