"""The mig-inference policy pack; run it with `pulumi preview --policy-pack <this folder>`."""

from pulumi_policy import PolicyPack

from mig_inference.policy import policies

# Constructing the pack starts the analyzer's gRPC server and blocks: it only runs under Pulumi.
PolicyPack(
    name="mig-inference",
    policies=policies(),
    display_name="mig-inference: MIG GPU workloads and node pools",
    provider="kubernetes",
    tags=["mig-inference", "gpu", "mig", "kubernetes"],
)
