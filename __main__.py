"""The Pulumi program: stack config -> validated spec -> MIG plan -> cloud resources.

Today it resolves every pool's GPU model and MIG config through the domain, so `pulumi preview`
already refuses an unknown GPU or an impossible layout, and exports the per-GPU layouts.
"""

from typing import Any

import pulumi

from mig.catalog import resolve_gpu
from mig.errors import MigError
from mig.migparted import resolve_config

config = pulumi.Config("mig-inference")
pools: list[dict[str, Any]] = config.get_object("pools") or []

layouts: dict[str, Any] = {}
for index, pool in enumerate(pools):
    path = f"mig-inference:pools[{index}]"
    try:
        gpu = resolve_gpu(str(pool.get("gpu", "")))
        resolved = resolve_config(gpu, pool.get("mig", "all-disabled"))
    except MigError as error:
        # RunError ends the program with just this message: no traceback for bad input.
        raise pulumi.RunError(str(error.at(path))) from None
    layouts[str(pool.get("name", index))] = {
        "gpu": gpu.name,
        "mig_config": resolved.name,
        "layout": resolved.layout.as_dict() if resolved.layout else None,
    }

pulumi.export("pools", layouts)
