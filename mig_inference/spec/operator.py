"""`mig-inference:gpuOperator`: the GPU Operator release and the MIG-ready gate."""

from __future__ import annotations

import re

from mig_inference.clouds import Cloud
from mig_inference.errors import shown
from mig_inference.spec.model import GpuOperatorSpec
from mig_inference.spec.reader import ConfigNode, dns_label

OPERATOR_KEYS = ("version", "namespace", "withReboot", "serviceMonitor", "timeoutSeconds", "gate",
                 "gateTimeoutSeconds")  # fmt: skip


def gpu_operator_spec(node: ConfigNode, cloud: Cloud, pinned_version: str) -> GpuOperatorSpec:
    node.value = node.value if node.value is not None else {}
    node.mapping(OPERATOR_KEYS)
    version = node.child("version").string(pinned_version)
    assert version is not None
    if not re.match(r"^v\d+\.\d+\.\d+$", version):
        raise node.child("version").error(f"{shown(version)} is not a chart version like v26.7.0")
    namespace = (
        dns_label(node.child("namespace"), 63) if node.child("namespace").value else "gpu-operator"
    )
    timeout = node.child("timeoutSeconds").integer(1200, minimum=300, maximum=3600)
    gate_timeout = node.child("gateTimeoutSeconds").integer(1800, minimum=60, maximum=7200)
    assert timeout is not None and gate_timeout is not None
    return GpuOperatorSpec(
        version=version,
        namespace=namespace,
        with_reboot=node.child("withReboot").boolean(cloud is not Cloud.EXISTING),
        service_monitor=node.child("serviceMonitor").boolean(False),
        timeout_seconds=timeout,
        gate=node.child("gate").boolean(True),
        gate_timeout_seconds=gate_timeout,
    )
