"""The stack configuration contract: parse and validate a stack's config into typed objects.

Input is the `config:` mapping of `stacks/Pulumi.<stack>.yaml` (keys `mig-inference:<key>`), or
the same values read through `pulumi.Config`. Every default lives here. Errors name the key path,
the bad value and what is allowed, e.g. `mig-inference:pools[0].maxPods: ...`.
"""

from mig_inference.spec.model import (
    AUTO,
    FILL,
    Allocation,
    CacheStorage,
    ClusterSpec,
    Demand,
    DraSpec,
    Engine,
    GpuOperatorSpec,
    MigManager,
    ModelCacheSpec,
    MonitoringSpec,
    NetworkClient,
    NodeCount,
    PoolSpec,
    ProfilingSpec,
    QueueAutoscaling,
    Rollout,
    ServiceSpec,
    SharingSpec,
    SharingStrategy,
    StackSpec,
    Taint,
    ThroughputPoint,
)
from mig_inference.spec.stack import (
    TOP_KEYS,
    key_path,
    parse_stack,
    secret_references,
)
from mig_inference.stackfile.pulumi_config import NAMESPACE, SECRET_MARKER

__all__ = [
    "AUTO",
    "FILL",
    "NAMESPACE",
    "SECRET_MARKER",
    "TOP_KEYS",
    "Allocation",
    "CacheStorage",
    "ClusterSpec",
    "Demand",
    "DraSpec",
    "Engine",
    "GpuOperatorSpec",
    "MigManager",
    "ModelCacheSpec",
    "MonitoringSpec",
    "NetworkClient",
    "NodeCount",
    "PoolSpec",
    "ProfilingSpec",
    "QueueAutoscaling",
    "Rollout",
    "ServiceSpec",
    "SharingSpec",
    "SharingStrategy",
    "StackSpec",
    "Taint",
    "ThroughputPoint",
    "key_path",
    "parse_stack",
    "secret_references",
]
