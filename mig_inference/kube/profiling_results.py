"""Reading profiling runs' logs into a throughput file (`mig-inference throughput`)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mig_inference.errors import MigError
from mig_inference.kube.scripts import THROUGHPUT_MARKER
from mig_inference.stackfile.yamlfile import read_text


def _result(line: str, where: str) -> dict[str, Any]:
    text = line.split(THROUGHPUT_MARKER, 1)[1].strip()
    try:
        found = json.loads(text)
    except json.JSONDecodeError as error:
        raise MigError(f"a result line that is not JSON ({error.msg})", where) from None
    rate = found.get("requestsPerSecond") if isinstance(found, dict) else None
    if not isinstance(found, dict) or not isinstance(found.get("profile"), str):
        raise MigError("a result line without a profile", where)
    if isinstance(rate, bool) or not isinstance(rate, int | float) or rate <= 0:
        raise MigError(f"a result line whose requestsPerSecond is {rate!r}", where)
    keys = ("profile", "requestsPerSecond", "batch", "latencyMs", "measured")
    return {key: found[key] for key in keys if found.get(key) is not None}


def throughput_table(logs: Sequence[Path]) -> dict[str, Any]:
    """`throughput:` for a stack's `throughputFile`: the best measured rate per profile found
    in the runs' logs (`kubectl logs job/<name>` of each profiling Job)."""
    best: dict[str, dict[str, Any]] = {}
    for path in logs:
        found = 0
        for number, line in enumerate(read_text(path, "log").splitlines(), start=1):
            if THROUGHPUT_MARKER not in line:
                continue
            result = _result(line, f"{path}:{number}")
            found += 1
            held = best.get(result["profile"])
            if held is None or result["requestsPerSecond"] > held["requestsPerSecond"]:
                best[result["profile"]] = result
        if not found:
            raise MigError(
                f"no result line ({THROUGHPUT_MARKER} {{...}}): did the run finish? Read it with "
                "`kubectl logs job/<name>`",
                str(path),
            )
    return {"throughput": [best[name] for name in sorted(best)]}
