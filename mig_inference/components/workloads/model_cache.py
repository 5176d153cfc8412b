"""The model cache: storage every node reads (never the nodes themselves), and a populate Job per
model revision that fills it once with the engine image's own downloader.

Per storage, what the stack renders, with the CSI driver's documented parameters:
- hyperdisk-ml (GKE): a StorageClass of the Compute Engine Persistent Disk CSI driver
  (`pd.csi.storage.gke.io`, `type: hyperdisk-ml`, `provisioned-throughput-on-create`;
  kubernetes-sigs/gcp-compute-persistent-disk-csi-driver pkg/parameters/constants.go). Per model
  revision a ReadWriteOnce claim the Job fills, then a ReadOnlyMany clone of it (GKE, "Using
  persistent disks with multiple readers": populate a ReadWriteOnce volume, then clone it into a
  ReadOnlyMany one; Kubernetes "CSI Volume Cloning": the source must not be in use) that every
  replica mounts read-only.
- gcs-fuse (GKE): a bucket (the stack's, or `bucket`), Workload Identity access for the cache's
  ServiceAccount, and a PersistentVolume of the Cloud Storage FUSE CSI driver
  (`gcsfuse.csi.storage.gke.io`, `volumeHandle` = the bucket, file cache and parallel downloads
  as mount options); pods carry `gke-gcsfuse/volumes: "true"` for the driver's sidecar and a
  `gke-gcsfuse-cache` volume for its file cache (GKE, "Cloud Storage FUSE CSI driver").
- s3-mountpoint (EKS): a bucket (the stack's, or `bucket`) and a PersistentVolume of the
  Mountpoint for Amazon S3 CSI driver (`s3.csi.aws.com`, static provisioning only,
  `volumeAttributes.bucketName`, `uid`/`gid`/`allow-other` for a non-root pod;
  awslabs/mountpoint-s3-csi-driver examples/kubernetes/static_provisioning).
- fsx-lustre (EKS): a StorageClass of the FSx for Lustre CSI driver (`fsx.csi.aws.com`,
  `subnetId`, `securityGroupIds`, `deploymentType`, `perUnitStorageThroughput`;
  kubernetes-sigs/aws-fsx-csi-driver docs/options.md), one file system per namespace's claim.
- file-storage (OKE): a StorageClass of the OCI File Storage CSI driver
  (`fss.csi.oraclecloud.com`, `availabilityDomain`, `mountTargetSubnetOcid`,
  `compartmentOcid`, `encryptInTransit`; Oracle, "Provisioning PVCs on the File Storage Service").
- storage-class (any): a ReadWriteMany claim of the StorageClass you name.

The populate Job runs as the restricted Pod Security Standard asks (non-root, no capabilities,
read-only root file system, RuntimeDefault seccomp), reads the token only from the service's
Secret, and a NetworkPolicy lets no pod reach it and lets it reach DNS and HTTPS only (and, with
gcs-fuse, the GKE metadata server its FUSE sidecar gets its Workload Identity token from).
"""

import json
from collections.abc import Callable
from functools import partial
from typing import Any, NotRequired, TypedDict

import pulumi
import pulumi_kubernetes as k8s

from mig_inference.clouds.storage import FSX_DEPLOYMENT_TYPE
from mig_inference.kube.scripts import load, program
from mig_inference.names.k8s_names import stack_scoped
from mig_inference.names.labels import POOL_LABEL
from mig_inference.plan import ServicePlan, StackPlan
from mig_inference.plan.model_cache import CACHE_ROOT, CachedModel, ModelCachePlan, fill_job_name
from mig_inference.spec import CacheStorage

from ..planning import planned, stack_name
from ..stack_args import Stack, cluster_input, nth
from .egress import dns_and_https_egress

GivenInput = Callable[[str, Any], Any]
"""A cluster field as the caller gave it, or the planned value (`cluster_input` of the stack)."""

CACHE_VOLUME = "model-cache"
CACHE_ACCOUNT = "model-cache"
"""The ServiceAccount of the populate Jobs: on Cloud Storage, the identity that writes the
bucket (on S3 the driver writes it, with its own role)."""
READER_ACCOUNT = "model-cache-reader"
"""The ServiceAccount of the replicas that read a bucket: an identity that may only read it
(GKE `roles/storage.objectViewer`; EKS a role allowed to list the bucket and get its objects,
for the replicas vLLM streams the weights into)."""
CLAIM = "model-cache"
"""The namespace's claim on shared storage (every storage but hyperdisk-ml)."""
FILL_COMPONENT = "model-cache"
GCSFUSE_CACHE_VOLUME = "gke-gcsfuse-cache"
GCSFUSE_ANNOTATION = {"gke-gcsfuse/volumes": "true"}
RUN_AS = 10001
FILL_LABELS = {
    "app.kubernetes.io/name": "model-fill",
    "app.kubernetes.io/component": FILL_COMPONENT,
    "app.kubernetes.io/managed-by": "mig-inference",
}
SKIP_AWAIT = {"pulumi.com/skipAwait": "true"}
"""A claim that binds only when its first pod is scheduled (WaitForFirstConsumer, or a volume
the driver provisions later): `pulumi up` does not wait for it to be Bound."""
GKE_METADATA = (("169.254.169.254/32", 80), ("169.254.169.252/32", 988))
"""Where the GKE metadata server answers Workload Identity token requests (GKE, "Use Workload
Identity Federation for GKE": allow egress to it when a NetworkPolicy restricts a pod)."""
FSS_EXPORT_OPTIONS = [
    {
        "source": "0.0.0.0/0",
        "requirePrivilegedSourcePort": False,
        "access": "READ_WRITE",
        "identitySquash": "ALL",
        "anonymousUid": 0,
        "anonymousGid": 0,
    }
]
"""The export's client options, in the File Storage API's fields (`ClientOptions`: the CSI
driver parses the StorageClass's `exportOptions` into them, oracle/oci-cloud-controller-manager
`pkg/csi/driver/fss_controller.go`); the source is the default export's, the mount target's
security rules limit who reaches it."""
CACHE_OWNER = "cache-owner"
"""The init step of an FSx for Lustre fill Job that gives the cache's root to the Job's UID."""
GCSFUSE_MOUNT_OPTIONS = [
    "implicit-dirs",
    "file-cache:max-size-mb:-1",
    "file-cache:enable-parallel-downloads:true",
]
"""Cloud Storage FUSE: directories without objects of their own; the file cache, as large as the
`gke-gcsfuse-cache` volume, filled by parallel downloads (GKE, "Optimize Cloud Storage FUSE CSI
driver for GKE performance")."""


class ModelCacheArgs(TypedDict):
    stack: Stack
    """The stack whose `modelCache` this is: its storage, and the namespaces of the services
    that read it."""
    cluster_name: NotRequired[pulumi.Input[str]]
    """EKS: the cluster whose Pod Identity gives streaming replicas their read-only role."""


def hyperdisk_claim(model: CachedModel, *, fill: bool) -> str:
    return f"{CLAIM}-{model.key}-fill" if fill else f"{CLAIM}-{model.key}"


def _cache_pvc(
    access: str, size_gib: int, **spec: Any
) -> k8s.core.v1.PersistentVolumeClaimSpecArgs:
    return k8s.core.v1.PersistentVolumeClaimSpecArgs(
        access_modes=[access],
        resources=k8s.core.v1.VolumeResourceRequirementsArgs(requests={"storage": f"{size_gib}Gi"}),
        **spec,
    )


class ModelCache(pulumi.ComponentResource):
    """The cache's storage and, per namespace that reads it, its claim (or bucket volume), the
    ServiceAccount of its Jobs and their NetworkPolicy. The populate Jobs belong to the services
    (`ModelFill`): they read the token from the service's Secret."""

    storage_class: pulumi.Output[str]
    """The StorageClass of the cache's claims (empty for a bucket)."""

    def __init__(
        self, name: str, args: ModelCacheArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("mig-inference:index:ModelCache", name, None, opts)
        plan = planned(args["stack"])
        cache = plan.model_cache
        assert cache is not None
        child = pulumi.ResourceOptions(parent=self)
        stack = stack_name(args["stack"])
        namespaces = sorted({ns for model in cache.models for ns in model.namespaces})
        given = partial(cluster_input, args["stack"])
        class_name = self._storage_class(name, plan, cache, stack, given, child)
        members: list[pulumi.Resource] = []
        if cache.storage is CacheStorage.GCS_FUSE:
            members = self._gcs_bucket(name, plan, cache, namespaces, given, child)
        elif cache.storage is CacheStorage.S3_MOUNTPOINT:
            if cache.bucket_owned:
                self._s3_bucket(name, plan, cache, child)
            streaming = sorted({s.spec.namespace for s in plan.services if cache.streamed(s)})
            if streaming:
                self._s3_readers(name, plan, cache, streaming, args.get("cluster_name"), given)
        for namespace in namespaces:
            accounts = [CACHE_ACCOUNT]
            if cache.storage.object_storage:
                accounts.append(READER_ACCOUNT)
            for account in accounts:
                k8s.core.v1.ServiceAccount(
                    f"{name}-{namespace}-sa"
                    if account == CACHE_ACCOUNT
                    else f"{name}-{namespace}-{account}",
                    metadata=k8s.meta.v1.ObjectMetaArgs(
                        name=account, namespace=namespace, labels=FILL_LABELS
                    ),
                    automount_service_account_token=False,
                    opts=child,
                )
            self._network_policy(f"{name}-{namespace}", namespace, cache, child)
            if cache.storage is CacheStorage.HYPERDISK_ML:
                continue  # one claim per model revision, made with its Job
            volume_name = None
            if cache.storage.object_storage:
                volume_name = stack_scoped(stack, f"{CLAIM}-{namespace}")
                self._bucket_volume(name, namespace, volume_name, plan, cache, members)
            k8s.core.v1.PersistentVolumeClaim(
                f"{name}-{namespace}-claim",
                metadata=k8s.meta.v1.ObjectMetaArgs(
                    name=CLAIM,
                    namespace=namespace,
                    labels=FILL_LABELS,
                    annotations=None if volume_name else SKIP_AWAIT,
                ),
                spec=_cache_pvc(
                    "ReadWriteMany",
                    cache.size_gib,
                    storage_class_name=class_name if volume_name is None else "",
                    volume_name=volume_name,
                ),
                # A bucket's claim binds at once; a provisioned one (FSx, File Storage) only
                # once its volume exists, which the Jobs that mount it wait for anyway.
                opts=pulumi.ResourceOptions(parent=self, depends_on=members or None),
            )
        self.storage_class = pulumi.Output.from_input(class_name or "")
        self.register_outputs({"storage_class": self.storage_class})

    def _storage_class(
        self, name: str, plan: StackPlan, cache: ModelCachePlan, stack: str,
        given: GivenInput, child: pulumi.ResourceOptions,
    ) -> str | None:  # fmt: skip
        spec = cache.spec
        settings = plan.spec.cluster
        if cache.storage is CacheStorage.STORAGE_CLASS:
            return spec.storage_class
        parameters: dict[str, pulumi.Input[str]]
        topologies = None
        binding = "Immediate"
        if cache.storage is CacheStorage.HYPERDISK_ML:
            provisioner = "pd.csi.storage.gke.io"
            throughput = cache.throughput
            parameters = {
                "type": "hyperdisk-ml",
                "provisioned-throughput-on-create": f"{throughput}Mi",
            }
            binding = "WaitForFirstConsumer"
            if cache.zone:
                topologies = [
                    k8s.core.v1.TopologySelectorTermArgs(
                        match_label_expressions=[
                            k8s.core.v1.TopologySelectorLabelRequirementArgs(
                                key="topology.gke.io/zone", values=[cache.zone]
                            )
                        ]
                    )
                ]
        elif cache.storage is CacheStorage.FSX_LUSTRE:
            provisioner = "fsx.csi.aws.com"
            parameters = {
                "subnetId": nth(given("subnet_ids", list(settings.get("subnetIds"))), 0),
                "securityGroupIds": ",".join(spec.security_group_ids),
                "deploymentType": FSX_DEPLOYMENT_TYPE,
                "perUnitStorageThroughput": str(cache.throughput),
            }
        elif cache.storage is CacheStorage.FILE_STORAGE:
            provisioner = "fss.csi.oraclecloud.com"
            parameters = {
                "availabilityDomain": settings.get("availabilityDomains")[0],
                "mountTargetSubnetOcid": spec.mount_target_subnet_id
                or nth(given("subnet_ids", list(settings.get("subnetIds"))), 0),
                "compartmentOcid": given("compartment_id", settings.get("compartmentId")),
                "encryptInTransit": "false",
                # The CSI driver applies no fsGroup to this ReadWriteMany volume and a new file
                # system's root belongs to root: every client is squashed to root (uid and gid
                # 0) on this export, so the non-root Job writes it (Oracle, "Provisioning PVCs
                # on the File Storage Service", "Alternative Solution 2": Squash All). Only the
                # cache's pods mount it, the replicas read-only.
                "exportOptions": json.dumps(FSS_EXPORT_OPTIONS),
            }
        else:
            return None  # a bucket: static volumes, no class
        class_name = stack_scoped(stack, CLAIM)
        k8s.storage.v1.StorageClass(
            f"{name}-class",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=class_name, labels=FILL_LABELS),
            provisioner=provisioner,
            parameters=parameters,
            reclaim_policy="Delete",
            volume_binding_mode=binding,
            allow_volume_expansion=False,
            allowed_topologies=topologies,
            opts=child,
        )
        return class_name

    def _gcs_bucket(
        self, name: str, plan: StackPlan, cache: ModelCachePlan, namespaces: list[str],
        given: GivenInput, child: pulumi.ResourceOptions,
    ) -> list[pulumi.Resource]:  # fmt: skip
        import pulumi_gcp as gcp

        settings = plan.spec.cluster
        project = given("project", settings.get("project"))
        bucket: pulumi.Input[str] = cache.bucket or ""
        if cache.bucket_owned:
            location = str(settings.get("location"))
            region = location if location.count("-") == 1 else location.rsplit("-", 1)[0]
            made = gcp.storage.Bucket(
                f"{name}-bucket",
                name=cache.bucket,
                project=project,
                location=region.upper(),
                uniform_bucket_level_access=True,
                public_access_prevention="enforced",
                force_destroy=False,
                labels=plan.spec.cloud_tags.given(),
                opts=child,
            )
            bucket = made.name
        number = gcp.organizations.get_project_output(
            project_id=project, opts=pulumi.InvokeOutputOptions(parent=self)
        ).number
        members: list[pulumi.Resource] = []
        # Workload Identity Federation for GKE: the Kubernetes ServiceAccount itself is the
        # principal. The Jobs write (Storage Object User); the replicas only read (Storage
        # Object Viewer, GKE "Cloud Storage FUSE CSI driver": read-only workloads).
        grants = ((CACHE_ACCOUNT, "access", "roles/storage.objectUser"),
                  (READER_ACCOUNT, "read", "roles/storage.objectViewer"))  # fmt: skip
        for namespace in namespaces:
            for account, what, role in grants:
                principal = pulumi.Output.concat(
                    "principal://iam.googleapis.com/projects/",
                    number,
                    f"/locations/global/workloadIdentityPools/{project}.svc.id.goog/subject/ns/",
                    f"{namespace}/sa/{account}",
                )
                members.append(
                    gcp.storage.BucketIAMMember(
                        f"{name}-{namespace}-{what}",
                        bucket=bucket,
                        role=role,
                        member=principal,
                        opts=child,
                    )
                )
        return members

    def _s3_bucket(
        self, name: str, plan: StackPlan, cache: ModelCachePlan, child: pulumi.ResourceOptions
    ) -> None:
        import pulumi_aws as aws

        made = aws.s3.Bucket(
            f"{name}-bucket",
            bucket=cache.bucket,
            force_destroy=False,
            tags=plan.spec.cloud_tags.given(),
            opts=child,
        )
        aws.s3.BucketPublicAccessBlock(
            f"{name}-bucket-private",
            bucket=made.id,
            block_public_acls=True,
            block_public_policy=True,
            ignore_public_acls=True,
            restrict_public_buckets=True,
            opts=child,
        )

    def _s3_readers(
        self, name: str, plan: StackPlan, cache: ModelCachePlan, namespaces: list[str],
        cluster_name: pulumi.Input[str] | None, given: GivenInput,
    ) -> None:  # fmt: skip
        """A role that may only list the bucket and get its objects, handed by EKS Pod Identity
        to the readers' ServiceAccount of each namespace whose replicas vLLM streams into (the
        nodes' instance metadata is out of the pods' reach: hop limit 1)."""
        import pulumi_aws as aws

        from ..clouds.eks import MOUNTPOINT_READ, bucket_policy, pod_identity_trust

        assert cache.bucket is not None and cluster_name is not None
        tags = plan.spec.cloud_tags.given() or None
        child = pulumi.ResourceOptions(parent=self)
        role = aws.iam.Role(
            f"{name}-readers",
            assume_role_policy=pod_identity_trust(),
            description="mig-inference model cache readers",
            permissions_boundary=given(
                "permissions_boundary", plan.spec.cluster.get("permissionsBoundary")
            ),
            tags=tags,
            opts=child,
        )
        policy = aws.iam.RolePolicy(
            f"{name}-readers",
            role=role.name,
            policy=bucket_policy(cache.bucket, MOUNTPOINT_READ),
            opts=child,
        )
        for namespace in namespaces:
            aws.eks.PodIdentityAssociation(
                f"{name}-{namespace}-readers",
                cluster_name=cluster_name,
                namespace=namespace,
                service_account=READER_ACCOUNT,
                role_arn=role.arn,
                tags=tags,
                opts=pulumi.ResourceOptions(parent=self, depends_on=[policy]),
            )

    def _bucket_volume(
        self, name: str, namespace: str, volume_name: str, plan: StackPlan,
        cache: ModelCachePlan, after: list[pulumi.Resource],
    ) -> None:  # fmt: skip
        assert cache.bucket is not None
        if cache.storage is CacheStorage.GCS_FUSE:
            csi = k8s.core.v1.CSIPersistentVolumeSourceArgs(
                driver="gcsfuse.csi.storage.gke.io", volume_handle=cache.bucket
            )
            options = GCSFUSE_MOUNT_OPTIONS
        else:
            csi = k8s.core.v1.CSIPersistentVolumeSourceArgs(
                driver="s3.csi.aws.com",
                volume_handle=f"{volume_name}-{cache.bucket}",
                volume_attributes={"bucketName": cache.bucket},
            )
            # A non-root pod reads and writes through `allow-other` with its own uid and gid;
            # the Job replaces an unfinished copy (`allow-delete`).
            options = [
                f"region {plan.spec.cluster.get('region')}",
                f"uid={RUN_AS}",
                f"gid={RUN_AS}",
                "allow-other",
                "allow-delete",
            ]
        k8s.core.v1.PersistentVolume(
            f"{name}-{namespace}-volume",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=volume_name, labels=FILL_LABELS),
            spec=k8s.core.v1.PersistentVolumeSpecArgs(
                capacity={"storage": f"{cache.size_gib}Gi"},
                access_modes=["ReadWriteMany"],
                persistent_volume_reclaim_policy="Retain",
                storage_class_name="",
                mount_options=options,
                claim_ref=k8s.core.v1.ObjectReferenceArgs(namespace=namespace, name=CLAIM),
                csi=csi,
            ),
            opts=pulumi.ResourceOptions(parent=self, depends_on=after or None),
        )

    def _network_policy(
        self, name: str, namespace: str, cache: ModelCachePlan, child: pulumi.ResourceOptions
    ) -> None:
        egress = dns_and_https_egress()
        if cache.storage is CacheStorage.GCS_FUSE:
            egress += [
                k8s.networking.v1.NetworkPolicyEgressRuleArgs(
                    to=[
                        k8s.networking.v1.NetworkPolicyPeerArgs(
                            ip_block=k8s.networking.v1.IPBlockArgs(cidr=cidr)
                        )
                    ],
                    ports=[k8s.networking.v1.NetworkPolicyPortArgs(port=port, protocol="TCP")],
                )
                for cidr, port in GKE_METADATA
            ]
        k8s.networking.v1.NetworkPolicy(
            f"{name}-fill-policy",
            metadata=k8s.meta.v1.ObjectMetaArgs(
                name="model-fill", namespace=namespace, labels=FILL_LABELS
            ),
            spec=k8s.networking.v1.NetworkPolicySpecArgs(
                pod_selector=k8s.meta.v1.LabelSelectorArgs(
                    match_labels={"app.kubernetes.io/component": FILL_COMPONENT}
                ),
                policy_types=["Ingress", "Egress"],
                egress=egress,
            ),
            opts=child,
        )


def cache_claim(cache: ModelCachePlan, model: CachedModel) -> str:
    """The claim the replicas of `model` mount (read-only)."""
    if cache.storage is CacheStorage.HYPERDISK_ML:
        return hyperdisk_claim(model, fill=False)
    return CLAIM


def reader_volumes(
    cache: ModelCachePlan, service: ServicePlan
) -> tuple[list[k8s.core.v1.VolumeArgs], list[k8s.core.v1.VolumeMountArgs], dict[str, str]]:
    """What a replica of `service` adds to its pod to read the cache: volumes, read-only mounts
    and pod annotations (none when the service is not cached)."""
    model = cache.model_of(service.name)
    if model is None:
        return [], [], {}
    volumes = [
        k8s.core.v1.VolumeArgs(
            name=CACHE_VOLUME,
            persistent_volume_claim=k8s.core.v1.PersistentVolumeClaimVolumeSourceArgs(
                claim_name=cache_claim(cache, model), read_only=True
            ),
        )
    ]
    mounts = [k8s.core.v1.VolumeMountArgs(name=CACHE_VOLUME, mount_path=CACHE_ROOT, read_only=True)]
    annotations: dict[str, str] = {}
    if cache.storage is CacheStorage.GCS_FUSE:
        annotations.update(GCSFUSE_ANNOTATION)
        volumes.append(_gcsfuse_cache(cache, model))
    return volumes, mounts, annotations


def _gcsfuse_cache(cache: ModelCachePlan, model: CachedModel) -> k8s.core.v1.VolumeArgs:
    return k8s.core.v1.VolumeArgs(
        name=GCSFUSE_CACHE_VOLUME,
        empty_dir=k8s.core.v1.EmptyDirVolumeSourceArgs(size_limit=f"{cache.size_of(model)}Gi"),
    )


def reader_account(cache: ModelCachePlan | None, service: ServicePlan) -> str | None:
    """The ServiceAccount of replicas that read a bucket (its read-only cloud identity)."""
    if (
        cache is not None
        and cache.storage.object_storage
        and cache.model_of(service.name) is not None
    ):
        return READER_ACCOUNT
    return None


def root_owner_namespaces(cache: ModelCachePlan | None) -> set[str]:
    """The namespaces whose fill Jobs start with the root `cache-owner` step (FSx for Lustre)."""
    if cache is None or cache.storage is not CacheStorage.FSX_LUSTRE:
        return set()
    return {namespace for model in cache.models for namespace in model.namespaces}


def fill_lead(plan: StackPlan, service: ServicePlan) -> bool:
    """This Deployment's component fills its model in its namespace (the first that reads it)."""
    cache = plan.model_cache
    if cache is None:
        return False
    model = cache.model_of(service.name)
    if model is None:
        return False
    first = next(
        s
        for s in plan.services
        if s.name in model.services and s.spec.namespace == service.spec.namespace
    )
    return first.name == service.name


class ModelFill(pulumi.ComponentResource):
    """One model revision filled into the cache in one namespace: the populate Job (and on
    Hyperdisk ML its volume, then the read-only clone the replicas mount)."""

    job_name: pulumi.Output[str]

    def __init__(
        self,
        name: str,
        plan: StackPlan,
        service: ServicePlan,
        image: str,
        token: tuple[str, str] | None,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("mig-inference:index:ModelFill", name, None, opts)
        cache = plan.model_cache
        assert cache is not None
        model = cache.model_of(service.name)
        assert model is not None
        namespace = service.spec.namespace
        estimate = plan.load[service.name]
        child = pulumi.ResourceOptions(parent=self)
        hyperdisk = cache.storage is CacheStorage.HYPERDISK_ML
        claim = hyperdisk_claim(model, fill=True) if hyperdisk else CLAIM
        before: list[pulumi.Resource] = []
        if hyperdisk:
            before.append(
                k8s.core.v1.PersistentVolumeClaim(
                    f"{name}-volume",
                    metadata=k8s.meta.v1.ObjectMetaArgs(
                        name=claim, namespace=namespace, labels=FILL_LABELS, annotations=SKIP_AWAIT
                    ),
                    spec=_cache_pvc(
                        "ReadWriteOnce",
                        cache.size_of(model),
                        storage_class_name=stack_scoped(stack_name_of(plan), CLAIM),
                    ),
                    # WaitForFirstConsumer: it binds when the Job's pod is scheduled.
                    opts=child,
                )
            )
        target = f"{CACHE_ROOT}/{model.path}"
        staging = "/staging/model" if cache.storage.object_storage else f"{target}.partial"
        env = [
            k8s.core.v1.EnvVarArgs(name=key, value=value)
            for key, value in (
                ("MODEL", model.model),
                ("REVISION", model.revision),
                ("TARGET", target),
                ("STAGING", staging),
                ("HOME", "/tmp"),
                ("HF_HOME", "/tmp/huggingface"),
                ("ENGINE_FILES", program("engine_files.py")),
            )
        ]
        if token is not None:
            secret, key = token
            env.append(
                k8s.core.v1.EnvVarArgs(
                    name="HF_TOKEN",
                    value_from=k8s.core.v1.EnvVarSourceArgs(
                        secret_key_ref=k8s.core.v1.SecretKeySelectorArgs(name=secret, key=key)
                    ),
                )
            )
        volumes = [
            k8s.core.v1.VolumeArgs(
                name=CACHE_VOLUME,
                persistent_volume_claim=k8s.core.v1.PersistentVolumeClaimVolumeSourceArgs(
                    claim_name=claim
                ),
            ),
            k8s.core.v1.VolumeArgs(
                name="tmp", empty_dir=k8s.core.v1.EmptyDirVolumeSourceArgs(size_limit="4Gi")
            ),
        ]
        mounts = [
            k8s.core.v1.VolumeMountArgs(name=CACHE_VOLUME, mount_path=CACHE_ROOT),
            k8s.core.v1.VolumeMountArgs(name="tmp", mount_path="/tmp"),
        ]
        annotations: dict[str, str] = {}
        if cache.storage.object_storage:
            volumes.append(
                k8s.core.v1.VolumeArgs(
                    name="staging",
                    empty_dir=k8s.core.v1.EmptyDirVolumeSourceArgs(
                        size_limit=f"{cache.size_of(model)}Gi"
                    ),
                )
            )
            mounts.append(k8s.core.v1.VolumeMountArgs(name="staging", mount_path="/staging"))
        if cache.storage is CacheStorage.GCS_FUSE:
            annotations.update(GCSFUSE_ANNOTATION)
            volumes.append(_gcsfuse_cache(cache, model))
        # Hyperdisk ML attaches to the GPU machine series (not every machine type): the Job
        # writes from a node of the pool that reads it, without asking for a GPU.
        pool = service.pool
        affinity = None
        tolerations = None
        if hyperdisk:
            affinity = k8s.core.v1.AffinityArgs(
                node_affinity=k8s.core.v1.NodeAffinityArgs(
                    required_during_scheduling_ignored_during_execution=k8s.core.v1.NodeSelectorArgs(
                        node_selector_terms=[
                            k8s.core.v1.NodeSelectorTermArgs(
                                # The pool, not its generation: a new generation must
                                # not make a new Job of a model already filled.
                                match_expressions=[
                                    k8s.core.v1.NodeSelectorRequirementArgs(
                                        key=POOL_LABEL, operator="In", values=[pool.name]
                                    )
                                ]
                            )
                        ]
                    )
                )
            )
            tolerations = [
                k8s.core.v1.TolerationArgs(
                    key=t["key"],
                    operator=t["operator"],
                    value=t.get("value"),
                    effect=t.get("effect"),
                )
                for t in pool.tolerations
            ]
        deadline = int(3 * estimate.populate_seconds) + 1800
        job_name = fill_job_name(cache, model)
        labels = {**FILL_LABELS, "mig-inference.io/model": model.key}
        job = k8s.batch.v1.Job(
            f"{name}-job",
            metadata=k8s.meta.v1.ObjectMetaArgs(
                name=job_name,
                namespace=namespace,
                labels=labels,
                # A Job that failed is replaced on the next `pulumi up` instead of awaited again.
                annotations={"pulumi.com/replaceUnready": "true"},
            ),
            spec=k8s.batch.v1.JobSpecArgs(
                backoff_limit=2,
                active_deadline_seconds=deadline,
                template=k8s.core.v1.PodTemplateSpecArgs(
                    metadata=k8s.meta.v1.ObjectMetaArgs(labels=labels, annotations=annotations),
                    spec=k8s.core.v1.PodSpecArgs(
                        restart_policy="Never",
                        service_account_name=CACHE_ACCOUNT,
                        automount_service_account_token=False,
                        enable_service_links=False,
                        affinity=affinity,
                        tolerations=tolerations,
                        security_context=k8s.core.v1.PodSecurityContextArgs(
                            run_as_non_root=True,
                            run_as_user=RUN_AS,
                            run_as_group=RUN_AS,
                            fs_group=RUN_AS,
                            fs_group_change_policy="OnRootMismatch",
                            seccomp_profile=k8s.core.v1.SeccompProfileArgs(type="RuntimeDefault"),
                        ),
                        init_containers=[_cache_owner(image)]
                        if cache.storage is CacheStorage.FSX_LUSTRE
                        else None,
                        containers=[
                            k8s.core.v1.ContainerArgs(
                                name="fill",
                                image=image,
                                image_pull_policy="IfNotPresent",
                                command=["/bin/sh", "-c", load("populate.sh")],
                                env=env,
                                resources=k8s.core.v1.ResourceRequirementsArgs(
                                    requests={"cpu": "1", "memory": "2Gi"},
                                    limits={"memory": "4Gi"},
                                ),
                                security_context=k8s.core.v1.SecurityContextArgs(
                                    allow_privilege_escalation=False,
                                    read_only_root_filesystem=True,
                                    run_as_non_root=True,
                                    capabilities=k8s.core.v1.CapabilitiesArgs(drop=["ALL"]),
                                ),
                                volume_mounts=mounts,
                            )
                        ],
                        volumes=volumes,
                    ),
                ),
            ),
            opts=pulumi.ResourceOptions(
                parent=self,
                depends_on=before or None,
                # `pulumi up` waits for the download: the Deployments start from its result.
                custom_timeouts=pulumi.CustomTimeouts(
                    create=f"{deadline + 120}s", update=f"{deadline + 120}s"
                ),
                delete_before_replace=True,
            ),
        )
        if hyperdisk:
            # The clone every replica reads: made once the Job finished with its source.
            k8s.core.v1.PersistentVolumeClaim(
                f"{name}-readers",
                metadata=k8s.meta.v1.ObjectMetaArgs(
                    name=hyperdisk_claim(model, fill=False),
                    namespace=namespace,
                    labels=FILL_LABELS,
                    annotations=SKIP_AWAIT,
                ),
                spec=_cache_pvc(
                    "ReadOnlyMany",
                    cache.size_of(model),
                    storage_class_name=stack_scoped(stack_name_of(plan), CLAIM),
                    data_source=k8s.core.v1.TypedLocalObjectReferenceArgs(
                        kind="PersistentVolumeClaim", name=claim
                    ),
                ),
                opts=pulumi.ResourceOptions(parent=self, depends_on=[job]),
            )
        self.job_name = job.metadata.name
        self.register_outputs({"job_name": self.job_name})


def _cache_owner(image: str) -> k8s.core.v1.ContainerArgs:
    """FSx for Lustre: the FSx CSI driver applies no fsGroup to a ReadWriteMany volume
    (its CSIDriver's `fsGroupPolicy` is ReadWriteOnceWithFSType, kubernetes-sigs/aws-fsx-csi-
    driver `deploy/kubernetes/base/csidriver.yaml`) and a new file system's root belongs to
    root, so the non-root Job could not write it. This step gives the root of the volume to the
    Job's UID, as root with CAP_CHOWN and nothing else (no privilege escalation, read-only root
    file system); it is why a namespace with an FSx cache enforces the baseline Pod Security
    Standard (restricted is only warned and audited there)."""
    return k8s.core.v1.ContainerArgs(
        name=CACHE_OWNER,
        image=image,
        image_pull_policy="IfNotPresent",
        command=["/bin/sh", "-c", f"chown {RUN_AS}:{RUN_AS} {CACHE_ROOT}"],
        resources=k8s.core.v1.ResourceRequirementsArgs(
            requests={"cpu": "10m", "memory": "16Mi"}, limits={"memory": "64Mi"}
        ),
        security_context=k8s.core.v1.SecurityContextArgs(
            run_as_user=0,
            run_as_non_root=False,
            allow_privilege_escalation=False,
            read_only_root_filesystem=True,
            capabilities=k8s.core.v1.CapabilitiesArgs(drop=["ALL"], add=["CHOWN"]),
        ),
        volume_mounts=[k8s.core.v1.VolumeMountArgs(name=CACHE_VOLUME, mount_path=CACHE_ROOT)],
    )


def stack_name_of(plan: StackPlan) -> str:
    return plan.spec.stack
