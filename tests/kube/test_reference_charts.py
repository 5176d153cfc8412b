"""The Cluster Autoscaler and KEDA releases of every stack that installs them, against the real
charts at the pinned versions (../shared/reference/charts): the version matches, every value is
one the chart reads, `helm template` and `helm lint` pass and the values reach the rendered
objects. And every metric the alerts, dashboard and autoscaling queries read exists in the
exporters' and engines' own metric lists (../shared/reference/metrics)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import kubernetes_validate
import promql_parser
import pytest
import yaml

from mig_inference.kube.monitoring import alert_rules, dashboard, expressions
from mig_inference.plan import plan_stack
from mig_inference.spec.files import load_stack, stack_names
from mig_inference.versions import CLUSTER_AUTOSCALER_VERSION, KEDA_VERSION
from tests.mocked import stack_rendering
from tests.reference import (
    CLUSTER_AUTOSCALER_CHART_DIR,
    KEDA_CHART_DIR,
    METRICS_DIR,
    helm_binary,
    reference_dir,
    reference_file,
)

RELEASE = "kubernetes:helm.sh/v3:Release"
CHARTS = {"cluster-autoscaler": (CLUSTER_AUTOSCALER_CHART_DIR, CLUSTER_AUTOSCALER_VERSION),
          "keda": (KEDA_CHART_DIR, KEDA_VERSION)}  # fmt: skip
FREE_FORM = {("extraArgs",)}
"""Chart values that are maps of the user's own keys (the autoscaler's command-line flags)."""


def _releases() -> list[tuple[str, str, dict[str, Any]]]:
    """(stack, chart, release inputs) of every Cluster Autoscaler and KEDA release."""
    return [
        (stack, r.inputs["chart"], r.inputs)
        for stack in stack_names()
        for r in stack_rendering(stack).of_type(RELEASE)
        if r.inputs["chart"] in CHARTS
    ]


RELEASES = _releases()
IDS = [f"{stack}-{chart}" for stack, chart, _ in RELEASES]


def test_some_stack_installs_each_chart() -> None:
    assert {chart for _, chart, _ in RELEASES} == set(CHARTS)


def _leaf_paths(tree: Any, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    if isinstance(tree, dict) and tree and prefix not in FREE_FORM:
        return [p for key, value in tree.items() for p in _leaf_paths(value, (*prefix, key))]
    return [prefix]


def _template(chart_dir: Path, inputs: dict[str, Any], tmp_path: Path) -> list[dict[str, Any]]:
    values = tmp_path / "values.yaml"
    values.write_text(yaml.safe_dump(inputs.get("values") or {}))
    result = subprocess.run(
        [helm_binary(), "template", inputs["name"], str(chart_dir), "--namespace",
         inputs["namespace"], "--values", str(values)],
        capture_output=True, text=True, check=False, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    lint = subprocess.run(
        [helm_binary(), "lint", str(chart_dir), "--namespace", inputs["namespace"], "--values",
         str(values)],
        capture_output=True, text=True, check=False, timeout=120,
    )  # fmt: skip
    assert lint.returncode == 0, lint.stdout + lint.stderr
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


@pytest.mark.parametrize(("chart", "inputs"), [r[1:] for r in RELEASES], ids=IDS)
def test_release_matches_the_pinned_chart(
    chart: str, inputs: dict[str, Any], tmp_path: Path
) -> None:
    folder, version = CHARTS[chart]
    chart_dir = reference_dir(folder)
    meta = yaml.safe_load((chart_dir / "Chart.yaml").read_text())
    assert (meta["name"], meta["version"]) == (chart, inputs["version"]) == (chart, version)
    defaults = yaml.safe_load((chart_dir / "values.yaml").read_text())
    for path in _leaf_paths(inputs.get("values") or {}):
        node: Any = defaults
        for key in path:
            assert isinstance(node, dict) and key in node, (
                f"{'.'.join(path)} is not a {chart} value"
            )
            node = node[key]
    documents = _template(chart_dir, inputs, tmp_path)
    workloads = [d for d in documents if d["kind"] == "Deployment"]
    assert workloads, f"{chart} rendered no Deployment"
    for document in documents:
        if document["kind"] != "CustomResourceDefinition":
            kubernetes_validate.validate(document, "1.33", strict=True)


def test_autoscaler_values_reach_its_command_line(tmp_path: Path) -> None:
    [(stack, _, inputs)] = [r for r in RELEASES if r[1] == "cluster-autoscaler"]
    documents = _template(reference_dir(CLUSTER_AUTOSCALER_CHART_DIR), inputs, tmp_path)
    [deployment] = [d for d in documents if d["kind"] == "Deployment"]
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    cluster = load_stack(stack).cluster.name
    assert (
        f"--node-group-auto-discovery=asg:tag=k8s.io/cluster-autoscaler/enabled,"
        f"k8s.io/cluster-autoscaler/{cluster}" in container["command"]
    )
    assert "--balance-similar-node-groups=true" in container["command"]
    assert "--expander=least-waste" in container["command"]


def _catalogue() -> set[str]:
    """Metric names the exporters and engines publish: DCGM's collector file (the one the GPU
    Operator configures), kube-state-metrics' node and deployment docs, vLLM's and TGI's lists."""
    folder = reference_dir(METRICS_DIR)
    names: set[str] = set()
    dcgm = (folder / "dcgm-exporter-4.5.3-4.8.2-dcp-metrics-included.csv").read_text()
    names |= {line.split(",")[0].strip() for line in dcgm.splitlines()
              if line.strip() and not line.startswith("#")}  # fmt: skip
    for doc in ("kube-state-metrics-v2.20.0-node-metrics.md",
                "kube-state-metrics-v2.20.0-deployment-metrics.md"):  # fmt: skip
        names |= set(re.findall(r"^\|\s*(kube_[a-z_]+)\s*\|", (folder / doc).read_text(), re.M))
    for listing in ("vllm-metric-names.txt", "tgi-v3.3.5-metric-names.txt"):
        names |= {line.strip() for line in (folder / listing).read_text().splitlines()
                  if line.strip() and not line.startswith("#")}  # fmt: skip
    return names


def _metric_names(expr: str) -> set[str]:
    found: set[str] = set()

    def visit(node: Any) -> None:
        if isinstance(node, promql_parser.VectorSelector) and node.name:
            found.add(node.name)

    promql_parser.walk(promql_parser.parse(expr), visit)
    return found


@pytest.mark.parametrize("stack", stack_names())
def test_every_metric_read_is_published(stack: str) -> None:
    published = _catalogue()
    for expr in expressions(plan_stack(load_stack(stack))):
        unknown = _metric_names(expr) - published
        assert not unknown, f"{expr}: {sorted(unknown)} published by no exporter or engine"


def test_the_catalogue_check_can_fail() -> None:
    assert _metric_names("sum(vllm:num_requests_waitin) + DCGM_FI_DEV_GPU_UTIL") - _catalogue() == {
        "vllm:num_requests_waitin"
    }


def test_slice_host_is_dcgm_exporters_lowercase_hostname_label() -> None:
    """dcgm-exporter 4.6 (GPU Operator v26.7.0's) names the host `hostname`, no longer
    `Hostname` (../shared/reference/metrics/SOURCES.md)."""
    assert "4.6.0" in reference_file(f"{METRICS_DIR}/SOURCES.md").read_text()
    plan = plan_stack(load_stack("eks-p5-from-zero"))
    texts = [yaml.safe_dump(alert_rules(plan)), yaml.safe_dump(dashboard(plan))]
    assert all("Hostname" not in text for text in texts)
    # Two rules of one alert: a slice's memory full, and its memory not reported at all.
    full = [r for r in alert_rules(plan)[0]["rules"] if r["alert"] == "MigSliceMemoryFull"]
    assert len(full) == 2
    [sampled] = [r for r in full if "GPU_I_PROFILE" in r["annotations"]["summary"]]
    assert "{{ $labels.hostname }}" in sampled["annotations"]["summary"]
