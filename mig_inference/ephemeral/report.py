"""What an ephemeral run reports: the verify Jobs found in the stack's state, their results
(from the Jobs' status and, when their logs could be read, each request's latency), and the
lines of Pulumi's output that name a failing service."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from msgspec import Struct

from mig_inference.verify.probe import REPORT_KEY
from mig_inference.verify.targets import VERIFY_APP, VERIFY_COMPONENT

JOB_TYPE = "kubernetes:batch/v1:Job"
FAILURE_MARKERS = ("verify failed:", "slice check failed:", "mig-slice-check")
"""What the verify Job's and the slice check's messages say, as Pulumi relays them."""


class VerifyJob(Struct, frozen=True):
    urn: str
    service: str
    name: str
    namespace: str
    succeeded: bool
    failed: bool
    started: str | None
    completed: str | None


def verify_jobs(deployment: Mapping[str, Any] | None) -> list[VerifyJob]:
    """The verify Jobs in a stack's state (`pulumi stack export`'s `deployment`)."""
    found = []
    for resource in (deployment or {}).get("resources") or []:
        if resource.get("type") != JOB_TYPE:
            continue
        outputs = resource.get("outputs") or {}
        metadata = outputs.get("metadata") or {}
        labels = metadata.get("labels") or {}
        if (
            labels.get("app.kubernetes.io/name") != VERIFY_APP
            or labels.get("app.kubernetes.io/component") != VERIFY_COMPONENT
        ):
            continue
        status = outputs.get("status") or {}
        found.append(
            VerifyJob(
                urn=resource["urn"],
                service=labels.get("app.kubernetes.io/instance", "?"),
                name=metadata.get("name", "?"),
                namespace=metadata.get("namespace", "default"),
                succeeded=bool(status.get("succeeded")),
                failed=bool(status.get("failed")),
                started=status.get("startTime"),
                completed=status.get("completionTime"),
            )
        )
    return sorted(found, key=lambda job: job.service)


def log_report(log: str) -> dict[str, Any] | None:
    """The result the probe printed last (its JSON line), or None."""
    for line in reversed(log.splitlines()):
        line = line.strip()
        if line.startswith("{") and REPORT_KEY in line:
            try:
                parsed = json.loads(line)
            except ValueError:
                continue
            if isinstance(parsed, dict) and isinstance(parsed.get(REPORT_KEY), dict):
                return parsed[REPORT_KEY]  # type: ignore[no-any-return]
    return None


FOLLOWING = ("request:", "answer:")
"""The lines of a verify Job's message after its first: the request it sent, what came back."""


def failure_lines(output: str) -> list[str]:
    """The lines of Pulumi's output that name a failing service (the verify Job's or the slice
    check's own words, relayed by Pulumi's Job and Deployment awaits) and the request and
    answer that follow them, each once."""
    seen: dict[str, None] = {}
    following = False
    for line in output.splitlines():
        # Pulumi lists several errors of one resource as `* <error>`.
        text = line.strip().removeprefix("* ")
        if any(marker in text for marker in FAILURE_MARKERS):
            seen.setdefault(text, None)
            following = True
        elif following and text.startswith(FOLLOWING):
            seen.setdefault(text, None)
        else:
            following = False
    return list(seen)


def verify_report(
    stack: str,
    jobs: Sequence[VerifyJob],
    logs: Mapping[str, str],
    failures: Iterable[str],
    ok: bool,
) -> dict[str, Any]:
    """The report `ephemeral verify --report FILE` writes. `logs` maps a Job's name to its log,
    or to why it could not be read (a line starting with `not read:`)."""
    services = []
    for job in jobs:
        log = logs.get(job.name, "not read: no log collected")
        result = None if log.startswith("not read:") else log_report(log)
        services.append(
            {
                "service": job.service,
                "job": f"{job.namespace}/{job.name}",
                "passed": job.succeeded and not job.failed,
                "started": job.started,
                "completed": job.completed,
                "requests": result.get("requests") if result else None,
                "answer": result.get("answer") if result else None,
                "problem": result.get("problem") if result else None,
                "log": None if result else log,
            }
        )
    return {"stack": stack, "passed": ok, "services": services, "failures": list(failures)}
