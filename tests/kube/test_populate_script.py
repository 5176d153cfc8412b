"""The populate Job's script, run for real with /bin/sh against a stand-in `hf` (or
`huggingface-cli`) that writes the files it is asked for the way `hf download --local-dir`
does, and a stand-in `huggingface_hub` that lists a repository for the engine-files program."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from mig_inference.kube.scripts import load, program
from mig_inference.kube.scripts.engine_files import NoWeights, engine_files

FAKE_HF = """import json, os, sys
from pathlib import Path
argv = sys.argv[1:]
with open(os.environ["FAKE_HF_CALLS"], "a") as calls:
    calls.write(json.dumps([os.environ["FAKE_HF_NAME"], *argv]) + "\\n")
if os.environ.get("FAKE_HF_MODE") == "fail":
    sys.exit(2)
assert argv[0] == "download", argv
target = Path(argv[argv.index("--local-dir") + 1])
target.mkdir(parents=True, exist_ok=True)
names = argv[2:argv.index("--revision")]
if os.environ.get("FAKE_HF_MODE") != "empty":
    for name in names:
        path = target / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if name == "config.json":
            path.write_text(json.dumps({"revision": argv[argv.index("--revision") + 1]}))
        else:
            path.write_bytes(b"\\0" * 1024)
(target / ".cache" / "huggingface").mkdir(parents=True, exist_ok=True)
(target / ".cache" / "huggingface" / "download.lock").write_text("")
"""
FAKE_HUB = """import json, os
from pathlib import Path
REPO = json.loads(os.environ["FAKE_REPO"])
class HfApi:
    def list_repo_files(self, repo_id, revision=None):
        assert (repo_id, revision) == (os.environ["MODEL"], os.environ["REVISION"])
        return REPO["files"]
def hf_hub_download(repo_id, filename, revision=None, local_dir=None):
    path = Path(local_dir) / filename
    path.write_text(json.dumps({"weight_map": REPO["maps"][filename]}))
    return str(path)
"""
SMALL = {"files": ["config.json", "model.safetensors", "README.md", ".gitattributes"], "maps": {}}
"""A repository of one weight file."""


def _run(
    tmp_path: Path, target: Path, staging: Path, *, command: str = "hf", mode: str = "",
    repo: dict[str, Any] = SMALL,
) -> subprocess.CompletedProcess[str]:  # fmt: skip
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    (tmp_path / "fake_hf.py").write_text(FAKE_HF)
    tool = bin_dir / command
    tool.write_text(
        f'#!/bin/sh\nFAKE_HF_NAME={command} exec "{sys.executable}" "{tmp_path / "fake_hf.py"}" "$@"\n'
    )
    tool.chmod(0o755)
    python = bin_dir / "python3"
    python.write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    python.chmod(0o755)
    hub = tmp_path / "site" / "huggingface_hub"
    hub.mkdir(parents=True, exist_ok=True)
    (hub / "__init__.py").write_text(FAKE_HUB)
    env = {
        "PATH": f"{bin_dir}:/usr/bin:/bin",
        "PYTHONPATH": str(tmp_path / "site"),
        "MODEL": "org/tiny-model",
        "REVISION": "0123abcd",
        "TARGET": str(target),
        "STAGING": str(staging),
        "ENGINE_FILES": program("engine_files.py"),
        "FAKE_REPO": json.dumps(repo),
        "FAKE_HF_CALLS": str(tmp_path / "calls.jsonl"),
        "FAKE_HF_MODE": mode,
    }
    return subprocess.run(
        ["/bin/sh", "-c", load("populate.sh")], env=env, capture_output=True, text=True,
        timeout=60, check=False,
    )  # fmt: skip


def _calls(tmp_path: Path) -> list[list[str]]:
    path = tmp_path / "calls.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_a_file_system_fill_renames_the_download_into_place(tmp_path: Path) -> None:
    target = tmp_path / "models" / "org" / "tiny-model" / "0123abcd"
    result = _run(tmp_path, target, Path(f"{target}.partial"))
    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in target.iterdir()) == [
        ".mig-inference-complete", "config.json", "model.safetensors",
    ]  # fmt: skip
    assert json.loads((target / "config.json").read_text()) == {"revision": "0123abcd"}
    assert not Path(f"{target}.partial").exists()
    [call] = _calls(tmp_path)
    assert call == ["hf", "download", "org/tiny-model", "config.json", "model.safetensors",
                    "--revision", "0123abcd", "--local-dir", f"{target}.partial"]  # fmt: skip


def test_a_bucket_fill_copies_new_files_and_leaves_no_staging(tmp_path: Path) -> None:
    target = tmp_path / "bucket" / "org" / "tiny-model" / "0123abcd"
    staging = tmp_path / "staging" / "model"
    result = _run(tmp_path, target, staging, command="huggingface-cli")
    assert result.returncode == 0, result.stderr
    assert (target / "model.safetensors").stat().st_size == 1024
    assert (target / ".mig-inference-complete").exists()
    assert not staging.exists()
    assert _calls(tmp_path)[0][0] == "huggingface-cli"


def test_a_filled_revision_is_not_downloaded_again(tmp_path: Path) -> None:
    target = tmp_path / "models" / "rev"
    assert _run(tmp_path, target, Path(f"{target}.partial")).returncode == 0
    again = _run(tmp_path, target, Path(f"{target}.partial"))
    assert again.returncode == 0
    assert "already in the cache" in again.stdout
    assert len(_calls(tmp_path)) == 1


@pytest.mark.parametrize(("mode", "message"), [("fail", ""), ("empty", "downloaded no files")])
def test_a_failed_download_leaves_no_marker(tmp_path: Path, mode: str, message: str) -> None:
    target = tmp_path / "models" / "rev"
    target.mkdir(parents=True)
    (target / "half.safetensors").write_text("left by an earlier run")
    result = _run(tmp_path, target, Path(f"{target}.partial"), mode=mode)
    assert result.returncode != 0
    assert message in result.stderr
    assert not (target / ".mig-inference-complete").exists()
    # The next run (the Job's retry) starts over and fills it.
    assert _run(tmp_path, target, Path(f"{target}.partial")).returncode == 0
    assert not (target / "half.safetensors").exists()
    assert (target / ".mig-inference-complete").exists()


def test_without_a_downloader_it_says_so(tmp_path: Path) -> None:
    target = tmp_path / "models" / "rev"
    result = subprocess.run(
        ["/bin/sh", "-c", load("populate.sh")],
        env={"PATH": "/usr/bin:/bin", "MODEL": "m/n", "REVISION": "main", "TARGET": str(target),
             "STAGING": f"{target}.partial", "HOME": os.environ.get("HOME", "/tmp"),
             "ENGINE_FILES": "print('config.json')"},
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert result.returncode != 0
    assert "neither hf nor huggingface-cli" in result.stderr


# -- only what the engines load ----------------------------------------------------------------

MISTRAL = {
    "files": [
        "config.json", "generation_config.json", "params.json", "tekken.json",
        "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
        "consolidated.safetensors", "model.safetensors.index.json",
        "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors", "README.md",
    ],
    "maps": {"model.safetensors.index.json": {
        "model.embed_tokens.weight": "model-00001-of-00002.safetensors",
        "model.norm.weight": "model-00002-of-00002.safetensors",
        "lm_head.weight": "model-00002-of-00002.safetensors",
    }},
}  # fmt: skip
"""Mistral-Nemo's shape: the consolidated weights and the same weights sharded, with an index."""
LLAMA = {
    "files": [
        "config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json",
        "special_tokens_map.json", "model.safetensors.index.json",
        "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors",
        "original/consolidated.00.pth", "original/params.json", "original/tokenizer.model",
        "LICENSE", "USE_POLICY.md",
    ],
    "maps": {"model.safetensors.index.json": {
        "model.embed_tokens.weight": "model-00001-of-00002.safetensors",
        "lm_head.weight": "model-00002-of-00002.safetensors",
    }},
}  # fmt: skip
"""Llama's shape: sharded weights and the original checkpoint in a folder."""
SHARDS = ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]


@pytest.mark.parametrize("repo", [MISTRAL, LLAMA], ids=["mistral", "llama"])
def test_the_fill_downloads_one_weight_set_and_its_metadata(
    tmp_path: Path, repo: dict[str, Any]
) -> None:
    target = tmp_path / "models" / "rev"
    result = _run(tmp_path, target, Path(f"{target}.partial"), repo=repo)
    assert result.returncode == 0, result.stderr
    cached = {p.relative_to(target).as_posix() for p in target.rglob("*") if p.is_file()}
    weights = sorted(n for n in cached if n.endswith(".safetensors"))
    # One weight set: vLLM's streamer reads every *.safetensors under the path and TGI every one
    # at its top, and vLLM would take consolidated*.safetensors for the Mistral format.
    assert weights == SHARDS
    assert not any(n.startswith("original/") or n.endswith(".pth") for n in cached)
    top_metadata = {n for n in repo["files"] if "/" not in n and n.endswith((".json", ".model"))}
    assert top_metadata <= cached
    assert not {"README.md", "LICENSE", "USE_POLICY.md"} & cached


def test_a_repository_without_safetensors_is_refused_with_the_reason(tmp_path: Path) -> None:
    target = tmp_path / "models" / "rev"
    repo = {"files": ["config.json", "pytorch_model.bin"], "maps": {}}
    result = _run(tmp_path, target, Path(f"{target}.partial"), repo=repo)
    assert result.returncode != 0
    assert "has no safetensors weights" in result.stderr
    assert _calls(tmp_path) == []  # nothing downloaded
    assert not target.exists()


def test_engine_files_follow_the_engines_loaders() -> None:
    # The index names the shards (and may put them in a folder); without one, the top level's
    # Hugging Face files; the consolidated set only when there is no other.
    assert engine_files(["config.json", "model.safetensors"]) == [
        "config.json", "model.safetensors",
    ]  # fmt: skip
    assert engine_files(
        ["config.json", "weights/a.safetensors", "model.safetensors.index.json"],
        index=["weights/a.safetensors", "weights/a.safetensors"],
    ) == ["config.json", "model.safetensors.index.json", "weights/a.safetensors"]
    assert engine_files(["params.json", "tekken.json", "consolidated.safetensors"]) == [
        "consolidated.safetensors", "params.json", "tekken.json",
    ]  # fmt: skip
    assert engine_files(
        ["params.json", "consolidated-00001-of-00002.safetensors",
         "consolidated-00002-of-00002.safetensors", "consolidated.safetensors.index.json"],
        consolidated_index=["consolidated-00001-of-00002.safetensors"],
    ) == ["consolidated-00001-of-00002.safetensors", "consolidated.safetensors.index.json",
          "params.json"]  # fmt: skip
    with pytest.raises(NoWeights):
        engine_files(["config.json", "model.bin", "original/model.safetensors"])
