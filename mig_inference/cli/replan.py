"""`replan`: the stack re-planned from the load Prometheus observed, with what applying it costs,
and (`--write`) the re-planned stack file, written whole or not at all."""

from __future__ import annotations

import argparse
import math
import os
import stat
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from mig_inference.cli.common import Verb, print_json, stack_arguments, stack_file_path, warn
from mig_inference.cli.diff import change_from, current_version
from mig_inference.errors import MigError

DEFAULT_WINDOW = "1h"
DAY = 86400
RETENTION_DAYS = 15
"""Prometheus' default `--storage.tsdb.retention.time`: older samples are gone unless raised."""
DEFAULT_QUANTILE = 0.95


def register(verb: Verb) -> None:
    sub = verb(
        "replan",
        _replan,
        "re-plan a stack from the load its vLLM engines served (Prometheus), with the change",
    )
    stack_arguments(sub)
    sub.add_argument("--prometheus", required=True, metavar="URL", help="Prometheus' base URL")
    sub.add_argument(
        "--window",
        default=DEFAULT_WINDOW,
        help=f"how far back to look, a Prometheus duration (default {DEFAULT_WINDOW}; 10m or more)",
    )
    sub.add_argument(
        "--end",
        metavar="TIME",
        help="the window's end: unix seconds or RFC 3339 (2026-06-01T12:00:00Z); default "
        "Prometheus' own now",
    )
    sub.add_argument(
        "--quantile",
        type=float,
        default=DEFAULT_QUANTILE,
        help="the quantile of each minute's 5-minute request rate that sizes a service "
        f"(default {DEFAULT_QUANTILE}; 1 is the peak)",
    )
    sub.add_argument(
        "--min-samples",
        type=int,
        default=10,
        metavar="N",
        help="one-minute rate samples a service needs before its figure is trusted (default 10)",
    )
    sub.add_argument(
        "--tolerance",
        type=float,
        default=10.0,
        metavar="PERCENT",
        help="leave a requestsPerSecond within this many percent of the observed rate (default 10)",
    )
    sub.add_argument(
        "--saturated-queue-seconds",
        type=float,
        default=0.5,
        metavar="S",
        help="mean queue time from which a service is saturated: it may grow, never shrink "
        "(default 0.5)",
    )
    sub.add_argument(
        "--selector",
        metavar="MATCHERS",
        help='label matchers added to every series read, e.g. cluster="prod-1"',
    )
    token = sub.add_mutually_exclusive_group()
    token.add_argument("--bearer-token-file", metavar="FILE", help="a file holding a bearer token")
    token.add_argument("--bearer-token-env", metavar="VAR", help="a variable holding one")
    token.add_argument("--basic-auth-user", metavar="USER", help="basic auth's user name")
    password = sub.add_mutually_exclusive_group()
    password.add_argument(
        "--basic-auth-password-file", metavar="FILE", help="a file holding its password"
    )
    password.add_argument("--basic-auth-password-env", metavar="VAR", help="a variable holding it")
    sub.add_argument("--ca-file", metavar="PEM", help="certificate authorities to trust (https)")
    sub.add_argument(
        "--timeout", type=float, default=30.0, metavar="S", help="per query (default 30)"
    )
    sub.add_argument("--write", metavar="FILE", help="write the re-planned stack file here")


def _end(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        return float(text)
    except ValueError:
        pass
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        moment = None
    if moment is None or moment.tzinfo is None:
        raise MigError(
            "must be unix seconds or an RFC 3339 time with its zone, e.g. 2026-06-01T12:00:00Z",
            "--end",
            value=text,
        )
    return moment.timestamp()


def _secret(file: str | None, variable: str | None, option: str) -> str | None:
    """A credential from a file (its first line) or an environment variable; never echoed."""
    if file is not None:
        try:
            value = Path(file).read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as error:
            reason = getattr(error, "strerror", None) or "not UTF-8 text"
            raise MigError(f"cannot read: {reason}", f"{option}-file", value=file) from None
        if not value:
            raise MigError("is empty", f"{option}-file", value=file)
        return value
    if variable is not None:
        value = os.environ.get(variable, "").strip()
        if not value:
            raise MigError("names an environment variable that is unset or empty",
                           f"{option}-env", value=variable)  # fmt: skip
        return value
    return None


def _credentials(args: argparse.Namespace) -> Any:
    from mig_inference.changes.prometheus import Credentials

    password = _secret(
        args.basic_auth_password_file, args.basic_auth_password_env, "--basic-auth-password"
    )
    if password is not None and args.basic_auth_user is None:
        raise MigError("needs --basic-auth-user", "--basic-auth-password")
    if password is None and args.basic_auth_user is not None:
        raise MigError(
            "needs its password: give --basic-auth-password-file or --basic-auth-password-env",
            "--basic-auth-user",
            value=args.basic_auth_user,
        )
    return Credentials(
        bearer_token=_secret(args.bearer_token_file, args.bearer_token_env, "--bearer-token"),
        user=args.basic_auth_user,
        password=password,
    )


def _rules(args: argparse.Namespace) -> Any:
    from mig_inference.changes.replan import ReplanRules

    if not 0 < args.quantile <= 1:
        raise MigError("must be in (0, 1]", "--quantile", value=args.quantile)
    if args.min_samples < 1:
        raise MigError("must be at least 1", "--min-samples", value=args.min_samples)
    if not 0 <= args.tolerance < 100:
        raise MigError("must be a percentage in [0, 100)", "--tolerance", value=args.tolerance)
    if not args.saturated_queue_seconds > 0:
        raise MigError("must be above 0", "--saturated-queue-seconds",
                       value=args.saturated_queue_seconds)  # fmt: skip
    if not args.timeout > 0:
        raise MigError("must be above 0", "--timeout", value=args.timeout)
    return ReplanRules(args.min_samples, args.tolerance / 100, args.saturated_queue_seconds)


def _target(text: str) -> Path:
    """The file `--write` names, through a symlink: the link stays, its target gets the text."""
    path = Path(text)
    return path.resolve() if path.is_symlink() else path


def _window_warnings(seconds: int) -> list[str]:
    days = seconds / DAY
    if days <= RETENTION_DAYS:
        return []
    return [
        f"--window is {days:g} days; Prometheus keeps {RETENTION_DAYS} days by default "
        "(--storage.tsdb.retention.time): a window older than its retention reads only what is "
        "left"
    ]


def _writable(path: Path) -> None:
    """Refuse a target that cannot or should not be replaced, before anything is asked."""
    if path.is_dir():
        raise MigError("is a directory", "--write", value=str(path))
    if path.exists() and not stat.S_IMODE(path.stat().st_mode) & 0o222:
        raise MigError("is read-only: nothing was written", "--write", value=str(path))
    if not path.parent.is_dir():
        raise MigError(f"cannot write: {path.parent} is not a directory", "--write",
                       value=str(path))  # fmt: skip
    try:  # the folder takes a new file (where the atomic write puts the text first)
        handle, name = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    except OSError as error:
        raise MigError(f"cannot write: {error.strerror}", "--write", value=str(path)) from None
    os.close(handle)
    os.unlink(name)


def _write_atomically(path: Path, text: str) -> None:
    """The whole text at `path`, or nothing: a temporary file beside it, synced, renamed over it
    (keeping an existing file's mode)."""
    mode = stat.S_IMODE(path.stat().st_mode) if path.exists() else 0o644
    try:
        handle, name = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    except OSError as error:
        raise MigError(f"cannot write: {error.strerror}", "--write", value=str(path)) from None
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(name, mode)
        os.replace(name, path)
    except OSError as error:
        Path(name).unlink(missing_ok=True)
        raise MigError(f"cannot write: {error.strerror}", "--write", value=str(path)) from None


def _replicas(plan: Any, name: str) -> int:
    return sum(p.replicas for p in plan.services if p.service_name == name)


def _rounded(value: float | None) -> float | None:
    return None if value is None or not math.isfinite(value) else round(value, 6)


def _service_json(service: Any, before: Any, after: Any) -> dict[str, Any]:
    seen = service.observation
    return {
        "name": service.name,
        "namespace": service.namespace,
        "model_name": service.model_name,
        "observed_requests_per_second": _rounded(seen.requests_per_second) if seen else None,
        "mean_requests_per_second": _rounded(seen.mean_requests_per_second) if seen else None,
        "samples": seen.samples if seen else 0,
        "prompt_tokens_per_request": _rounded(seen.prompt_tokens_per_request) if seen else None,
        "generation_tokens_per_request": (
            _rounded(seen.generation_tokens_per_request) if seen else None
        ),
        "queue_seconds": _rounded(seen.queue_seconds) if seen else None,
        "first_token_seconds_p95": _rounded(seen.first_token_seconds) if seen else None,
        "key": service.key,
        "before": service.before,
        "after": service.after,
        "changed": service.changed,
        "replicas_before": _replicas(before, service.name),
        "replicas_after": _replicas(after, service.name),
        "reason": service.reason,
    }


def _figure(value: float | None) -> str:
    return "-" if value is None else f"{value:g}"


def _text(payload: dict[str, Any], change_text: str) -> str:
    lines = [
        f"replan {payload['stack']} from {payload['prometheus']}: {payload['window_seconds']:,} s "
        f"ending {payload['end_time']} (unix {payload['end']:.0f})",
        f"statistic: {payload['statistic']}",
        "",
    ]
    rows = [("service", "observed/s", "samples", "sets", "before", "after", "replicas", "why")]
    for s in payload["services"]:
        rows.append((
            s["name"],
            _figure(s["observed_requests_per_second"]),
            str(s["samples"]),
            s["key"] or "-",
            _figure(s["before"]),
            _figure(s["after"]),
            f"{s['replicas_before']} -> {s['replicas_after']}",
            s["reason"],
        ))  # fmt: skip
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    for row in rows:
        lines.append("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=False)) + "  "
                     + row[-1])  # fmt: skip
    lines += ["", "change (the re-planned stack applied to the current one):", change_text]
    if payload["written"]:
        lines.append(f"\nwrote {payload['written']}")
    return "\n".join(lines)


def _replan(args: argparse.Namespace) -> int:
    from mig_inference.changes.change_plan import change_plan_json, change_plan_text
    from mig_inference.changes.observed import Query, label_selector, observed_load, window_seconds
    from mig_inference.changes.prometheus import Prometheus
    from mig_inference.changes.replan import replan
    from mig_inference.changes.replanned_stack import replanned_stack

    query = Query(window_seconds(args.window), args.quantile, label_selector(args.selector))
    rules = _rules(args)
    end = _end(args.end)
    target = _target(args.write) if args.write else None
    if target is not None:
        _writable(target)
    prometheus = Prometheus(args.prometheus, _credentials(args), args.ca_file, args.timeout)
    path = stack_file_path(args)
    current = current_version(args)
    observed = observed_load(prometheus, query, end)
    proposal = replan(current.plan, observed.models, rules)
    replanned = replanned_stack(path, current, proposal)
    try:
        after = replanned.version.plan
    except MigError as error:
        reasons = "; ".join(str(each) for each in error.errors)
        raise MigError(
            f"the re-planned stack does not plan: {reasons}; raise the pool's nodes, or bound "
            "the service (replan.maxRequestsPerSecond, replan.maxReplicas)",
            str(path),
        ) from None
    changes = change_from(path, replanned.version)
    warnings = [*current.plan.warnings, *proposal.warnings, *_window_warnings(query.seconds)]
    if replanned.reformatted:
        warnings.append(
            f"{path}: ruamel.yaml writes {replanned.reformatted} line(s) besides the changed "
            f"values differently (from line {replanned.first_reformatted}): review the diff"
        )
    # The change is the reviewer's and the change gate's to judge (`diff`, on the pull
    # request): a re-plan whose `pulumi up` would be refused or fail is still proposed, said so.
    warnings.extend(
        f"the re-planned stack's change: {problem} (the change gate, `diff`, refuses it as is)"
        for problem in [*changes.refusals, *([changes.failure] if changes.failure else [])]
    )
    written = None
    if target is not None:
        _write_atomically(target, replanned.text)
        written = str(target)
    payload = {
        "stack": current.name,
        "stack_file": str(path),
        "written": written,
        "prometheus": prometheus.url,
        "window": args.window,
        "window_seconds": query.seconds,
        "end": observed.end,
        "end_time": datetime.fromtimestamp(observed.end, UTC).isoformat().replace("+00:00", "Z"),
        "statistic": f"the {query.quantile:g} quantile of each model's 5-minute request rate, "
        "sampled each minute of the window",
        "services": [_service_json(s, current.plan, after) for s in proposal.services],
        "change": change_plan_json(changes),
        "warnings": warnings,
        "errors": [],
    }
    warn(warnings)
    if args.json:
        print_json(payload)
    else:
        print(_text(payload, change_plan_text(changes)))
    return 0
