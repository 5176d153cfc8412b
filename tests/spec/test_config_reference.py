"""The stack file reference (docs/stack-file.md, with capacity in docs/capacity.md) documents every
key the spec reader takes."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from mig_inference.spec.cluster import ACCESS_KEYS, CLUSTER_KEYS
from mig_inference.spec.demand import DEMAND_KEYS, POINT_KEYS, PROFILING_KEYS
from mig_inference.spec.gateway import CERT_MANAGER_KEYS, GATEWAY_KEYS, PICKER_KEYS, TLS_KEYS
from mig_inference.spec.model_cache import MODEL_CACHE_KEYS
from mig_inference.spec.monitoring import MONITORING_KEYS
from mig_inference.spec.operator import OPERATOR_KEYS
from mig_inference.spec.pools import POOL_KEYS
from mig_inference.spec.services import SERVICE_KEYS
from mig_inference.spec.stack import TOP_KEYS
from mig_inference.spec.verify import EPHEMERAL_KEYS, SERVICE_VERIFY_KEYS, VERIFY_KEYS

DOCS = Path(__file__).parent.parent.parent / "docs"
REFERENCE = "".join(
    (DOCS / page).read_text(encoding="utf-8") for page in ("stack-file.md", "capacity.md")
)
SECTIONS = {
    "top": TOP_KEYS,
    "cluster": ("name", "create", "protect", *ACCESS_KEYS,
                *sorted({k for keys in CLUSTER_KEYS.values() for k in keys})),
    "pools[]": POOL_KEYS,
    "gpuOperator": OPERATOR_KEYS,
    "monitoring": MONITORING_KEYS,
    "modelCache": MODEL_CACHE_KEYS,
    "services[]": SERVICE_KEYS + DEMAND_KEYS,
    "profiling": PROFILING_KEYS,
    "throughput[]": tuple(k for k in POINT_KEYS if k not in ("batch", "measured")),
    "verify": VERIFY_KEYS,
    "services[].verify": SERVICE_VERIFY_KEYS,
    "ephemeral": EPHEMERAL_KEYS,
    "gateway": GATEWAY_KEYS,
    "gateway.endpointPicker": PICKER_KEYS,
    "gateway.tls": TLS_KEYS,
    "gateway.tls.certManager": CERT_MANAGER_KEYS,
}  # fmt: skip


@pytest.mark.parametrize("section", sorted(SECTIONS))
def test_every_key_is_in_the_configuration_reference(section: str) -> None:
    documented = set(re.findall(r"`([A-Za-z][A-Za-z0-9]*)`", REFERENCE))
    missing = [key for key in SECTIONS[section] if key not in documented]
    assert not missing, f"{section}: {missing}"
