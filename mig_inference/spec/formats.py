"""Every string that reaches Kubernetes or a cloud API has a format here, and every number a
bound, each with where it comes from. The spec reader checks each stack key against one of them,
and the engine-argument check holds engine arguments to the same bounds as the keys that set them.

Sources (from each vendor's documentation as cited; not re-read online when this was written,
so the three node quotas below are marked unconfirmed):
- Kubernetes "Object Names and IDs" (DNS-1123 labels: 63 characters of `a-z0-9-`; subdomains:
  253 characters of `a-z0-9-.`, the format of Node names) and "Labels and Selectors" (keys: an
  optional DNS subdomain prefix of 253 characters and `/`, then a name of 63 of `A-Za-z0-9-_.`
  starting and ending alphanumeric; values: empty or 63 of the same). Taints: the API validates a
  taint key as a label key and a taint value as a label value, unique per (key, effect)
  (kubernetes/pkg/apis/core/validation: validateNodeTaints, "taints must be unique by key and
  effect pair"). Int32 fields (replicas, ports) take at most 2,147,483,647.
- Google Cloud "Creating and managing projects" (project IDs: 6 to 30 lowercase letters, digits
  or hyphens, starting with a letter, not ending with a hyphen); "Regions and zones" (regions
  like `us-central1`, zones like `us-central1-a`); "Creating a zonal cluster" (cluster names:
  up to 40 lowercase letters, digits or hyphens, starting with a letter); Compute Engine naming
  (networks and subnetworks: RFC 1035, 63 characters); persistent disks: at most 64 TB.
- Compute Engine reservations: a reservation's name is a Compute Engine name (RFC 1035, 63
  characters); GKE names a shared reservation `projects/<project>/reservations/<name>` (GKE
  "Consuming reserved zonal resources"). Amazon EC2 Capacity Reservation IDs: `cr-` and 17
  hexadecimal characters (EC2 "Resource IDs"; Capacity Blocks for ML are Capacity Reservations).
- AWS "Regions and Zones" (`us-east-1`, `eu-west-1`, `us-gov-west-1`, `cn-north-1`); Amazon
  EC2 "Resource IDs" (`subnet-`, `vpc-`, `sg-` and 8 or 17 hexadecimal characters); Amazon EBS
  volumes: at most 16 TiB (gp2/gp3); Amazon EKS quotas: 450 nodes per managed node group.
- Oracle Cloud "Resource Identifiers" (`ocid1.<resource type>.<realm>.[region][.future use].
  <unique ID>`); availability domains are named `<tenancy prefix>:<REGION>-AD-<n>`; boot volumes
  of 50 GB to 32 TB.
- Hugging Face Hub (huggingface_hub `validate_repo_id`): `namespace/name`, each part of letters,
  digits, `-`, `_`, `.`, at most 96 characters, no `--` or `..`, not starting or ending with `-`
  or `.`.
- Docker image references (distribution/reference grammar): `[registry[:port]/]path[:tag]
  [@sha256:digest]`, lowercase path components, tags of at most 128 characters.
- Hugging Face revisions (`hf download --revision`): a branch, a tag or a commit hash, or a pull
  request `refs/pr/<n>` (huggingface_hub's CLI examples); this project refuses `..` and other
  characters so the revision names a directory on the model cache as it is.
- Cloud Storage "Bucket naming rules": 3-63 characters of lowercase letters, digits, `-`, `_`
  and `.`, starting and ending with a letter or digit (dotted names up to 222 are not taken
  here). Amazon S3 "General purpose bucket naming rules": 3-63 characters of lowercase letters,
  digits, `.` and `-`, starting and ending with a letter or digit.
- Kubernetes StorageClass names are DNS subdomains (253). GCE Hyperdisk ML ("About Hyperdisk
  ML"): 4 GiB to 64 TiB, 400 to 1,200,000 MiB/s of provisioned throughput.
Bounds that no cloud or engine states (a model's layers, a throughput's smallest rate) are
marked `sanity` in their description: wide enough for any real model or service, narrow enough
that the arithmetic built on them stays exact.
"""

from __future__ import annotations

import re
from functools import cached_property

from msgspec import Struct

from mig_inference.errors import shown


class Format(Struct, frozen=True, dict=True):
    """A string format: what it is called, its pattern, its longest length, an example."""

    name: str
    pattern: str
    max_length: int
    example: str

    @cached_property
    def compiled(self) -> re.Pattern[str]:
        return re.compile(self.pattern)

    def problem(self, value: str) -> str | None:
        """Why `value` is not of this format, or None."""
        if len(value) > self.max_length:
            return f"{shown(value)} is longer than {self.max_length} characters ({self.name})"
        if not self.compiled.fullmatch(value):
            return f"{shown(value)} is not {self.name}, like {self.example}"
        return None


class Bound(Struct, frozen=True):
    """The smallest and largest value a number may take, and where the limit comes from."""

    minimum: float
    maximum: float
    source: str
    exclusive_minimum: bool = False
    minimum_source: str = ""
    """Why the minimum, when it comes from a limit too (ports below 1024)."""

    def problem(self, value: float) -> str | None:
        low_ok = value > self.minimum if self.exclusive_minimum else value >= self.minimum
        if not low_ok:
            sign = ">" if self.exclusive_minimum else ">="
            why = f" ({self.minimum_source})" if self.minimum_source else ""
            return f"must be {sign} {_number(self.minimum)}{why}, got {_number(value)}"
        if value > self.maximum:
            return f"must be <= {_number(self.maximum)} ({self.source}), got {_number(value)}"
        return None


def _number(value: float) -> str:
    if isinstance(value, int) or (float(value).is_integer() and abs(value) < 1e21):
        return f"{int(value):,}"
    return f"{value:g}"


_NAME63 = r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?"
_SUBDOMAIN = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"

DNS_LABEL = Format(
    "a DNS-1123 label (lowercase letters, digits, '-')",
    r"[a-z0-9]([-a-z0-9]*[a-z0-9])?",
    63,
    "chat-1",
)
NODE_NAME = Format(
    "a Kubernetes node name (a DNS-1123 subdomain: lowercase letters, digits, '-', '.')",
    _SUBDOMAIN,
    253,
    "gpu-node-01",
)
GCP_NODE_SERVICE_ACCOUNT = Format(
    "a service account email (<name>@<project>.iam.gserviceaccount.com), or the Compute Engine "
    "default service account: `default` or its email <project number>-compute@developer."
    "gserviceaccount.com",
    r"default|[a-z][a-z0-9-]{4,28}[a-z0-9]@[a-z][a-z0-9-]{4,28}[a-z0-9]\.iam\.gserviceaccount\.com"
    r"|[1-9][0-9]{0,18}-compute@developer\.gserviceaccount\.com",
    100,
    "gpu-nodes@my-gcp-project.iam.gserviceaccount.com",
)
"""Compute Engine "Service accounts": user-managed accounts are
<name>@<project ID>.iam.gserviceaccount.com (names of 6-30 characters), the Compute Engine default
service account is <project number>-compute@developer.gserviceaccount.com."""
AWS_PARTITIONS = {"aws", "aws-cn", "aws-us-gov", "aws-iso", "aws-iso-b", "aws-iso-e", "aws-iso-f"}
_PARTITION = "(" + "|".join(sorted(AWS_PARTITIONS)) + ")"
IAM_ROLE_ARN = Format(
    "an IAM role ARN (arn:<partition>:iam::<account>:role/[<path>/]<name>: a name of at most 64 "
    "of A-Z a-z 0-9 _ + = , . @ -)",
    rf"arn:{_PARTITION}:iam::\d{{12}}:role/([!-~]{{0,510}}/)?[A-Za-z0-9_+=,.@-]{{1,64}}",
    2048,
    "arn:aws:iam::123456789012:role/gpu-nodes",
)
r"""IAM "IAM and AWS STS quotas" and the IAM API's Role: role names of 1-64 characters of
[\w+=,.@-] (ASCII word characters: Python's \w would take any Unicode letter), paths of up to
512 printable ASCII characters between slashes."""
IAM_POLICY_ARN = Format(
    "an IAM policy ARN (arn:<partition>:iam::<account or aws>:policy/[<path>/]<name>: a name "
    "of at most 128 of A-Z a-z 0-9 _ + = , . @ -)",
    rf"arn:{_PARTITION}:iam::(\d{{12}}|aws):policy/([!-~]{{0,510}}/)?[A-Za-z0-9_+=,.@-]{{1,128}}",
    2048,
    "arn:aws:iam::123456789012:policy/boundary",
)


def aws_partition(region: str) -> str:
    """The partition of an AWS region (AWS General Reference, "Amazon Resource Names": aws,
    aws-cn for China, aws-us-gov for GovCloud; the ISO partitions as botocore names them)."""
    for prefix, partition in (("cn-", "aws-cn"), ("us-gov-", "aws-us-gov"),
                              ("us-isob-", "aws-iso-b"), ("us-iso-", "aws-iso"),
                              ("eu-isoe-", "aws-iso-e"), ("us-isof-", "aws-iso-f")):  # fmt: skip
        if region.startswith(prefix):
            return partition
    return "aws"


IMDS_HOP_LIMIT = Bound(1, 64, "EC2 instance metadata options: HttpPutResponseHopLimit is 1 to 64")
"""AWS EKS Best Practices Guide (security, "Restrict access to the instance profile assigned to
the worker node"): with IMDSv2 required, a hop limit of 1 keeps pods that are not on the host
network from reaching the node's credentials; Pod Identity and IRSA do not need IMDS."""
GKE_BOOT_DISK_TYPES = (
    "pd-standard", "pd-balanced", "pd-ssd", "hyperdisk-balanced", "hyperdisk-extreme",
    "hyperdisk-throughput",
)  # fmt: skip
"""GKE node boot disk types (GKE "Configuring node disks"); which of them a GPU machine takes is
in mig_inference/clouds/capacity.py."""
EC2_USER_DATA_BYTES = 16 * 1024
"""EC2: user data is limited to 16 KB, before base64 encoding (EC2 "Run commands when you launch
an EC2 instance with user data input")."""
AWS_TAG_KEY = Format(
    "an AWS tag key (letters, digits, spaces and _ . : / = + - @; not starting with 'aws:' in "
    "any case)",
    r"(?!(?i:aws:))[\w .:/=+\-@]+",
    128,
    "team",
)
AWS_TAG_VALUE = Format(
    "an AWS tag value (letters, digits, spaces and _ . : / = + - @; not starting with 'aws:' in "
    "any case)",
    r"(?!(?i:aws:))[\w .:/=+\-@]*",
    256,
    "ml",
)
AWS_TAGS_MAX = 50
"""AWS "Tag naming limits and requirements": at most 50 user tags per resource, keys of 1-128
and values of 0-256 characters; `aws:`, `AWS:` or any other case is reserved as a prefix of keys
and of values."""
AUTOSCALING_TAG_KEY_MAX = 128
"""EC2 Auto Scaling API `Tag`: keys of 1-128 characters, values of 0-256."""
AUTOSCALING_TAGS_MAX = 50
"""AWS "Tag naming limits and requirements": at most 50 user tags per resource, an Auto
Scaling group included."""
EKS_AUTOSCALING_GROUP_TAGS = 5
"""The tags EKS itself puts on a managed node group's Auto Scaling group (eks:cluster-name,
eks:nodegroup-name, k8s.io/cluster-autoscaler/enabled, k8s.io/cluster-autoscaler/<cluster>,
kubernetes.io/cluster/<cluster>): unconfirmed, taken from groups seen, not from a document."""
GCP_LABEL_KEY = Format(
    "a Google Cloud label key (lowercase letters, digits, '_' and '-', starting with a letter)",
    r"[a-z][a-z0-9_-]*",
    63,
    "team",
)
GCP_LABEL_VALUE = Format(
    "a Google Cloud label value (lowercase letters, digits, '_' and '-')", r"[a-z0-9_-]*", 63, "ml"
)
GCP_LABELS_MAX = 64
"""Google Cloud "Requirements for labels": at most 64 per resource; keys 1-63 characters
starting with a lowercase letter, values 0-63; lowercase letters, digits, `_` and `-`
(international lowercase letters are allowed there too, not here)."""
OCI_FREEFORM_TAG_KEY = Format(
    "an OCI freeform tag key (printable characters, no spaces)", r"[^\s]+", 100, "team"
)
OCI_DEFINED_TAG_KEY = Format(
    "an OCI defined tag `<namespace>.<key>` (no spaces or further periods)",
    r"[^\s.]{1,100}\.[^\s.]{1,100}",
    201,
    "Operations.CostCenter",
)
OCI_TAG_VALUE = Format("an OCI tag value", r"[^\n]*", 256, "ml")
"""Oracle Cloud "Tagging Limits": tag keys and namespaces up to 100 characters, values up to 256
(unconfirmed here: the page was not in reach; no count per resource is enforced)."""
LABEL_VALUE = Format(
    "a label value (letters, digits, '-', '_', '.', starting and ending alphanumeric)",
    f"({_NAME63})?",
    63,
    "kube-prometheus-stack",
)
LABEL_KEY = Format(
    "a label key ([DNS subdomain prefix/]name of letters, digits, '-', '_', '.')",
    rf"({_SUBDOMAIN}/)?{_NAME63}",
    253 + 1 + 63,
    "example.com/team",
)
TAINT_KEY = Format(
    LABEL_KEY.name.replace("label", "taint"),
    LABEL_KEY.pattern,
    LABEL_KEY.max_length,
    "nvidia.com/gpu",
)
TAINT_VALUE = Format(LABEL_VALUE.name.replace("label", "taint"), LABEL_VALUE.pattern, 63, "present")
LABEL_NAME_MAX = 63
"""The name part of a label or taint key (after any prefix)."""
LABEL_PREFIX_MAX = 253

GCP_PROJECT = Format(
    "a Google Cloud project ID (6-30 lowercase letters, digits or '-', starting with a letter)",
    r"[a-z][-a-z0-9]{4,28}[a-z0-9]",
    30,
    "my-gcp-project",
)
GCP_REGION = Format("a Google Cloud region", r"[a-z]+-[a-z]+[0-9]+", 40, "us-central1")
GCP_ZONE = Format("a Google Cloud zone", r"[a-z]+-[a-z]+[0-9]+-[a-z]", 42, "us-central1-a")
GCP_LOCATION = Format(
    "a Google Cloud region or zone", r"[a-z]+-[a-z]+[0-9]+(-[a-z])?", 42, "us-central1"
)
GCP_RESOURCE = Format(
    "a Compute Engine name (RFC 1035: a lowercase letter, then letters, digits, "
    "'-') or a resource path",
    r"([a-z]([-a-z0-9]*[a-z0-9])?|projects/"
    r"[a-z][-a-z0-9]*/(global|regions/[a-z0-9-]+)/[a-z]+/[a-z]([-a-z0-9]*"
    r"[a-z0-9])?)",
    255,
    "gpu-vpc",
)
GKE_CLUSTER = Format(
    "a GKE cluster name (a lowercase letter, then lowercase letters, digits, '-')",
    r"[a-z]([-a-z0-9]*[a-z0-9])?",
    40,
    "inference-1",
)
CLUSTER_NAME = Format("a cluster name (a DNS-1123 label)", DNS_LABEL.pattern, 40, "inference-1")
AWS_REGION = Format("an AWS region", r"[a-z]{2}(-gov|-iso[a-z]?)?-[a-z]+-[0-9]", 25, "us-east-1")
AWS_SUBNET = Format(
    "an EC2 subnet ID (subnet- and 8 or 17 hexadecimal digits)",
    r"subnet-([0-9a-f]{8}|[0-9a-f]{17})",
    24,
    "subnet-0a1b2c3d4e5f60718",
)
AWS_VPC = Format(
    "an EC2 VPC ID (vpc- and 8 or 17 hexadecimal digits)",
    r"vpc-([0-9a-f]{8}|[0-9a-f]{17})",
    21,
    "vpc-0a1b2c3d4e5f60718",
)
EKS_VERSION = Format("an EKS Kubernetes version", r"1\.[0-9]{1,2}", 5, "1.35")
GKE_MINOR_VERSION = Format("a GKE Kubernetes minor version", r"1\.[0-9]{1,2}", 5, "1.35")
"""`min_master_version` as the stack writes it: a minor, which GKE resolves to the latest patch of
it the cluster's release channel offers (GKE, "Versioning": versions may be given as `1.X`)."""
OKE_VERSION = Format("an OKE Kubernetes version", r"v1\.[0-9]{1,2}\.[0-9]{1,3}", 10, "v1.34.2")
AVAILABILITY_DOMAIN = Format(
    "an OCI availability domain",
    r"[A-Za-z0-9]{1,8}:[A-Z0-9-]+-AD-[1-3]",
    63,
    "Uocm:US-CHICAGO-1-AD-1",
)
IPV4_CIDR = Format(
    "an IPv4 CIDR block",
    r"((25[0-5]|2[0-4][0-9]|1?[0-9]?[0-9])\.){3}"
    r"(25[0-5]|2[0-4][0-9]|1?[0-9]?[0-9])/([0-9]|[12][0-9]|3[0-2])",
    18,
    "203.0.113.0/24",
)
EKS_PUBLIC_ACCESS_CIDRS_MAX = 40
"""Amazon EKS service quotas: "Public endpoint access CIDR ranges per cluster": 40."""
EKS_RESERVED_RANGES = ("0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8",
                       "169.254.0.0/16", "172.16.0.0/12", "192.0.0.0/24", "192.168.0.0/16",
                       "198.18.0.0/15", "224.0.0.0/4", "240.0.0.0/4")  # fmt: skip
"""EKS "Cluster API server endpoint": a public access block "cannot include reserved addresses"
(the IANA special-purpose ranges: this network, private, shared, loopback, link-local, IETF
protocol, benchmarking, multicast, reserved). A block inside one of them is refused; the
documentation ranges are left alone (EKS's own example is 203.0.113.5/32), and 0.0.0.0/0 is
EKS's default."""
GKE_AUTHORIZED_NETWORKS_MAX = 100
"""GKE "Add authorized networks for control plane access": up to 100 authorized networks on a
cluster with private nodes (50 with public nodes); the clusters this project creates have
private nodes."""
GKE_RELEASE_CHANNEL = Format(
    "a GKE release channel (RAPID, REGULAR, STABLE or EXTENDED)",
    "RAPID|REGULAR|STABLE|EXTENDED",
    8,
    "REGULAR",
)


def ocid(resource: str) -> Format:
    """An Oracle Cloud ID of one resource type."""
    return Format(
        f"an OCI {resource} OCID (ocid1.{resource}.<realm>.[region].<unique ID>)",
        rf"ocid1\.{resource}\.[a-z0-9]+\.[a-z0-9-]*(\.[a-z0-9-]*)?\.[a-z0-9]+",
        255,
        f"ocid1.{resource}.oc1.us-chicago-1.aaaaaaaa...",
    )


_HF_PART = r"[A-Za-z0-9]([A-Za-z0-9_]|[-.](?![-.]))*[A-Za-z0-9_]|[A-Za-z0-9]"
HF_MODEL = Format(
    "a Hugging Face model ID (namespace/name of letters, digits, '-', '_', '.'; "
    "no '--' or '..') or an absolute path without '..'",
    rf"(({_HF_PART})/)?({_HF_PART})|/([A-Za-z0-9_.=+-]+/?)*",
    200,
    "mistralai/Mistral-Nemo-Instruct-2407",
)
MODEL_REPOSITORY = Format(
    "a Triton model repository (an absolute path or an s3://, gs:// or as:// URL)",
    r"(/|(s3|gs|as)://)[A-Za-z0-9_.=+:@/-]*",
    1024,
    "s3://bucket/models",
)
IMAGE = Format(
    "a container image reference ([registry/]path[:tag][@sha256:digest])",
    r"([A-Za-z0-9.-]+(:[0-9]+)?/)?[a-z0-9]+([._-][a-z0-9]+)*(/[a-z0-9]+([._-][a-z0-9]+)*)*"
    r"(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(@sha256:[0-9a-f]{64})?",
    512,
    "vllm/vllm-openai:v0.33.0",
)
GCP_RESERVATION = Format(
    "a Compute Engine reservation name (RFC 1035, 63 characters) or a shared one as "
    "projects/<project>/reservations/<name>",
    r"(projects/[a-z][-a-z0-9]{4,28}[a-z0-9]/reservations/)?[a-z]([-a-z0-9]{0,61}[a-z0-9])?",
    128,
    "h100-reservation",
)
AWS_CAPACITY_RESERVATION = Format(
    "an EC2 Capacity Reservation ID (cr- and 17 hexadecimal digits; Capacity Blocks are "
    "Capacity Reservations too)",
    r"cr-[0-9a-f]{17}",
    20,
    "cr-0a1b2c3d4e5f60718",
)
GKE_MACHINE = Format(
    "a Compute Engine machine type", r"[a-z][a-z0-9]*-[a-z0-9-]+", 63, "a3-highgpu-8g"
)
EC2_INSTANCE = Format("an EC2 instance type", r"[a-z][a-z0-9-]*\.[a-z0-9-]+", 63, "p4d.24xlarge")
OKE_SHAPE = Format("an OCI shape", r"(BM|VM)\.[A-Za-z0-9.-]+", 63, "BM.GPU.H100.8")
MIG_PROFILE = Format(
    "a MIG profile (<compute>g.<memory>gb, + an option like +me), `gpu` (a whole GPU) or `auto`",
    r"auto|gpu|[1-8]g\.[0-9]{1,4}gb(\+[a-z]+(\.[a-z]+)?)?",
    24,
    "3g.40gb",
)
"""NVIDIA's profile names (`nvidia-smi mig -lgip`: 1g.10gb, 1g.10gb+me, 1g.24gb+me.all); which
of them a GPU has is the catalog's."""
URL_PATH = Format("an HTTP path", r"/[A-Za-z0-9._~!$&'()*+,;=:@%/-]*", 1024, "/health")
HF_REVISION = Format(
    "a Hugging Face revision (a branch, tag or commit hash, or refs/pr/<n>)",
    r"(?!.*\.\.)[A-Za-z0-9][A-Za-z0-9._-]*|refs/pr/[0-9]+",
    255,
    "main",
)
_IP_SHAPED = r"(?![0-9]+\.[0-9]+\.[0-9]+\.[0-9]+$)"
GCS_BUCKET = Format(
    "a Cloud Storage bucket name (3-63 lowercase letters, digits, '-', '_', '.'; not an IP "
    "address, not starting with 'goog', not containing 'google' or a close misspelling)",
    rf"{_IP_SHAPED}(?!goog)(?!.*g[o0][o0]g[l1]e)(?!.*\.\.)[a-z0-9][-a-z0-9_.]{{1,61}}[a-z0-9]",
    63,
    "my-models",
)
"""Cloud Storage "Bucket naming": 3-63 characters of lowercase letters, digits, '-', '_' and '.',
starting and ending with a letter or digit, not an IP address in dotted-decimal notation, not
starting with "goog", not containing "google" or close misspellings such as "g00gle" (read here
as g, two of o/0, g, l/1, e). Dotted names of up to 222 characters are not taken here."""
S3_BUCKET = Format(
    "an S3 bucket name (3-63 lowercase letters, digits, '-', '.'; not an IP address, none of "
    "S3's reserved prefixes xn--, sthree-, amzn-s3-demo- or suffixes -s3alias, --ol-s3, .mrap, "
    "--x-s3, --table-s3)",
    rf"{_IP_SHAPED}(?!xn--|sthree-|amzn-s3-demo-)(?!.*(-s3alias|--ol-s3|\.mrap|--x-s3|--table-s3)$)"
    r"(?!.*\.\.)[a-z0-9][-a-z0-9.]{1,61}[a-z0-9]",
    63,
    "my-models",
)
"""Amazon S3 "General purpose bucket naming rules": 3-63 characters of lowercase letters, digits,
'.' and '-', starting and ending with a letter or digit, no two adjacent periods, not formatted
as an IP address, not starting with xn--, sthree- or amzn-s3-demo-, not ending with -s3alias,
--ol-s3, .mrap, --x-s3 or --table-s3."""
GCS_LOCATION = Format(
    "a Cloud Storage region (like US-CENTRAL1)", r"[A-Za-z]+-[A-Za-z]+[0-9]+", 40, "US-CENTRAL1"
)
"""Cloud Storage "Bucket locations": a regional bucket's location is a region name, in any
case (the API answers in upper case)."""
STORAGE_CLASS = Format("a StorageClass name (a DNS-1123 subdomain)", _SUBDOMAIN, 253, "nfs-rwx")
AWS_SECURITY_GROUP = Format(
    "an EC2 security group ID (sg- and 8 or 17 hexadecimal digits)",
    r"sg-([0-9a-f]{8}|[0-9a-f]{17})",
    20,
    "sg-0a1b2c3d4e5f60718",
)
CONFIG_KEY_NAME = Format(
    "a config key name of this project (no spaces or ':')",
    r"[^\s:]+",
    256,
    "hfToken",
)
"""The name of a config key (`pulumi config set --secret <name>`): Pulumi's config.ParseKey
takes `<namespace>:<name>`, so a name holds no ':'; 256 characters is this project's bound."""
CONTEXT = Format("a kubeconfig context name", r"[^\s\x00-\x1f][^\x00-\x1f]*", 253, "lab-admin")
ARGUMENT = Format(
    "an argument without control characters",
    r"[^\x00-\x08\x0a-\x1f]*",
    65536,
    "--enable-prefix-caching",
)

INT32 = 2**31 - 1
_K8S_INT32 = "the Kubernetes API's int32 fields"
REPLICAS = Bound(1, INT32, _K8S_INT32)
PORT = Bound(
    1024,
    65535,
    "a TCP port",
    minimum_source="inference pods run as a non-root user without NET_BIND_SERVICE, so they "
    "cannot listen below 1024",
)
NODES: dict[str, Bound] = {
    "gke": Bound(0, 15000, "GKE: 15,000 nodes per Standard cluster (GKE quotas; unconfirmed)"),
    "eks": Bound(0, 450, "Amazon EKS quotas: 450 nodes per managed node group (unconfirmed)"),
    "oke": Bound(0, 1000, "OKE: 1,000 worker nodes per basic cluster (unconfirmed)"),
    "existing": Bound(0, 5000, "Kubernetes' largest supported cluster: 5,000 nodes"),
}
DISK_GB: dict[str, Bound] = {
    "gke": Bound(10, 65536, "GKE boot disks: 10 GB to 64 TB"),
    "eks": Bound(1, 16384, "Amazon EBS gp3: at most 16 TiB"),
    "oke": Bound(50, 32768, "OCI boot volumes: 50 GB to 32 TB"),
    "existing": Bound(1, 65536, "the largest boot disk of the clouds here (64 TB)"),
}
DISK_GB_MINIMUM = 50
"""The project's own floor: GPU images, the driver and engine images need tens of GB."""
MAX_PODS = Bound(1, 1000, "sanity: above every cloud's per-node limit (at most 737 on EKS)")
SYSTEM_PODS = Bound(0, 1000, "sanity: at most MAX_PODS")
MAX_UNAVAILABLE = Bound(1, 5000, "at most the nodes of a cluster (5,000)")
TOKENS = Bound(1, 10_000_000, "sanity: the longest context windows published are 10M tokens")
CONCURRENCY = Bound(1, 1_000_000, "sanity: sequences in flight per replica")
LAYERS = Bound(1, 1024, "sanity: published models have at most a few hundred layers")
HEADS = Bound(1, 1024, "sanity: attention heads per layer")
HEAD_DIM = Bound(1, 4096, "sanity: attention head width")
PARAMS_BILLION = Bound(0, 100_000, "sanity: 100 trillion parameters", exclusive_minimum=True)
OVERHEAD_FACTOR = Bound(
    1,
    4,
    "sanity: a multiplier on weights plus KV cache",
    minimum_source="below 1 would need less than the weights",
)
MEMORY_GIB = Bound(0, 1024, "sanity: no device holds more", exclusive_minimum=True)
REQUESTS_PER_SECOND = Bound(
    1e-6, 1e9, "sanity: one request in 11.6 days to a billion a second", exclusive_minimum=False
)
LATENCY_MS = Bound(0, 3_600_000, "sanity: an hour", exclusive_minimum=True)
CACHE_SIZE_GIB = Bound(1, 65536, "Hyperdisk ML holds at most 64 TiB; sanity for the other storage")
HYPERDISK_ML_THROUGHPUT = Bound(
    400,
    1_200_000,
    "Hyperdisk ML: at most 1,200,000 MiB/s per volume",
    minimum_source="Hyperdisk ML: at least 400 MiB/s per volume",
)
READ_MB_PER_S = Bound(0, 1_000_000, "sanity: a terabyte a second", exclusive_minimum=True)
STARTUP_SECONDS = Bound(60, 24 * 3600, "sanity: a day for one replica to load its model")
PROMPTS = Bound(1, 1_000_000, "sanity: prompts per profiling run")

# The serving check (`verify`) and ephemeral stacks (`ephemeral`).
DURATION = Format(
    "a duration of days, hours and minutes (`90m`, `2h`, `1h30m`, `1d`)",
    r"(?=[0-9])([0-9]+d)?([0-9]+h)?([0-9]+m)?",
    16,
    "2h",
)
TTL_MINUTES = Bound(10, 7 * 24 * 60, "sanity: a test cluster lives between 10 minutes and 7 days")
MAX_COST_USD = Bound(
    0, 1_000_000, "sanity: US dollars one test cluster may cost", exclusive_minimum=True
)
VERIFY_TIMEOUT_SECONDS = Bound(
    30, 3600, "sanity: how long one service's check may wait for its answers"
)
VERIFY_MAX_TOKENS = Bound(1, 256, "sanity: tokens of the short completion the check asks for")
HTTP_METHOD = Format("an HTTP method (GET or POST)", "GET|POST", 4, "GET")
HTTP_STATUS = Bound(100, 599, "RFC 9110: HTTP status codes are 100 to 599")
PROBE_TEXT = Format(
    "text without control characters other than tabs and line breaks",
    r"[^\x00-\x08\x0b\x0c\x0e-\x1f]*",
    4096,
    "Say hello.",
)

# Formats of what the program itself sends (names it derives, fixed fields), that the registry
# in mig_inference.spec.api_fields maps each rendered field to.
EKS_NODE_LABEL_KEY_MAX = 63
EKS_NODE_LABEL_VALUE = Format(
    "an EKS node group label value (1-63 letters, digits, '-', '_', '.', starting and ending "
    "alphanumeric; EKS takes no empty value)",
    _NAME63,
    63,
    "ml",
)
"""Amazon EKS API `CreateNodegroup` / `UpdateLabelsPayload`: label keys and values of 1-63
characters each (the key with its prefix: tighter than Kubernetes' 253 + 63)."""
EKS_TAINTS_MAX = 50
EKS_TAINT_KEY_MAX = 63
"""Amazon EKS API `CreateNodegroup` (`taints`: at most 50 per node group) and `Taint` (key of
1-63 characters, value of 0-63)."""
EKS_NODE_GROUP_NAME = Format(
    "an EKS node group name (a letter or digit, then letters, digits, '-', '_')",
    r"[0-9A-Za-z][A-Za-z0-9_-]*",
    63,
    "gpu-pool-1a2b3c",
)
"""Amazon EKS API `CreateNodegroup`: `nodegroupName` of 1-63 characters,
`^[0-9A-Za-z][A-Za-z0-9\\-_]*`."""
EKS_CLUSTER_NAME = Format(
    "an EKS cluster name (a letter or digit, then letters, digits, '-', '_')",
    r"[0-9A-Za-z][A-Za-z0-9_-]*",
    100,
    "inference-1",
)
"""Amazon EKS API `CreateCluster`: `name` of 1-100 characters, `^[0-9A-Za-z][A-Za-z0-9\\-_]*$`."""
GKE_NODE_POOL_NAME = Format(
    "a GKE node pool name (a lowercase letter, then lowercase letters, digits, '-')",
    r"[a-z]([-a-z0-9]*[a-z0-9])?",
    40,
    "gpu-pool-1a2b3c",
)
"""GKE refuses node pool names longer than 40 characters (the API's error; RFC 1035 like the
cluster's name). Unconfirmed in a reference page: taken from the API's answer as reported."""
GCP_SERVICE_ACCOUNT_ID = Format(
    "a service account ID (6-30 lowercase letters, digits, '-', starting with a letter)",
    r"[a-z][-a-z0-9]{4,28}[a-z0-9]",
    30,
    "gpu-nodes",
)
"""IAM API `projects.serviceAccounts.create`: `accountId` of 6-30 characters,
`[a-z]([-a-z0-9]*[a-z0-9])`."""
OCI_DISPLAY_NAME = Format(
    "an OCI display name (1-255 characters without control characters)",
    r"[^\x00-\x1f]+",
    255,
    "gpu-pool",
)
"""OCI Container Engine API `CreateClusterDetails` / `CreateNodePoolDetails`: `name` of 1-255
characters."""
IAM_DESCRIPTION = Format(
    "an IAM role description (up to 1,000 printable Latin-1 characters)",
    r"[\t\n\r\x20-\x7e\xa1-\xff]*",
    1000,
    "GPU nodes",
)
"""IAM API `CreateRole`: `Description` of 0-1,000 characters of
`[\\u0009\\u000A\\u000D\\u0020-\\u007E\\u00A1-\\u00FF]*`."""
EC2_LAUNCH_TEMPLATE_DESCRIPTION = Format(
    "an EC2 launch template description (up to 255 characters)", r"[^\x00]*", 255, "GPU pool"
)
"""EC2 API `CreateLaunchTemplate`: `VersionDescription` of up to 255 characters."""
EC2_USER_DATA_BASE64 = Format(
    "base64 of at most 16 KB (EC2 user data)",
    r"[A-Za-z0-9+/]*={0,2}",
    -(-EC2_USER_DATA_BYTES // 3) * 4,
    "IyEvYmluL2Jhc2g=",
)
OCI_METADATA_BYTES = 32_000
"""OCI Compute API `LaunchInstanceDetails`: `metadata` and `extendedMetadata` together hold at
most 32,000 bytes (a node pool's `nodeMetadata` is the instances' metadata)."""
OCI_USER_DATA_BASE64 = Format(
    "base64 within OCI's 32,000 bytes of instance metadata",
    r"[A-Za-z0-9+/]*={0,2}",
    OCI_METADATA_BYTES,
    "IyEvYmluL2Jhc2g=",
)
AUTOSCALING_TAG_KEY = Format(
    "an EC2 Auto Scaling tag key (1-128 characters)", r"[^\x00]+", AUTOSCALING_TAG_KEY_MAX, "team"
)
AUTOSCALING_TAG_VALUE = Format("an EC2 Auto Scaling tag value", r"[^\x00]*", 256, "ml")
HELM_RELEASE_NAME = Format(
    "a Helm release name (a DNS-1123 subdomain of at most 53 characters)",
    _SUBDOMAIN,
    53,
    "gpu-operator",
)
"""Helm (pkg/chartutil ValidateReleaseName): a release name is a DNS-1123 subdomain of at most
53 characters (the rest of 63 is left for the suffixes charts add)."""
SERVICE_NAME = Format(
    "a Kubernetes Service name (a DNS-1035 label: a lowercase letter, then lowercase letters, "
    "digits, '-')",
    r"[a-z]([-a-z0-9]*[a-z0-9])?",
    63,
    "chat",
)
"""Kubernetes `ValidateServiceName` is `NameIsDNS1035Label` (the relaxed validation of KEP-5311
is beta only from 1.36, behind a gate)."""
OBJECT_NAME = Format(
    "a Kubernetes object name (a DNS-1123 subdomain)", _SUBDOMAIN, 253, "gpu-operator"
)
RBAC_NAME = Format(
    "an RBAC object name (a path segment: no '/' or '%', not '.' or '..')",
    r"(?!\.\.?$)[^/%]+",
    253,
    "mig-inference:repartition",
)
"""Kubernetes `ValidateRBACName` is `path.IsValidPathSegmentName`; 253 is the etcd key bound
every object name keeps."""
ANNOTATIONS_TOTAL_BYTES = 256 * 1024
"""Kubernetes `ValidateAnnotations`: keys are qualified names like label keys, and all keys and
values of an object together hold at most 256 KiB (TotalAnnotationSizeLimitB)."""
