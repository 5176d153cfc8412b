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
from mig_inference.reports.stack import plan_text
from mig_inference.spec.files import stack_path
from mig_inference.spec.model_cache import STORAGE_BY_CLOUD
from tests.test_model_cache import _with_cache

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
    document = yaml.safe_load(stack_path(STACK_OF[cloud]).read_text())
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
