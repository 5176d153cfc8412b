"""The files of a Hugging Face model repository the serving engines load, so the model cache's
populate Job downloads those and nothing else (a repository may hold a model twice).

The Job runs this file with `python3 -c` in the engine's image (huggingface_hub comes with
vLLM and TGI): it lists the repository at `REVISION`, reads the safetensors index when there
is one (downloading it into `STAGING`, where it belongs), and prints the files to download, one
per line. Exit 1, with the reason on stderr, when the repository has no safetensors weights.

What the engines load from a local directory, and so what the cache must hold:
- vLLM's default loader (vllm-project/vllm `vllm/model_executor/model_loader/default_loader.py`,
  `DefaultModelLoader._prepare_weights`) globs `*.safetensors` at the top of the directory
  only, keeps the files `model.safetensors.index.json` names when there is an index, and takes
  the Mistral format (`consolidated*.safetensors`) whenever such a file is present; its Run:ai
  streamer (`runai_streamer_loader.py`) streams every `*.safetensors` under the path, with no
  index;
- TGI 3.3.5 (`server/text_generation_server/utils/hub.py`, `weight_files`) loads every
  `*.safetensors` at the top of the directory.
So the cache holds one weight set: the Hugging Face one (the index's shards, else the top
level's safetensors files), or, in a repository that has no other, the consolidated (Mistral)
one. Never files in folders (a Llama repository's `original/`) nor other weight formats; beside
the weights, every top-level file the engines read as configuration, tokenizer or chat template.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence

WEIGHTS = ".safetensors"
INDEX = "model.safetensors.index.json"
CONSOLIDATED = "consolidated"
CONSOLIDATED_INDEX = "consolidated.safetensors.index.json"
METADATA = (".json", ".model", ".tiktoken", ".txt", ".jinja", ".py")
"""Top-level files the engines read beside the weights: config.json, generation_config.json,
tokenizer*.json, special_tokens_map.json, params.json and tekken.json (Mistral), the indexes,
tokenizer.model, vocab and merges files, chat templates, and a model's own code (read only
with `--trust-remote-code`)."""


class NoWeights(Exception):
    """The repository has no safetensors weights the engines can load from the cache."""


def engine_files(
    repo_files: Sequence[str],
    index: Sequence[str] | None = None,
    consolidated_index: Sequence[str] | None = None,
) -> list[str]:
    """The files to download, sorted: one weight set and the top-level metadata.

    `index` and `consolidated_index` are the file names the two safetensors indexes map the
    weights to (their `weight_map` values), when the repository has them."""
    top = [name for name in repo_files if "/" not in name]
    metadata = [name for name in top if name.endswith(METADATA)]
    hugging_face = [
        name for name in top if name.endswith(WEIGHTS) and not name.startswith(CONSOLIDATED)
    ]
    consolidated = [
        name for name in top if name.endswith(WEIGHTS) and name.startswith(CONSOLIDATED)
    ]
    if index:
        weights = sorted(set(index))
    elif hugging_face:
        weights = hugging_face
    elif consolidated:
        weights = sorted(set(consolidated_index)) if consolidated_index else consolidated
    else:
        raise NoWeights(
            "the repository has no safetensors weights; the cache holds safetensors only (the "
            "engines load them from a read-only volume, and TGI converts other formats in place)"
        )
    return sorted({*metadata, *weights})


def _mapped(repo: str, revision: str, staging: str, name: str, listed: Sequence[str]) -> list[str]:
    if name not in listed:
        return []
    from huggingface_hub import hf_hub_download  # type: ignore[import-not-found] # the image's

    path = hf_hub_download(repo, name, revision=revision, local_dir=staging)
    with open(path, encoding="utf-8") as file:
        return list(json.load(file)["weight_map"].values())


def main() -> int:
    from huggingface_hub import HfApi

    repo, revision, staging = os.environ["MODEL"], os.environ["REVISION"], os.environ["STAGING"]
    listed = HfApi().list_repo_files(repo, revision=revision)
    try:
        files = engine_files(
            listed,
            _mapped(repo, revision, staging, INDEX, listed),
            _mapped(repo, revision, staging, CONSOLIDATED_INDEX, listed),
        )
    except NoWeights as error:
        print(f"model-fill: {repo}@{revision}: {error}", file=sys.stderr)
        return 1
    print("\n".join(files))
    return 0


if __name__ == "__main__":
    sys.exit(main())
