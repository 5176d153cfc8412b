"""`mig-inference:monitoring`: Prometheus Operator objects, alerts, a Grafana dashboard, and
the Prometheus that queue-based replica autoscaling reads."""

from __future__ import annotations

import re

from mig_inference.errors import shown
from mig_inference.spec import formats
from mig_inference.spec.model import MonitoringSpec
from mig_inference.spec.reader import ConfigNode, dns_label

MONITORING_KEYS = (
    "prometheusOperator",
    "releaseLabel",
    "prometheusUrl",
    "prometheusNamespace",
    "pendingMinutes",
)
_URL = re.compile(r"^https?://[^\s/]+(/\S*)?$")


def monitoring_spec(node: ConfigNode) -> MonitoringSpec:
    given = node.value is not None
    node.value = node.value if given else {}
    node.mapping(MONITORING_KEYS)
    url = node.child("prometheusUrl").string()
    if url is not None and not _URL.match(url):
        url = node.child("prometheusUrl").problem(
            f"{shown(url)} is not an http(s) URL like http://prometheus-operated.monitoring:9090",
            None,
        )
    pending = node.child("pendingMinutes").integer(15, minimum=1, maximum=1440)
    assert pending is not None
    operator = node.child("prometheusOperator").boolean(False)
    return MonitoringSpec(
        prometheus_operator=operator,
        scrape_annotations=given and not operator,
        release_label=node.child("releaseLabel").text(formats.LABEL_VALUE),
        prometheus_url=url,
        prometheus_namespace=dns_label(node.child("prometheusNamespace"), 63)
        if node.child("prometheusNamespace").value is not None
        else "monitoring",
        pending_minutes=pending,
    )
