"""Per-cloud wiring: the cloud provider, the cluster (created or joined) and its GPU pools.

Each cloud's modules are imported only in its own branch: a cloud's SDK is an extra of the
package (see cloud_sdk)."""

import os
from collections.abc import Mapping, Sequence
from functools import partial
from typing import Any

import pulumi
from msgspec import Struct, field

from mig_inference.clouds import Cloud
from mig_inference.clouds.addons import Feature, Joined
from mig_inference.names.digest import short_hash
from mig_inference.plan import StackPlan
from mig_inference.plan.addons import Need, needed_addons
from mig_inference.plan.gateway import gateway_apis, needs_load_balancer_controller
from mig_inference.spec import key_path
from mig_inference.spec.dra import joined_version_problem

from ..clouds.cloud_sdk import require_cloud_sdk
from ..clouds.existing import ExistingNodePool, ExistingNodePoolArgs
from ..clouds.oci_sign_in import oci_provider_sign_in
from ..stack_args import Stack, cluster_input, cluster_reference, nth


class Children(Struct, frozen=True):
    """How `MigInference` names and places its direct children."""

    parent: pulumi.Resource
    """The `MigInference` component."""
    prefix: str
    """Prepended to every child's name, so that two instances in one program do not collide."""
    aliases: tuple[pulumi.Alias, ...] = ()
    """Where the children lived before (the stack program's own instance only)."""

    def name(self, what: str) -> str:
        return f"{self.prefix}{what}"

    def opts(
        self,
        providers: Sequence[pulumi.ProviderResource | None] = (),
        depends_on: Sequence[pulumi.Resource] = (),
    ) -> pulumi.ResourceOptions:
        given = [provider for provider in providers if provider is not None]
        return pulumi.ResourceOptions(
            parent=self.parent,
            providers=given or None,
            depends_on=list(depends_on) or None,
            aliases=list(self.aliases) or None,
        )


def program_children(parent: pulumi.Resource) -> Children:
    """Children of the stack program's `MigInference`: up to 0.1 the program created them, with
    these names, at the top of the stack. The aliases keep a stack deployed then from replacing
    them (Pulumi derives their own children's aliases from these)."""
    return Children(parent, "", (pulumi.Alias(parent=pulumi.ROOT_STACK_RESOURCE),))


class JoinedCluster(Struct):
    """The cluster a stack's pools join."""

    cloud_provider: pulumi.ProviderResource | None
    """The cloud's provider, configured from the stack (None for `existing`)."""
    ref: pulumi.Input[str]
    """Cluster name (GKE, EKS) or OCID (OKE) the pools join."""
    kubeconfig: pulumi.Output[str] | None = None
    """Kubeconfig of a cluster this stack created (a secret)."""
    kubernetes_version: pulumi.Input[str] | None = None
    """OKE: the version node pools run (the cluster's unless the stack names one)."""
    cluster_type: pulumi.Input[str] | None = None
    """OKE: BASIC_CLUSTER or ENHANCED_CLUSTER (add-ons need an enhanced one)."""
    compartment_id: pulumi.Input[str] | None = None
    """OKE: the compartment of the cluster and its node pools."""
    created: list[pulumi.Resource] = field(default_factory=list)
    """The cluster component when this stack created it."""
    outputs: pulumi.Output[dict[str, Any]] | None = None
    """What the cloud made for a created cluster (endpoint, CA, identity, ...), else None."""


CLOUD_PACKAGES = {Cloud.GKE: "gcp", Cloud.EKS: "aws", Cloud.OKE: "oci"}
"""The Pulumi package of each cloud's provider."""


def given_provider(parent: pulumi.Resource, package: str) -> pulumi.ProviderResource | None:
    """The provider for `package` the caller gave `parent` (`opts.provider`, `opts.providers`,
    or inherited from the caller's own parent), as a child of `parent` would use it."""
    return parent.get_provider(f"{package}::")


def _cloud_provider(
    stack: Stack, plan: StackPlan, children: Children
) -> pulumi.ProviderResource | None:
    """The caller's provider for the stack's cloud; a provider configured from the stack only
    when the caller gave none (as pulumi-eks does)."""
    package = CLOUD_PACKAGES.get(plan.spec.cloud)
    if package is None:
        return None
    given = given_provider(children.parent, package)
    if given is not None:
        return given
    settings = plan.spec.cluster
    opts = children.opts()
    if plan.spec.cloud is Cloud.GKE:
        import pulumi_gcp as gcp

        project = cluster_input(stack, "project", settings.get("project"))
        return gcp.Provider(children.name("gcp"), project=project, opts=opts)
    if plan.spec.cloud is Cloud.EKS:
        import pulumi_aws as aws

        return aws.Provider(children.name("aws"), region=settings.get("region"), opts=opts)
    import pulumi_oci as oci

    # The stack's `oci:` settings, read by their config keys: the SDK's typed stub and its runtime
    # module spell the profile differently (configFileProfile / config_file_profile).
    oci_config = pulumi.Config("oci")
    sign_in = oci_provider_sign_in(
        oci_config.get("auth"), oci_config.get("configFileProfile"), os.environ
    )
    return oci.Provider(
        children.name("oci"),
        auth=sign_in.auth,
        config_file_profile=sign_in.profile,
        opts=opts,
    )


def cluster(stack: Stack, plan: StackPlan, children: Children) -> JoinedCluster:
    """Create the cluster (ephemeral stacks) or refer to the one the stack names (by name or
    OCID, as given: an Output of another resource stays one)."""
    spec = plan.spec
    settings = spec.cluster
    name = cluster_reference(stack, "name")
    if settings.create and not isinstance(name, str):
        raise pulumi.RunError(
            "mig-inference:cluster.name: must be a plain string when create is true: it names "
            "the cluster and its resources (an Output may name a cluster the stack joins)"
        )
    require_cloud_sdk(spec.cloud)
    provider = _cloud_provider(stack, plan, children)
    given = partial(cluster_input, stack)
    needs = needed_addons(plan)
    features = {need.feature for need in needs}
    if settings.create and spec.cloud is Cloud.GKE:
        from .gke import GKE_RELEASE_CHANNEL, GkeCluster, GkeClusterArgs

        gke_args = GkeClusterArgs(
            name=settings.name,
            location=settings.get("location"),
            network=given("network", settings.get("network")),
            subnetwork=given("subnetwork", settings.get("subnetwork")),
            # The spec chose one by the cluster's name when the stack names none.
            master_ipv4_cidr_block=settings.get("masterIpv4CidrBlock"),
            authorized_networks=list(settings.get("authorizedNetworks")),
            release_channel=settings.get("releaseChannel") or GKE_RELEASE_CHANNEL,
            protect=settings.protect,
            cloud_nat=settings.get("cloudNat"),
            project=given("project", settings.get("project")),
            labels=dict(spec.cloud_tags.tags),
            network_policy=Feature.NETWORK_POLICY in features,
            gcs_fuse_csi_driver=Feature.GCS_FUSE in features,
            pd_csi_driver=Feature.HYPERDISK_ML in features,
            gateway_api=spec.gateway is not None,
            services=list(gateway_apis(plan.gateway)),
        )
        if spec.dra is not None:
            # The DRA objects are written for this minor: the cluster starts at it.
            gke_args["min_master_version"] = spec.dra.kubernetes_version
        gke = GkeCluster(
            children.name(settings.name),
            gke_args,
            children.opts([provider]),
        )
        created_name: pulumi.Input[str] = gke.cluster_name
        if plan.gateway is not None:
            from .gke_gateway import created_gateway_checked

            created_name = created_gateway_checked(
                gke.cluster_name,
                plan,
                given("network", settings.get("network")),
                given("project", settings.get("project")),
                pulumi.InvokeOutputOptions(parent=children.parent, provider=provider),
            )
        return JoinedCluster(
            provider, created_name, gke.kubeconfig, created=[gke], outputs=gke.cluster_outputs
        )
    if settings.create and spec.cloud is Cloud.EKS:
        from .eks import EksCluster, EksClusterArgs

        eks = EksCluster(
            children.name(settings.name),
            EksClusterArgs(
                name=settings.name,
                region=settings.get("region"),
                version=settings.get("version"),
                subnet_ids=given("subnet_ids", list(settings.get("subnetIds"))),
                endpoint_public_access=settings.get("endpointPublicAccess"),
                public_access_cidrs=list(settings.get("publicAccessCidrs") or ()),
                protect=settings.protect,
                tags=dict(spec.cloud_tags.tags),
                permissions_boundary=given(
                    "permissions_boundary", settings.get("permissionsBoundary")
                ),
                network_policy=Feature.NETWORK_POLICY in features,
                pod_identity_agent=Feature.POD_IDENTITY in features,
                s3_csi_bucket=plan.model_cache.bucket
                if Feature.S3_MOUNTPOINT in features and plan.model_cache is not None
                else None,
                fsx_csi_driver=Feature.FSX_LUSTRE in features,
                pod_identity_agent_formerly=_autoscaler_agent_urn(children),
            ),
            children.opts([provider]),
        )
        return JoinedCluster(
            provider, eks.cluster_name, eks.kubeconfig, created=[eks], outputs=eks.cluster_outputs
        )
    if settings.create and spec.cloud is Cloud.OKE:
        from .oke import OkeCluster, OkeClusterArgs

        oke = OkeCluster(
            children.name(settings.name),
            OkeClusterArgs(
                name=settings.name,
                compartment_id=given("compartment_id", settings.get("compartmentId")),
                vcn_id=given("vcn_id", settings.get("vcnId")),
                endpoint_subnet_id=given("endpoint_subnet_id", settings.get("endpointSubnetId")),
                kubernetes_version=settings.get("kubernetesVersion"),
                node_subnet_id=nth(given("subnet_ids", list(settings.get("subnetIds"))), 0),
                pod_subnet_ids=given("pod_subnet_ids", list(settings.get("podSubnetIds"))),
                availability_domain=settings.get("availabilityDomains")[0],
                system_image_id=given("system_image_id", settings.get("systemImageId")),
                endpoint_public_access=settings.get("endpointPublicAccess"),
                protect=settings.protect,
                freeform_tags=dict(spec.cloud_tags.tags),
                defined_tags=dict(spec.cloud_tags.defined),
            ),
            children.opts([provider]),
        )
        return JoinedCluster(
            provider,
            oke.cluster_id,
            oke.kubeconfig,
            settings.get("kubernetesVersion"),
            compartment_id=given("compartment_id", settings.get("compartmentId")),
            created=[oke],
            outputs=oke.cluster_outputs,
        )
    if spec.cloud is Cloud.OKE:
        import pulumi_oci as oci

        cluster_id = cluster_reference(stack, "cluster_id")
        assert cluster_id is not None  # the planner requires it when joining
        found = oci.containerengine.get_cluster_output(
            cluster_id=cluster_id,
            opts=pulumi.InvokeOutputOptions(parent=children.parent, provider=provider),
        )
        version = settings.get("kubernetesVersion") or found.kubernetes_version
        return JoinedCluster(
            provider,
            _running_dra_version(plan, cluster_id, found.kubernetes_version),
            kubernetes_version=version,
            cluster_type=found.type,
            compartment_id=given("compartment_id", settings.get("compartmentId")),
        )
    assert name is not None
    if spec.cloud is Cloud.EKS:
        checked = _eks_cluster_for_dra(plan, name, provider, children)
        return JoinedCluster(provider, _eks_addons_checked(checked, needs, provider, children))
    if spec.cloud is Cloud.GKE and (
        spec.dra is not None or _looked_up(needs) or plan.gateway is not None
    ):
        import pulumi_gcp as gcp

        lookup = pulumi.InvokeOutputOptions(parent=children.parent, provider=provider)
        joined_gke = gcp.container.get_cluster_output(
            name=name,
            location=settings.get("location"),
            project=given("project", settings.get("project")),
            opts=lookup,
        )
        running = _running_dra_version(plan, name, joined_gke.master_version)
        checked = _gke_addons_checked(running, needs, joined_gke)
        if plan.gateway is not None:
            from .gke_gateway import joined_gateway_checked

            checked = joined_gateway_checked(
                checked, plan, joined_gke, given("project", settings.get("project")), lookup
            )
        return JoinedCluster(provider, checked)
    return JoinedCluster(provider, name)


AUTOSCALER = "cluster-autoscaler"
LOAD_BALANCER_CONTROLLER = "aws-load-balancer-controller"


def load_balancer_controller(
    plan: StackPlan, joined: JoinedCluster, children: Children, kubernetes: pulumi.ProviderResource
) -> list[pulumi.Resource]:
    """The AWS Load Balancer Controller when an external gateway runs on an EKS cluster the
    stack creates (what its Service needs to become an internet-facing load balancer)."""
    spec = plan.spec
    if not needs_load_balancer_controller(plan.gateway, spec.cloud, spec.cluster.create):
        return []
    from .eks_load_balancer import AwsLoadBalancerController, AwsLoadBalancerControllerArgs

    assert joined.outputs is not None
    return [
        AwsLoadBalancerController(
            children.name(LOAD_BALANCER_CONTROLLER),
            AwsLoadBalancerControllerArgs(
                cluster_name=joined.ref,
                region=spec.cluster.get("region"),
                vpc_id=joined.outputs.apply(lambda made: made["vpcId"]),
                tags=dict(spec.cloud_tags.tags),
                permissions_boundary=spec.cluster.get("permissionsBoundary"),
            ),
            children.opts([joined.cloud_provider, kubernetes], joined.created),
        )
    ]


def _autoscaler_agent_urn(children: Children) -> pulumi.Output[str]:
    """Where the EKS Pod Identity agent add-on lived when the Cluster Autoscaler's component
    installed it on a created cluster (the cluster's component owns it now)."""
    autoscaler = pulumi.create_urn(
        children.name(AUTOSCALER), "mig-inference:index:EksClusterAutoscaler", children.parent
    )
    return pulumi.create_urn(
        f"{children.name(AUTOSCALER)}-pod-identity-agent", "aws:eks/addon:Addon", autoscaler
    )


def _looked_up(needs: Sequence[Need]) -> list[Need]:
    """The add-ons a joined cluster is checked for."""
    return [
        need
        for need in needs
        if need.addon.joined in (Joined.REFUSED_WITHOUT, Joined.WARNED_WITHOUT)
    ]


def _judged(name: str, needs: Sequence[Need], lacking: Mapping[Feature, str]) -> str:
    """The joined cluster's name when it has every add-on the stack cannot work without; a
    missing one stops the preview at the keys that need it, before anything is created, and
    one the stack works without, unguarded, is a warning."""
    refusals = []
    for need in needs:
        what = lacking.get(need.feature)
        if what is None:
            continue
        message = (
            f"{', '.join(need.keys)}: cluster {name} {what}; the stack needs it for {need.why} "
            f"({need.addon.source}): turn on {need.addon.turn_on}"
        )
        if need.addon.joined is Joined.REFUSED_WITHOUT:
            refusals.append(message)
        else:
            pulumi.log.warn(f"{message}, or the stack's policies go unenforced")
    if refusals:
        raise pulumi.RunError("; ".join(refusals))
    return name


def _gke_addons_checked(
    ref: pulumi.Input[str], needs: Sequence[Need], found: Any
) -> pulumi.Input[str]:
    """A joined GKE cluster's reference, once `gcp.container.get_cluster` showed the add-ons
    the stack needs."""
    looked = _looked_up(needs)
    if not looked:
        return ref
    from .gke import lacking_addons

    return pulumi.Output.all(
        ref, found.addons_configs, found.datapath_provider, found.network_policies
    ).apply(lambda known: _judged(str(known[0]), looked, lacking_addons(*known[1:])))


def _eks_addons_checked(
    ref: pulumi.Input[str],
    needs: Sequence[Need],
    provider: pulumi.ProviderResource | None,
    children: Children,
) -> pulumi.Input[str]:
    """A joined EKS cluster's name, once `aws.eks.get_addon` found each add-on the stack needs
    (a driver installed otherwise than as an EKS add-on cannot be seen)."""
    looked = _looked_up(needs)
    if not looked:
        return ref
    import pulumi_aws as aws

    from .eks import network_policy_enabled

    def check(name: str) -> str:
        lacking: dict[Feature, str] = {}
        for need in looked:
            try:
                found = aws.eks.get_addon(
                    cluster_name=name,
                    addon_name=need.addon.addon,
                    opts=pulumi.InvokeOptions(parent=children.parent, provider=provider),
                )
            except Exception as error:  # the lookup's own answer is the reason
                lacking[need.feature] = f"has no EKS add-on {need.addon.addon} ({error})"
                continue
            if need.feature is Feature.NETWORK_POLICY and not network_policy_enabled(
                found.configuration_values
            ):
                lacking[need.feature] = (
                    f"runs the {need.addon.addon} add-on without enableNetworkPolicy"
                )
        return _judged(name, looked, lacking)

    return pulumi.Output.from_input(ref).apply(check)


def _running_dra_version(
    plan: StackPlan, ref: pulumi.Input[str], served: pulumi.Input[str | None]
) -> pulumi.Input[str]:
    """The joined cluster's reference; with DRA pools, only once the version the cluster
    reports is known to take the DRA objects written for `dra.kubernetesVersion`."""
    settings = plan.spec.dra
    if settings is None:
        return ref

    def checked(known: list[Any]) -> str:
        problem = joined_version_problem(settings, known[1])
        if problem is not None:
            raise pulumi.RunError(f"{key_path(settings.version_key)}: {problem}")
        return str(known[0])

    return pulumi.Output.all(ref, served).apply(checked)


def _eks_cluster_for_dra(
    plan: StackPlan,
    name: pulumi.Input[str],
    provider: pulumi.ProviderResource | None,
    children: Children,
) -> pulumi.Input[str]:
    """The joined EKS cluster's name; with DRA pools, only once the cluster is known not to run
    EKS Auto Mode (which has no DRA) and to run the Kubernetes version the DRA objects are
    written for, so the preview stops before anything is created."""
    allocations = [
        f"{key_path('pools')}[{index}].allocation"
        for index, pool in enumerate(plan.pools)
        if pool.dra
    ]
    if not allocations:
        return name
    import pulumi_aws as aws

    from .eks import auto_mode_enabled, without_auto_mode

    found = aws.eks.get_cluster_output(
        name=name,
        opts=pulumi.InvokeOutputOptions(parent=children.parent, provider=provider),
    )
    without = pulumi.Output.all(name, found.compute_configs).apply(
        lambda known: without_auto_mode(str(known[0]), auto_mode_enabled(known[1]), allocations)
    )
    return _running_dra_version(plan, without, found.version)


def _gke_node_account(
    stack: Stack, plan: StackPlan, joined: JoinedCluster, children: Children
) -> pulumi.Input[str] | None:
    """GKE: the GPU nodes' service account: the one the stack names, a dedicated one made here,
    or None for the Compute Engine default (`nodeServiceAccount: default`)."""
    settings = plan.spec.cluster
    if plan.spec.cloud is not Cloud.GKE:
        return None
    given = settings.get("nodeServiceAccount")
    if given == "default":
        return None
    if given:
        return str(given)
    from .gke import GkeNodeServiceAccount, GkeNodeServiceAccountArgs

    account = GkeNodeServiceAccount(
        children.name("gpu-nodes"),
        GkeNodeServiceAccountArgs(
            account_id=f"mig-nodes-{short_hash(f'{plan.spec.stack}/{settings.name}', 8)}",
            project=cluster_input(stack, "project", settings.get("project")),
        ),
        children.opts([joined.cloud_provider]),
    )
    return account.email


def gpu_pools(
    stack: Stack,
    plan: StackPlan,
    joined: JoinedCluster,
    children: Children,
    kubernetes: pulumi.ProviderResource,
    depends_on: Mapping[str, Sequence[pulumi.Resource]],
) -> list[pulumi.Resource]:
    """Every pool of the stack, each after the resources named for it in `depends_on` (the GPU
    Operator, and the re-partitioning Job of a pool that changes its layout in place)."""
    made: list[pulumi.Resource] = []
    node_account = _gke_node_account(stack, plan, joined, children)
    for pool in plan.pools:
        after = [*joined.created, *depends_on.get(pool.name, ())]
        opts = children.opts([joined.cloud_provider], after)
        name = children.name(pool.name)
        if plan.spec.cloud is Cloud.GKE:
            from .gke import GkeGpuPool, GkeGpuPoolArgs

            made.append(
                GkeGpuPool(
                    name,
                    GkeGpuPoolArgs(
                        stack=stack,
                        pool=pool.name,
                        cluster=joined.ref,
                        node_service_account=node_account,
                    ),
                    opts,
                )
            )
        elif plan.spec.cloud is Cloud.EKS:
            from .eks import EksGpuNodeGroup, EksGpuNodeGroupArgs

            made.append(
                EksGpuNodeGroup(
                    name,
                    EksGpuNodeGroupArgs(stack=stack, pool=pool.name, cluster_name=joined.ref),
                    opts,
                )
            )
        elif plan.spec.cloud is Cloud.OKE:
            from .oke import OkeGpuPool, OkeGpuPoolArgs

            assert joined.kubernetes_version is not None
            made.append(
                OkeGpuPool(
                    name,
                    OkeGpuPoolArgs(
                        stack=stack,
                        pool=pool.name,
                        cluster_id=joined.ref,
                        kubernetes_version=joined.kubernetes_version,
                    ),
                    opts,
                )
            )
        else:
            made.append(
                ExistingNodePool(
                    name,
                    ExistingNodePoolArgs(stack=stack, pool=pool.name),
                    children.opts([kubernetes], depends_on.get(pool.name, ())),
                )
            )
    return made


def cluster_autoscaler(
    plan: StackPlan,
    joined: JoinedCluster,
    children: Children,
    kubernetes: pulumi.ProviderResource,
    pools: Sequence[pulumi.Resource],
) -> pulumi.Resource | None:
    """The cloud's Cluster Autoscaler when a pool autoscales (GKE's is built in)."""
    spec = plan.spec
    autoscaled = [
        (pool, made) for pool, made in zip(plan.pools, pools, strict=True) if pool.autoscaled
    ]
    if not autoscaled:
        return None
    opts = children.opts([joined.cloud_provider, kubernetes], [*joined.created, *pools])
    if spec.cloud is Cloud.EKS:
        import pulumi_aws as aws

        from .eks_autoscaler import EksClusterAutoscaler, EksClusterAutoscalerArgs

        version: pulumi.Input[str] = (
            spec.cluster.get("version")
            if spec.cluster.create
            else aws.eks.get_cluster_output(
                name=joined.ref,
                opts=pulumi.InvokeOutputOptions(
                    parent=children.parent, provider=joined.cloud_provider
                ),
            ).version
        )
        return EksClusterAutoscaler(
            children.name(AUTOSCALER),
            EksClusterAutoscalerArgs(
                cluster_name=joined.ref,
                region=spec.cluster.get("region"),
                kubernetes_version=version,
                # A created cluster installs the agent itself (clouds.addons); a joined one is
                # checked for it.
                install_pod_identity_agent=False,
                tags=dict(spec.cloud_tags.tags),
                permissions_boundary=spec.cluster.get("permissionsBoundary"),
            ),
            opts,
        )
    if spec.cloud is Cloud.OKE:
        from .oke_autoscaler import (
            AutoscaledPool,
            OkeClusterAutoscaler,
            OkeClusterAutoscalerArgs,
            enhanced_only,
        )

        autoscaled_paths = [
            f"{key_path('pools')}[{index}].nodes"
            for index, pool in enumerate(plan.pools)
            if pool.autoscaled
        ]
        cluster_id = joined.ref
        if joined.cluster_type is not None:
            # A joined cluster: the add-on exists only on enhanced clusters.
            cluster_id = pulumi.Output.all(joined.ref, joined.cluster_type).apply(
                lambda found: enhanced_only(str(found[0]), str(found[1]), autoscaled_paths)
            )
        assert joined.compartment_id is not None
        return OkeClusterAutoscaler(
            children.name("cluster-autoscaler"),
            OkeClusterAutoscalerArgs(
                cluster_id=cluster_id,
                compartment_id=joined.compartment_id,
                freeform_tags=dict(spec.cloud_tags.tags),
                defined_tags=dict(spec.cloud_tags.defined),
                pools=[
                    AutoscaledPool(
                        min=pool.min_nodes,
                        max=pool.max_nodes,
                        node_pool_id=made.node_pool_id,  # type: ignore[attr-defined]
                    )
                    for pool, made in autoscaled
                ],
            ),
            opts,
        )
    return None
