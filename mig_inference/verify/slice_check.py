"""The check every replica of a verified service runs first (an init container): it sees
exactly one GPU device, and that device is a MIG device of the planned profile (or, on pools
without MIG, one whole GPU). A replica on a wrong slice never starts, so it cannot pass.

This file is the whole program the init container runs (`python3 -c <this file>`, in the
pinned Python image, `VERIFY_IMAGE`): standard library only. It reads `nvidia-smi -L`, which
the NVIDIA container runtime mounts into containers given a GPU (driver capability
`utility`: "required for using nvidia-smi and NVML", NVIDIA Container Toolkit user guide) and
which GKE's own device plugin mounts at /usr/local/nvidia/bin. The init container requests the
same device as the engine: the kubelet's device manager hands an init container's devices to
the pod's containers first (kubernetes pkg/kubelet/cm/devicemanager/manager.go,
`devicesToAllocate`: "Allocates from reusableDevices list first"), so the device checked here
is the engine's.

`nvidia-smi -L` lists each GPU, and under a GPU in MIG mode each MIG device the container may
use (NVIDIA MIG User Guide, "Getting Started with MIG"):

    GPU 0: NVIDIA A100-SXM4-40GB (UUID: GPU-5d5ba0d6-d33d-2b2c-524d-9e3d8d2b8a77)
      MIG 1g.5gb      Device  0: (UUID: MIG-c6d4f1ef-42e4-5de3-91c7-45d71c87eb3f)

(older drivers print `MIG 3g.20gb Device 0: (UUID: MIG-GPU-<uuid>/1/0)`; both are read).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass

WHOLE_GPU = "gpu"
"""The profile of a pool without MIG: one whole GPU."""
GPU_LINE = re.compile(r"^GPU\s+\d+:\s*(?P<name>.*?)\s*\(UUID:\s*(?P<uuid>[^)]+)\)\s*$")
MIG_LINE = re.compile(
    r"^\s*MIG\s+(?P<profile>\S+)\s+Device\s+(?P<index>\d+):\s*\(UUID:\s*(?P<uuid>[^)]+)\)\s*$"
)
NVIDIA_SMI_PLACES = ("nvidia-smi", "/usr/local/nvidia/bin/nvidia-smi")
TERMINATION_LOG = "/dev/termination-log"


@dataclass(frozen=True)
class Devices:
    gpus: tuple[str, ...]
    """The GPUs listed (`<name> <uuid>`)."""
    mig: tuple[str, ...]
    """The profile of each MIG device listed."""
    unread: tuple[str, ...]
    """Lines that are neither (a warning or an error of nvidia-smi)."""


def parse(output: str) -> Devices:
    gpus, mig, unread = [], [], []
    for line in output.splitlines():
        if not line.strip():
            continue
        if found := GPU_LINE.match(line):
            gpus.append(f"{found['name']} {found['uuid']}")
        elif found := MIG_LINE.match(line):
            mig.append(found["profile"])
        else:
            unread.append(line.strip())
    return Devices(tuple(gpus), tuple(mig), tuple(unread))


def slice_problem(output: str, profile: str) -> str | None:
    """Why the devices `nvidia-smi -L` lists are not one device of `profile`, or None."""
    devices = parse(output)
    if not devices.gpus:
        why = f": {'; '.join(devices.unread)}" if devices.unread else ""
        return f"nvidia-smi lists no GPU{why}"
    if profile == WHOLE_GPU:
        if devices.mig:
            return f"expected one whole GPU, sees MIG devices {list(devices.mig)}"
        if len(devices.gpus) != 1:
            return f"expected one whole GPU, sees {len(devices.gpus)}: {list(devices.gpus)}"
        return None
    if len(devices.mig) != 1:
        seen = list(devices.mig) if devices.mig else f"no MIG device ({list(devices.gpus)})"
        return f"expected one MIG device {profile}, sees {seen}"
    if devices.mig[0] != profile:
        return f"expected a MIG device {profile}, sees a {devices.mig[0]}"
    return None


def nvidia_smi_list() -> tuple[str, str | None]:
    """`nvidia-smi -L`'s output, or ("", why it could not run)."""
    for place in NVIDIA_SMI_PLACES:
        found = shutil.which(place) if "/" not in place else place
        if found and os.access(found, os.X_OK):
            run = subprocess.run(
                [found, "-L"], capture_output=True, text=True, timeout=60, check=False
            )
            if run.returncode != 0:
                return (
                    "",
                    f"{found} -L exited {run.returncode}: {(run.stderr or run.stdout).strip()}",
                )
            return run.stdout, None
    return "", f"nvidia-smi is not in this container (looked for {', '.join(NVIDIA_SMI_PLACES)})"


def main() -> int:
    profile = os.environ["MIG_EXPECT_PROFILE"]
    service = os.environ.get("MIG_SERVICE", "?")
    output, error = nvidia_smi_list()
    print(output, end="", flush=True)
    problem = error or slice_problem(output, profile)
    if problem is None:
        print(f"slice check: service {service} sees one {profile} device", flush=True)
        return 0
    message = f"slice check failed: service {service}, planned {profile}: {problem}"
    print(message, flush=True)
    try:
        with open(os.environ.get("MIG_VERIFY_TERMINATION_LOG", TERMINATION_LOG), "w") as file:
            file.write(message[:4096])
    except OSError:
        pass
    return 1


if __name__ == "__main__":
    sys.exit(main())
