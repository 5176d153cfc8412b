"""The model id a vLLM engine reports, as the gateway routes it and the serving check asks for
it: one function, held to what vLLM's own parser makes of the engine's arguments."""

from __future__ import annotations

import argparse
import copy

import pytest

from mig_inference.kube.engines import engine_container
from mig_inference.plan import plan_stack
from mig_inference.plan.served import served_model
from mig_inference.spec import parse_stack
from mig_inference.versions import GPU_OPERATOR_VERSION
from tests.verify.test_verify_jobs import BASE

MODEL = "Qwen/Qwen2.5-1.5B-Instruct"


def vllm_reports(args: tuple[str, ...]) -> str:
    """What vLLM reports for these arguments, by the parser it uses: argparse, an option's last
    occurrence kept (`--served-model-name` takes one or more names, the first is reported);
    vLLM's FlexibleArgumentParser reads `_` in an option's name as `-`."""
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--model")
    parser.add_argument("--served-model-name", nargs="+")
    words = []
    for word in args:
        name, equals, value = word.partition("=")
        words.append(name.replace("_", "-") + equals + value if word.startswith("--") else word)
    known, _ = parser.parse_known_args(words)
    return str(known.served_model_name[0] if known.served_model_name else known.model)


@pytest.mark.parametrize(
    ("args", "reported"),
    [
        ([], MODEL),
        (["--served-model-name", "chat"], "chat"),
        (["--served-model-name", "chat", "chat-alias"], "chat"),
        (["--served-model-name", "old", "--served-model-name", "new", "alias"], "new"),
        (["--served-model-name=old", "--served_model_name=new"], "new"),
        (["--served_model_name", "new"], "new"),
    ],
)
@pytest.mark.parametrize("cached", [False, True], ids=["from the hub", "from the cache"])
def test_the_served_model_is_what_vllm_reports(
    args: list[str], reported: str, cached: bool
) -> None:
    config = {key: copy.deepcopy(value) for key, value in BASE.items() if key != "verify"}
    config["services"] = [{"name": "chat", "model": MODEL, "memoryGiB": 4, "args": args}]
    config["gateway"] = {"proxySubnet": "10.129.0.0/23"}
    if cached:
        config["modelCache"] = {"storage": "hyperdisk-ml"}
    plan = plan_stack(parse_stack("test", config, pinned_operator_version=GPU_OPERATOR_VERSION))
    [service] = plan.services
    started = engine_container(service, plan.model_cache).args
    assert any(w.startswith("/models/") for w in started) == cached
    assert served_model(service, plan.model_cache) == vllm_reports(started) == reported
    assert plan.gateway is not None
    assert [pool.model for pool in plan.gateway.pools] == [reported]
