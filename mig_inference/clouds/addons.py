"""Which cluster add-ons each stack feature needs, per cloud, each row with its source: what a
cluster this project creates is given, how a joined cluster is checked, and the identity the
add-on runs with. The spec reads the storage each cloud offers from it; the components render
the created clusters' add-ons and look the joined clusters' up from it.

A feature is a model cache storage (`modelCache.storage`), NetworkPolicy enforcement (every
stack that writes a NetworkPolicy: inference services, verify, fill, profiling and node Jobs),
or EKS Pod Identity (pods with an AWS identity of their own)."""

from __future__ import annotations

from enum import StrEnum

from msgspec import Struct

from mig_inference.clouds import Cloud


class Feature(StrEnum):
    """A stack feature that needs something of the cluster. The storage values are those of
    `modelCache.storage`."""

    HYPERDISK_ML = "hyperdisk-ml"
    GCS_FUSE = "gcs-fuse"
    S3_MOUNTPOINT = "s3-mountpoint"
    FSX_LUSTRE = "fsx-lustre"
    FILE_STORAGE = "file-storage"
    STORAGE_CLASS = "storage-class"
    NETWORK_POLICY = "network-policy"
    POD_IDENTITY = "pod-identity"


class Joined(StrEnum):
    """What happens on a cluster the stack joins."""

    REFUSED_WITHOUT = "refused-without"
    """Looked up; the preview stops at the feature's key when the cluster lacks it."""
    WARNED_WITHOUT = "warned-without"
    """Looked up; the preview warns when the cluster lacks it (the stack works, unguarded)."""
    BUILT_IN = "built-in"
    """Part of every cluster of the cloud: nothing to look up."""
    NOT_LOOKED_UP = "not-looked-up"
    """Nothing the cloud's API shows: the docs say what to check."""


class Addon(Struct, frozen=True):
    """What one feature needs of one cloud's cluster."""

    cloud: Cloud
    feature: Feature
    addon: str
    """The add-on, as the cloud names it (GKE `addonsConfig` field, EKS add-on name, ...)."""
    created: str
    """What a cluster this project creates gets ("" when nothing is added)."""
    joined: Joined
    source: str
    identity: str = ""
    """The service account the add-on's cloud identity is bound to (EKS Pod Identity)."""
    installed_here: bool = True
    """A created cluster gets it from this project (False: the cloud's own, or none)."""
    confirmed: bool = False
    """Its source was re-read here and states what the row says (`plan` marks the others)."""
    remedy: str = ""
    """What a joined cluster's owner turns on (default: what a created cluster gets)."""

    @property
    def turn_on(self) -> str:
        return self.remedy or self.created


GKE_NETWORK_POLICY = "https://cloud.google.com/kubernetes-engine/docs/how-to/network-policy"
GKE_DATAPLANE_V2 = "https://cloud.google.com/kubernetes-engine/docs/concepts/dataplane-v2"
GKE_PD_CSI = (
    "https://cloud.google.com/kubernetes-engine/docs/how-to/persistent-volumes/gce-pd-csi-driver"
)
GKE_HYPERDISK = (
    "https://cloud.google.com/kubernetes-engine/docs/how-to/persistent-volumes/hyperdisk "
    '(the PD CSI driver is "the primary way" to Hyperdisk; Hyperdisk ML among its GKE options)'
)
GKE_GCS_FUSE = (
    "https://cloud.google.com/kubernetes-engine/docs/how-to/persistent-volumes/"
    "cloud-storage-fuse-csi-driver-setup"
)
EKS_NETWORK_POLICY = (
    "https://docs.aws.amazon.com/eks/latest/userguide/cni-network-policy-configure.html"
)
EKS_S3_CSI = "https://docs.aws.amazon.com/eks/latest/userguide/s3-csi.html"
EKS_S3_ADDON = "https://docs.aws.amazon.com/eks/latest/userguide/mountpoint-for-s3-add-on.html"
EKS_FSX_CSI = "https://docs.aws.amazon.com/eks/latest/userguide/fsx-csi-create.html"
EKS_POD_IDENTITY = "https://docs.aws.amazon.com/eks/latest/userguide/pod-id-agent-setup.html"
OKE_FSS = (
    "https://docs.oracle.com/en-us/iaas/Content/ContEng/Tasks/"
    "contengcreatingpersistentvolumeclaim_Provisioning_PVCs_on_FSS.htm"
)
OKE_NETWORK_POLICY = (
    "https://docs.oracle.com/en-us/iaas/Content/ContEng/Concepts/contengpodnetworking.htm "
    '("Example: Installing Calico and Setting Up Network Policies")'
)

VPC_CNI = "vpc-cni"
S3_CSI_ADDON = "aws-mountpoint-s3-csi-driver"
FSX_CSI_ADDON = "aws-fsx-csi-driver"
POD_IDENTITY_AGENT = "eks-pod-identity-agent"
S3_CSI_ACCOUNT = "kube-system/s3-csi-driver-sa"
FSX_CSI_ACCOUNT = "kube-system/fsx-csi-controller-sa"

ADDONS: tuple[Addon, ...] = (
    # GKE: Dataplane V2 enforces NetworkPolicy itself (and cannot be combined with the Calico
    # network policy add-on); the PD CSI driver is on by default; the FUSE driver is not.
    Addon(Cloud.GKE, Feature.HYPERDISK_ML, "gcePersistentDiskCsiDriverConfig",
          "addonsConfig.gcePersistentDiskCsiDriverConfig.enabled", Joined.REFUSED_WITHOUT,
          f"{GKE_PD_CSI}; {GKE_HYPERDISK}", confirmed=True),
    Addon(Cloud.GKE, Feature.GCS_FUSE, "gcsFuseCsiDriverConfig",
          "addonsConfig.gcsFuseCsiDriverConfig.enabled (with Workload Identity)",
          Joined.REFUSED_WITHOUT, GKE_GCS_FUSE, confirmed=True),
    Addon(Cloud.GKE, Feature.STORAGE_CLASS, "", "", Joined.NOT_LOOKED_UP, "", installed_here=False),
    Addon(Cloud.GKE, Feature.NETWORK_POLICY, "datapathProvider ADVANCED_DATAPATH",
          "datapathProvider: ADVANCED_DATAPATH (GKE Dataplane V2)", Joined.WARNED_WITHOUT,
          f"{GKE_NETWORK_POLICY}; {GKE_DATAPLANE_V2}",
          remedy="the network policy add-on (Dataplane V2 is chosen when a cluster is created)"),
    # EKS: the CSI drivers are EKS add-ons whose controllers take their AWS identity through
    # Pod Identity; the VPC CNI enforces NetworkPolicy once its add-on is told to.
    Addon(Cloud.EKS, Feature.S3_MOUNTPOINT, S3_CSI_ADDON,
          f"EKS add-on {S3_CSI_ADDON} with a role allowing the cache bucket",
          Joined.REFUSED_WITHOUT, f"{EKS_S3_CSI}; {EKS_S3_ADDON}", identity=S3_CSI_ACCOUNT,
          confirmed=True),
    Addon(Cloud.EKS, Feature.FSX_LUSTRE, FSX_CSI_ADDON,
          f"EKS add-on {FSX_CSI_ADDON} with AmazonFSxFullAccess", Joined.REFUSED_WITHOUT,
          EKS_FSX_CSI, identity=FSX_CSI_ACCOUNT),
    Addon(Cloud.EKS, Feature.STORAGE_CLASS, "", "", Joined.NOT_LOOKED_UP, "", installed_here=False),
    Addon(Cloud.EKS, Feature.POD_IDENTITY, POD_IDENTITY_AGENT, f"EKS add-on {POD_IDENTITY_AGENT}",
          Joined.REFUSED_WITHOUT, EKS_POD_IDENTITY),
    Addon(Cloud.EKS, Feature.NETWORK_POLICY, VPC_CNI,
          f'EKS add-on {VPC_CNI} with configuration {{"enableNetworkPolicy": "true"}}',
          Joined.WARNED_WITHOUT, EKS_NETWORK_POLICY),
    # OKE: the File Storage CSI plugin comes with every cluster. Oracle names Calico (its
    # policy-only manifest) for NetworkPolicy; no pinned chart of it exists to install and
    # check here, so the stack writes its policies unenforced and says so.
    Addon(Cloud.OKE, Feature.FILE_STORAGE, "fss.csi.oraclecloud.com", "", Joined.BUILT_IN,
          OKE_FSS, installed_here=False, confirmed=True),
    Addon(Cloud.OKE, Feature.STORAGE_CLASS, "", "", Joined.NOT_LOOKED_UP, "", installed_here=False),
    Addon(Cloud.OKE, Feature.NETWORK_POLICY, "Calico (policy-only)", "", Joined.NOT_LOOKED_UP,
          OKE_NETWORK_POLICY, installed_here=False),
    Addon(Cloud.EXISTING, Feature.STORAGE_CLASS, "", "", Joined.NOT_LOOKED_UP, "",
          installed_here=False),
    Addon(Cloud.EXISTING, Feature.NETWORK_POLICY, "the cluster's CNI", "", Joined.NOT_LOOKED_UP,
          "https://kubernetes.io/docs/concepts/services-networking/network-policies/",
          installed_here=False),
)  # fmt: skip
"""Every row; a cloud offers a model cache storage when it has a row for it (its default
first)."""

STORAGE_FEATURES = (
    Feature.HYPERDISK_ML, Feature.GCS_FUSE, Feature.S3_MOUNTPOINT, Feature.FSX_LUSTRE,
    Feature.FILE_STORAGE, Feature.STORAGE_CLASS,
)  # fmt: skip


def addon(cloud: Cloud, feature: Feature) -> Addon | None:
    """What `feature` needs on `cloud` (None: the cloud does not offer it)."""
    return next((a for a in ADDONS if a.cloud is cloud and a.feature is feature), None)


def storage_offered(cloud: Cloud) -> tuple[Feature, ...]:
    """The model cache storages `cloud` offers, its default first."""
    return tuple(a.feature for a in ADDONS if a.cloud is cloud and a.feature in STORAGE_FEATURES)
