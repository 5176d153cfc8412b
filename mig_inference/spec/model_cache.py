"""`mig-inference:modelCache`: the stack's model cache, filled once per model revision and read
by every replica instead of the hub.

The storage each cloud offers for it (each its CSI driver's documented choice):
- GKE: `hyperdisk-ml` (default; Compute Engine Persistent Disk CSI driver, a ReadOnlyMany clone
  read by every node) or `gcs-fuse` (Cloud Storage FUSE CSI driver, file cache);
- EKS: `s3-mountpoint` (default; Mountpoint for Amazon S3 CSI driver) or `fsx-lustre` (FSx for
  Lustre CSI driver, dynamic provisioning);
- OKE: `file-storage` (default; OCI File Storage CSI driver, dynamic provisioning);
- any cloud, and the only choice on `existing`: `storage-class`, a ReadWriteMany StorageClass
  you name with `storageClass`.
"""

from __future__ import annotations

from mig_inference.clouds import Cloud
from mig_inference.clouds.addons import storage_offered
from mig_inference.clouds.storage import fsx_per_unit_throughputs
from mig_inference.errors import shown
from mig_inference.spec import formats
from mig_inference.spec.model import CacheStorage, ModelCacheSpec
from mig_inference.spec.reader import ConfigNode

MODEL_CACHE_KEYS = (
    "enabled",
    "storage",
    "storageClass",
    "bucket",
    "sizeGiB",
    "throughputMiBps",
    "securityGroupIds",
    "mountTargetSubnetId",
    "stream",
    "readMBps",
    "hubMBps",
)
STORAGE_BY_CLOUD: dict[Cloud, tuple[CacheStorage, ...]] = {
    cloud: tuple(CacheStorage(feature.value) for feature in storage_offered(cloud))
    for cloud in Cloud
}
"""The storage each cloud offers, its default first (the add-on table's rows)."""
_ONLY_FOR = {
    "bucket": (CacheStorage.GCS_FUSE, CacheStorage.S3_MOUNTPOINT),
    "stream": (CacheStorage.GCS_FUSE, CacheStorage.S3_MOUNTPOINT),
    "throughputMiBps": (CacheStorage.HYPERDISK_ML, CacheStorage.FSX_LUSTRE),
    "securityGroupIds": (CacheStorage.FSX_LUSTRE,),
    "mountTargetSubnetId": (CacheStorage.FILE_STORAGE,),
    "storageClass": (CacheStorage.STORAGE_CLASS,),
}


def _storage(node: ConfigNode, cloud: Cloud) -> CacheStorage:
    offered = STORAGE_BY_CLOUD[cloud]
    allowed = [s.value for s in offered]
    raw = node.child("storage").value
    if raw is None:
        if node.child("storageClass").value is not None:
            return CacheStorage.STORAGE_CLASS
        if cloud is Cloud.EXISTING:
            node.child("storageClass").problem(
                "is required on an existing cluster: a ReadWriteMany StorageClass of yours "
                "(NFS, CephFS, a cloud file store...) that holds the cache",
                None,
            )
        return offered[0]
    if raw not in allowed:
        return node.child("storage").problem(
            f"{shown(raw)} is not a model cache storage on {cloud.value}; allowed: "
            f"{', '.join(allowed)}",
            offered[0],
            allowed,
        )
    return CacheStorage(raw)


def model_cache_spec(node: ConfigNode, cloud: Cloud) -> ModelCacheSpec | None:
    if node.value is None:
        return None
    raw = node.mapping(MODEL_CACHE_KEYS)
    storage = _storage(node, cloud)
    for key, storages in _ONLY_FOR.items():
        if raw.get(key) is not None and storage not in storages:
            node.child(key).problem(
                f"applies to storage {', '.join(s.value for s in storages)}, not {storage.value}",
                None,
            )
    if storage is CacheStorage.STORAGE_CLASS and raw.get("storageClass") is None:
        node.child("storageClass").problem("is required with storage storage-class", None)
    bucket_format = formats.GCS_BUCKET if storage is CacheStorage.GCS_FUSE else formats.S3_BUCKET
    throughput_node = node.child("throughputMiBps")
    throughput = None
    if storage is CacheStorage.FSX_LUSTRE and throughput_node.value is not None:
        throughput = throughput_node.integer()
        if throughput not in fsx_per_unit_throughputs():
            allowed = [str(v) for v in fsx_per_unit_throughputs()]
            throughput = throughput_node.problem(
                f"FSx for Lustre takes a per-unit throughput (MB/s per TiB) of "
                f"{', '.join(allowed)}; got {shown(throughput_node.value)}",
                None,
                allowed,
            )
    elif storage is CacheStorage.HYPERDISK_ML:
        throughput = throughput_node.integer(bound=formats.HYPERDISK_ML_THROUGHPUT)
    groups = node.child("securityGroupIds").texts(formats.AWS_SECURITY_GROUP)
    if storage is CacheStorage.FSX_LUSTRE and raw.get("securityGroupIds") is None:
        node.child("securityGroupIds").problem(
            "is required with fsx-lustre: the file system's security groups, which must let "
            "the nodes reach Lustre (TCP 988)",
            None,
        )
    stream = node.child("stream").boolean(False)
    return ModelCacheSpec(
        storage=storage,
        storage_class=node.child("storageClass").text(formats.STORAGE_CLASS),
        bucket=node.child("bucket").text(bucket_format),
        size_gib=node.child("sizeGiB").integer(bound=formats.CACHE_SIZE_GIB),
        throughput_mib_per_s=throughput,
        security_group_ids=groups,
        mount_target_subnet_id=node.child("mountTargetSubnetId").text(formats.ocid("subnet")),
        stream=stream,
        read_mb_per_s=node.child("readMBps").number(bound=formats.READ_MB_PER_S),
        hub_mb_per_s=node.child("hubMBps").number(bound=formats.READ_MB_PER_S),
        enabled=node.child("enabled").boolean(True),
    )
