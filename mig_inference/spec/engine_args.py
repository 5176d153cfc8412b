"""A service's own engine arguments (`args`, and `command` of custom engines) held to the rules
of the stack keys that set the same engine options: `--tensor-parallel-size 2` is refused as
`tensorParallelSize: 2` is, and an option the plan sets from a key is refused with that key."""

from __future__ import annotations

from collections.abc import Callable

from mig_inference.spec.model import Engine
from mig_inference.spec.reader import ConfigNode

TP_KEY = "tensorParallelSize"
# Option -> the stack key that sets it (None: the preset sets it, no key changes it).
ENGINE_OPTIONS: dict[Engine, dict[str, str | None]] = {
    Engine.VLLM: {
        "--model": "model", "--port": "port", "--host": None, "--tensor-parallel-size": TP_KEY,
        "-tp": TP_KEY, "--pipeline-parallel-size": TP_KEY, "-pp": TP_KEY,
        "--gpu-memory-utilization": "gpuMemoryUtilization", "--max-model-len": "maxModelLen",
        "--max-num-seqs": "maxNumSeqs", "--max-num-batched-tokens": "maxNumBatchedTokens",
    },
    Engine.TGI: {
        "--model-id": "model", "--port": "port", "--hostname": None, "--num-shard": TP_KEY,
        "--sharded": TP_KEY, "--cuda-memory-fraction": "gpuMemoryUtilization",
        "--max-total-tokens": "maxModelLen", "--max-input-tokens": "maxModelLen",
        "--max-input-length": "maxModelLen", "--max-concurrent-requests": "maxNumSeqs",
    },
    Engine.TRITON: {
        "--model-repository": "model", "--model-store": "model", "--http-port": "port",
        "--allow-grpc": None, "--allow-metrics": None,
    },
    Engine.CUSTOM: {
        "--tensor-parallel-size": TP_KEY, "-tp": TP_KEY, "--pipeline-parallel-size": TP_KEY,
        "-pp": TP_KEY, "--num-shard": TP_KEY,
    },
}  # fmt: skip


def tensor_parallel_problem(degree: int) -> str | None:
    if degree == 1:
        return None
    return (
        f"must be 1, got {degree}: each replica here gets one device, a MIG slice or a GPU, and "
        "NCCL cannot span MIG devices; pick a larger slice or GPU for a model that needs more "
        "memory"
    )


def _option(word: str) -> tuple[str, str | None]:
    flag, equals, value = word.partition("=")
    if flag.startswith("--"):
        flag = "--" + flag[2:].replace("_", "-")  # vLLM's parser takes both spellings
    return flag, value if equals else None


def last_value(words: tuple[str, ...], flag: str) -> str | None:
    """The first value of the last `flag` in an engine's arguments (`--flag value` or
    `--flag=value`; vLLM's parser, an argparse.ArgumentParser, keeps the last occurrence of an
    option and takes `_` for `-`), None when the arguments do not give it."""
    found = None
    for index, word in enumerate(words):
        given, value = _option(word)
        if given != flag:
            continue
        if value is None and index + 1 < len(words):
            value = words[index + 1]
        if value is not None:
            found = value
    return found


CHUNKED_PREFILL = "--enable-chunked-prefill"
FALSE_WORDS = ("false", "0", "no", "off")


def chunked_prefill_off(words: tuple[str, ...]) -> bool:
    """Whether vLLM's own arguments turn chunked prefill off: the last of
    `--no-enable-chunked-prefill` and `--enable-chunked-prefill[=value]` wins (argparse keeps the
    last; vLLM's parser takes `_` for `-`). Off by default in vLLM v0.33.0 only for pooling and
    encoder-decoder models (`ModelConfig.is_chunked_prefill_supported`), which the plan cannot
    see from a model id: those need the flag spelt out here to get the budget they need."""
    off = False
    for word in words:
        flag, value = _option(word)
        if flag == "--no-" + CHUNKED_PREFILL[2:]:
            off = True
        elif flag == CHUNKED_PREFILL:
            off = value is not None and value.strip().lower() in FALSE_WORDS
    return off


def check_engine_args(
    node: ConfigNode,
    engine: Engine,
    words: tuple[str, ...],
    key_check: Callable[[str, ConfigNode], object],
) -> None:
    """Refuse, at `node[i]`, engine options of `words` that a stack key sets. `key_check(key,
    value_node)` runs that key's own check on the option's value first, so a bad value gets the
    key's message."""
    options = ENGINE_OPTIONS[engine]
    for index, word in enumerate(words):
        pieces = word.split() if engine is Engine.CUSTOM else [word]
        for position, piece in enumerate(pieces):
            flag, value = _option(piece.strip("'\""))
            if flag not in options:
                continue
            if value is None:
                following = pieces[position + 1] if position + 1 < len(pieces) else None
                if following is None and index + 1 < len(words) and len(pieces) == 1:
                    following = words[index + 1]
                value = following or ""
            key = options[flag]
            where = node.child(index)
            if key == TP_KEY:
                degree = 2 if flag == "--sharded" and value.lower() == "true" else None
                if degree is None and value.strip().isdigit():
                    degree = int(value)
                problem = tensor_parallel_problem(degree) if degree is not None else None
                if problem is not None:
                    where.problem(f"{flag} {value}: {TP_KEY} {problem}", None)
                    continue
                if engine is Engine.CUSTOM:
                    continue  # a custom engine's own parallelism of 1
            elif key is not None:
                before = len(node.problems or [])
                key_check(key, ConfigNode(_typed(value), where.path, node.problems))
                if node.problems is not None and len(node.problems) > before:
                    continue
            setter = f"the key {key}" if key else f"the {engine.value} preset"
            where.problem(
                f"{flag} is set by {setter}"
                + (f"; give {key}: {value} instead (the plan checks it)" if key else "")
                + "; an engine takes the last value given, which would bypass that",
                None,
            )


def _typed(value: str) -> object:
    """An option's text as the number a key would hold, when it is one."""
    try:
        return int(value)
    except ValueError:
        pass
    try:
        return float(value)
    except ValueError:
        return value
