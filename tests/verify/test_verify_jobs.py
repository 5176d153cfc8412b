"""The serving check under Pulumi's mocks: a verify Job per Service after its Deployments,
schema-valid, restricted, reaching only the service's pods and DNS, its API key only from the
service's Secret; a slice check in every verified replica; and the stack keys' refusals."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from mig_inference.errors import MigErrors
from mig_inference.plan import plan_stack
from mig_inference.rendering import Rendering, manifest
from mig_inference.spec import parse_stack
from mig_inference.verify.probe import Answer, Target, run_checks
from mig_inference.verify.targets import VERIFY_APP, program_source
from mig_inference.versions import GPU_OPERATOR_VERSION, VERIFY_IMAGE
from tests.mocked import render_config, stack_rendering
from tests.render.test_stacks import CUSTOM_RESOURCE_GROUPS

ANSWERS = Path(__file__).parent.parent / "verify_answers"
JOB = "kubernetes:batch/v1:Job"
DEPLOYMENT = "kubernetes:apps/v1:Deployment"
POLICY = "kubernetes:networking.k8s.io/v1:NetworkPolicy"
SECRET_KEY = "sk-do-not-print"
BASE: dict[str, Any] = {
    "cloud": "gke",
    "cluster": {"name": "inference-1", "project": "my-gcp-project", "location": "us-central1"},
    "pools": [{"name": "h100", "gpu": "H100-80GB", "machineType": "a3-highgpu-8g", "nodes": 1,
               "mig": "all-1g.10gb", "zones": ["us-central1-c"], "maxPods": 110}],
    "verify": {"enabled": True, "timeoutSeconds": 120},
    "services": [
        {"name": "chat", "model": "Qwen/Qwen2.5-1.5B-Instruct", "memoryGiB": 4, "replicas": 2,
         "apiKeySecret": "chatKey", "clients": [{"namespace": "gateway"}],
         "args": ["--served-model-name", "chat-model"]},
        {"name": "tgi-chat", "engine": "tgi", "model": "Qwen/Qwen2.5-0.5B-Instruct",
         "memoryGiB": 3, "replicas": 1},
        {"name": "vision", "engine": "triton", "model": "gs://models/repository",
         "memoryGiB": 4, "replicas": 1},
        {"name": "echo", "engine": "custom", "image": "ghcr.io/example/echo:1.0",
         "command": ["/echo"], "memoryGiB": 1, "replicas": 1, "healthPath": "/ready",
         "verify": {"path": "/echo", "method": "POST", "body": "{\"text\": \"hi\"}",
                    "contains": "hi"}},
        {"name": "quiet", "model": "Qwen/Qwen2.5-0.5B-Instruct", "memoryGiB": 3,
         "replicas": 1, "verify": {"enabled": False}},
    ],
}  # fmt: skip


@pytest.fixture(scope="module")
def rendering(tmp_path_factory: pytest.TempPathFactory) -> Rendering:
    result = render_config(tmp_path_factory.mktemp("verify"), BASE, chatKey=SECRET_KEY)
    assert result.error is None, result.error
    return result


def objects(rendering: Rendering, type_token: str) -> dict[str, dict[str, Any]]:
    return {manifest(r)["metadata"]["name"]: manifest(r) for r in rendering.of_type(type_token)}


def verify_jobs(rendering: Rendering) -> dict[str, dict[str, Any]]:
    return {
        job["metadata"]["labels"]["app.kubernetes.io/instance"]: job
        for job in objects(rendering, JOB).values()
        if job["metadata"]["labels"].get("app.kubernetes.io/name") == VERIFY_APP
    }


def test_one_schema_valid_job_per_verified_service(rendering: Rendering) -> None:
    jobs = verify_jobs(rendering)
    assert set(jobs) == {"chat", "tgi-chat", "vision", "echo"}  # not `quiet`
    for obj in rendering.kubernetes_objects():
        if obj["apiVersion"].split("/")[0] not in CUSTOM_RESOURCE_GROUPS:
            kubernetes_validate.validate(obj, "1.33.0", strict=True)
    targets = {s: json.loads(env["value"]) for s, job in jobs.items()
               for env in job["spec"]["template"]["spec"]["containers"][0]["env"]
               if env["name"] == "MIG_VERIFY_TARGET"}  # fmt: skip
    assert targets["chat"]["model"] == "chat-model"  # vLLM's --served-model-name
    assert targets["chat"]["url"] == "http://chat.inference.svc.cluster.local:8000"
    assert targets["tgi-chat"]["engine"] == "tgi" and targets["vision"]["engine"] == "triton"
    assert targets["echo"]["probe"] == {"path": "/echo", "method": "POST", "body": '{"text": "hi"}',
                                        "status": 200, "contains": "hi"}  # fmt: skip
    assert targets["chat"]["timeout_seconds"] == 120


def test_the_job_runs_after_the_services_deployments_and_fails_pulumi_up(
    rendering: Rendering,
) -> None:
    check = rendering.options[("mig-inference:index:ServiceVerification", "verify-chat")]
    assert ("mig-inference:index:InferenceService", "chat") in check.dependencies
    job = next(o for k, o in rendering.options.items() if k[0] == JOB and k[1] == "verify-chat-job")
    assert job.parent == ("mig-inference:index:ServiceVerification", "verify-chat")
    assert job.dependencies == ((POLICY, "verify-chat-network"),)
    assert job.custom_timeouts == ("240s", "240s") and job.delete_before_replace is True
    spec = verify_jobs(rendering)["chat"]["spec"]
    assert (spec["backoffLimit"], spec["activeDeadlineSeconds"]) == (0, 180)


def test_the_job_pod_is_restricted_and_has_no_api_access(rendering: Rendering) -> None:
    for job in verify_jobs(rendering).values():
        pod = job["spec"]["template"]["spec"]
        assert pod["automountServiceAccountToken"] is False and pod["restartPolicy"] == "Never"
        assert pod["securityContext"] == {"runAsNonRoot": True, "runAsUser": 65534,
                                          "runAsGroup": 65534,
                                          "seccompProfile": {"type": "RuntimeDefault"}}  # fmt: skip
        [container] = pod["containers"]
        assert container["image"] == VERIFY_IMAGE
        assert container["command"] == ["python3", "-c", program_source("probe")]
        assert container["securityContext"] == {"allowPrivilegeEscalation": False,
                                                "readOnlyRootFilesystem": True,
                                                "capabilities": {"drop": ["ALL"]}}  # fmt: skip
        assert container["terminationMessagePolicy"] == "FallbackToLogsOnError"
        assert all("hostPath" not in v for v in pod["volumes"])
    accounts = objects(rendering, "kubernetes:core/v1:ServiceAccount")
    assert accounts["verify-chat"]["automountServiceAccountToken"] is False


def test_the_api_key_comes_only_from_the_services_secret(rendering: Rendering) -> None:
    env = verify_jobs(rendering)["chat"]["spec"]["template"]["spec"]["containers"][0]["env"]
    [key] = [e for e in env if e["name"] == "MIG_VERIFY_API_KEY"]
    assert key == {"name": "MIG_VERIFY_API_KEY", "valueFrom": {"secretKeyRef": {
        "name": "chat-credentials", "key": "api-key"}}}  # fmt: skip
    secret = objects(rendering, "kubernetes:core/v1:Secret")["chat-credentials"]
    assert secret["stringData"]["api-key"] == SECRET_KEY
    for job in verify_jobs(rendering).values():
        assert SECRET_KEY not in json.dumps(job)
    tgi_env = verify_jobs(rendering)["tgi-chat"]["spec"]["template"]["spec"]["containers"][0]["env"]
    assert "MIG_VERIFY_API_KEY" not in {e["name"] for e in tgi_env}


def _selects(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())


def test_the_network_policy_allows_only_the_services_pods_and_dns(rendering: Rendering) -> None:
    policies = objects(rendering, POLICY)
    deployments = objects(rendering, DEPLOYMENT)
    pod_labels = {n: d["spec"]["template"]["metadata"]["labels"] for n, d in deployments.items()}
    for service, job in verify_jobs(rendering).items():
        policy = policies[f"verify-{service}"]["spec"]
        assert _selects(
            policy["podSelector"]["matchLabels"], job["spec"]["template"]["metadata"]["labels"]
        )
        assert policy["policyTypes"] == ["Ingress", "Egress"] and "ingress" not in policy
        to_service, dns = policy["egress"]
        [peer] = to_service["to"]
        reached = {
            n
            for n, labels in pod_labels.items()
            if _selects(peer["podSelector"]["matchLabels"], labels)
        }
        assert reached == {service}, service
        assert to_service["ports"] == [{"port": 8000, "protocol": "TCP"}]
        assert dns == {"ports": [{"port": 53, "protocol": "UDP"}, {"port": 53, "protocol": "TCP"}]}


def test_a_service_with_declared_clients_lets_its_check_in(rendering: Rendering) -> None:
    policies = objects(rendering, POLICY)
    job_labels = verify_jobs(rendering)["chat"]["spec"]["template"]["metadata"]["labels"]
    peers = policies["chat"]["spec"]["ingress"][0]["from"]
    assert {
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "gateway"}}
    } in peers
    assert [
        p
        for p in peers
        if "podSelector" in p and _selects(p["podSelector"]["matchLabels"], job_labels)
    ]
    # The check's own pod labels reach no other service's ingress through that peer.
    other = policies["tgi-chat"]["spec"]["ingress"][0]["from"]
    assert other == [{"podSelector": {}}]  # own namespace only, as before


def test_every_verified_replica_checks_its_slice_first(rendering: Rendering) -> None:
    deployments = objects(rendering, DEPLOYMENT)
    for name in ("chat", "tgi-chat", "vision", "echo"):
        pod = deployments[name]["spec"]["template"]["spec"]
        [check] = pod["initContainers"]
        engine = pod["containers"][0]
        assert check["name"] == "mig-slice-check" and check["image"] == VERIFY_IMAGE
        device = {
            k: v for k, v in engine["resources"]["limits"].items() if k.startswith("nvidia.com/")
        }
        assert device == {"nvidia.com/mig-1g.10gb": "1"}
        assert {
            k: v for k, v in check["resources"]["limits"].items() if k.startswith("nvidia.com/")
        } == device
        env = {e["name"]: e["value"] for e in check["env"]}
        assert (
            env["MIG_EXPECT_PROFILE"] == "1g.10gb"
            and env["NVIDIA_DRIVER_CAPABILITIES"] == "utility"
        )
        assert check["securityContext"]["readOnlyRootFilesystem"] is True
    assert "initContainers" not in deployments["quiet"]["spec"]["template"]["spec"]


def test_a_service_sized_by_demand_is_checked_once_after_every_profile(tmp_path: Path) -> None:
    import yaml

    from mig_inference.spec.files import stack_path

    raw = yaml.safe_load(Path(stack_path("eks-p4de-demand")).read_text())["config"]
    config = {
        k.split(":", 1)[1]: v
        for k, v in raw.items()
        if not isinstance(v, dict) or "secure" not in v
    }
    config["verify"] = {"enabled": True}
    secrets = {
        k.split(":", 1)[1]: "x" for k, v in raw.items() if isinstance(v, dict) and "secure" in v
    }
    rendering = render_config(tmp_path, config, **secrets)
    assert rendering.error is None, rendering.error
    plan = plan_stack(parse_stack("test", config, secret_keys=frozenset(secrets),
                                  pinned_operator_version=GPU_OPERATOR_VERSION))  # fmt: skip
    groups = {s.service_name for s in plan.services if s.group}
    assert {g for g in groups if sum(s.service_name == g for s in plan.services) > 1}
    for group in groups:
        parts = {s.name for s in plan.services if s.service_name == group}
        check = rendering.options[("mig-inference:index:ServiceVerification", f"verify-{group}")]
        assert {
            n for t, n in check.dependencies if t == "mig-inference:index:InferenceService"
        } == parts
        assert group in verify_jobs(rendering)


def _refused(config: dict[str, Any]) -> list[tuple[str | None, str]]:
    with pytest.raises(MigErrors) as raised:
        parse_stack("t", config, secret_keys=frozenset({"chatKey"}),
                    pinned_operator_version=GPU_OPERATOR_VERSION)  # fmt: skip
    return [(e.path, e.message) for e in raised.value.errors]


def test_refusals_name_the_key() -> None:
    config = copy.deepcopy(BASE)
    del config["services"][3]["verify"]
    assert _refused(config) == [("mig-inference:services[3].verify",
                                 "the serving check of a custom engine needs a request to send: give "
                                 "verify.path (and method, body, status, contains), or verify.enabled: false")]  # fmt: skip
    config = copy.deepcopy(BASE)
    config["services"][0]["verify"] = {"path": "/x"}
    assert _refused(config)[0][0] == "mig-inference:services[0].verify.path"
    config = copy.deepcopy(BASE)
    config["ephemeral"] = {"ttl": "2h"}
    assert set(_refused(config)) == {
        ("mig-inference:cluster.protect", "an ephemeral stack is destroyed by `mig-inference "
         "ephemeral destroy`, which protected resources refuse: set protect: false"),
        ("mig-inference:ephemeral.maxCost", "is required: the most US dollars the stack may cost over its TTL"),
    }  # fmt: skip
    config = copy.deepcopy(BASE)
    config["verify"] = {"timeoutSeconds": 5, "maxTokens": 0, "prompt": "a\x01b", "retries": 3}
    assert {p for p, _ in _refused(config)} == {
        "mig-inference:verify.timeoutSeconds", "mig-inference:verify.maxTokens",
        "mig-inference:verify.prompt", "mig-inference:verify.retries",
    }  # fmt: skip
    config = copy.deepcopy(BASE)
    config["cluster"] |= {"protect": False}
    config["ephemeral"] = {"ttl": "1w", "maxCost": 0}
    assert {p for p, _ in _refused(config)} == {"mig-inference:ephemeral.ttl",
                                                "mig-inference:ephemeral.maxCost"}  # fmt: skip


def test_verify_is_on_by_default_only_for_stacks_that_create_their_cluster() -> None:
    def enabled(cluster: dict[str, Any]) -> bool:
        config = {**copy.deepcopy(BASE), "cluster": cluster}
        del config["verify"]
        config["services"] = config["services"][:1]
        spec = parse_stack("t", config, secret_keys=frozenset({"chatKey"}),
                           pinned_operator_version=GPU_OPERATOR_VERSION)  # fmt: skip
        return spec.verify.enabled

    joined = dict(BASE["cluster"])
    created = {**joined, "create": True, "network": "default", "subnetwork": "default",
               "authorizedNetworks": ["203.0.113.0/24"]}  # fmt: skip
    assert enabled(created) and not enabled(joined)
    assert verify_jobs(stack_rendering("ephemeral-gke"))
    assert not verify_jobs(stack_rendering("gke-h100"))


def test_the_plan_reports_the_check_the_program_creates(
    rendering: Rendering, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from mig_inference.cli import main

    path = tmp_path / "Pulumi.check.yaml"
    config = {f"mig-inference:{k}": v for k, v in BASE.items()}
    config["mig-inference:chatKey"] = {"secure": "v1:test"}
    path.write_text(yaml.safe_dump({"config": config}))
    assert main(["plan", "--stack-file", str(path), "--json"]) == 0
    planned = {v["service"]: v for v in json.loads(capsys.readouterr().out)["verify"]}
    jobs = verify_jobs(rendering)
    assert {s: v["job"] for s, v in planned.items()} == {
        s: job["metadata"]["name"] for s, job in jobs.items()
    }
    assert planned["vision"]["requests"][:2] == [
        "GET /v2/health/ready",
        "POST /v2/repository/index",
    ]
    assert planned["echo"]["requests"] == ["POST /echo"]
    assert planned["chat"]["slices"] == {"chat": "1g.10gb"}


def test_the_check_asks_for_the_id_each_engine_reports_when_started_from_the_cache(
    tmp_path: Path,
) -> None:
    """TGI started from the cache's path reports that path as its model id (TGI 3.3.5 takes a
    local directory's id from `--model-id`; it has no served name): the check asks for what
    the engine reports, or it would fail a healthy server. vLLM answers to its served name."""
    config = copy.deepcopy(BASE)
    config["modelCache"] = {"storage": "hyperdisk-ml"}
    config["services"].append(
        {"name": "plain", "model": "Qwen/Qwen2.5-0.5B-Instruct", "memoryGiB": 3, "replicas": 1}
    )
    plan = plan_stack(parse_stack("test", config, secret_keys=frozenset({"chatKey"}),
                                  pinned_operator_version=GPU_OPERATOR_VERSION))  # fmt: skip
    cache = plan.model_cache
    assert cache is not None
    rendering = render_config(tmp_path, config, chatKey=SECRET_KEY)
    assert rendering.error is None, rendering.error
    targets = {s: json.loads(env["value"]) for s, job in verify_jobs(rendering).items()
               for env in job["spec"]["template"]["spec"]["containers"][0]["env"]
               if env["name"] == "MIG_VERIFY_TARGET"}  # fmt: skip
    tgi = next(s for s in plan.services if s.name == "tgi-chat")
    assert targets["tgi-chat"]["model"] == cache.weights_path(tgi)
    assert targets["tgi-chat"]["model"].startswith("/models/Qwen/Qwen2.5-0.5B-Instruct/")
    assert targets["chat"]["model"] == "chat-model"  # the stack's own served name wins
    assert targets["plain"]["model"] == "Qwen/Qwen2.5-0.5B-Instruct"  # the cache's served name
    # What TGI answers from the cache passes the check; the hub id it does not report would not.
    answer = {
        "object": "list",
        "data": [
            {
                "id": targets["tgi-chat"]["model"],
                "object": "model",
                "created": 0,
                "owned_by": targets["tgi-chat"]["model"],
            }
        ],
    }
    models = Answer(200, json.dumps(answer), 3.0)
    send = {
        ("GET", "/v1/models"): models,
        ("POST", "/v1/completions"): Answer(
            200, (ANSWERS / "tgi_completion.json").read_text(), 9.0
        ),
    }
    target = Target(**{**targets["tgi-chat"], "probe": None})
    assert run_checks(target, lambda request: send[(request.method, request.path)]).ok
    hub = Target(**{**targets["tgi-chat"], "model": "Qwen/Qwen2.5-0.5B-Instruct", "probe": None})
    assert not run_checks(hub, lambda request: send[(request.method, request.path)]).ok
