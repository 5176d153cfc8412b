"""A fake `pulumi` CLI for the Automation API: it records every command line it is given and
plays back scripted outcomes of `up` and `destroy`.

It answers the commands `pulumi.automation` (pulumi 3.272) runs for a LocalWorkspace, with
the output formats the real CLI prints (pulumi/pulumi at 1b5949891b3c,
pkg/cmd/pulumi/stack/stack_list.go, stack_history.go, stack_tag.go, stack_output.go; times
in cmd.FormatTime's "2006-01-02T15:04:05.000Z07:00"; a missing stack's error text from
pkg/backend/backenderr): `version`, `stack select|init|ls|tag set|tag ls|output|history|
export|rm`, `up`, `destroy`. Anything else fails, so a new command the SDK starts to run is
noticed.

Environment: FAKE_PULUMI_STATE (a JSON file: stacks, tags, resources, outputs, history),
FAKE_PULUMI_SCENARIO (a JSON file: {"up": [...], "destroy": [...]}, each entry
{"exit", "stdout", "stderr", "resources", "outputs", "secret_outputs"} used once, in order;
none left: success), FAKE_PULUMI_LOG (JSON lines: every argv), FAKE_PULUMI_FAIL (a command
line prefix, `stack ls`, that fails as the CLI does when not logged in).
"""

from __future__ import annotations

import datetime
import json
import os
import sys
from pathlib import Path
from typing import Any

VERSION = "v3.200.0"


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.000Z")


def _load(path: str, default: Any) -> Any:
    file = Path(path)
    return json.loads(file.read_text()) if file.exists() else default


def _save(path: str, value: Any) -> None:
    Path(path).write_text(json.dumps(value, indent=1))


def _option(args: list[str], name: str) -> str | None:
    return args[args.index(name) + 1] if name in args else None


def _all(args: list[str], name: str) -> list[str]:
    return [args[i + 1] for i, arg in enumerate(args) if arg == name]


def _missing(name: str) -> int:
    print(f"error: no stack named '{name}' found", file=sys.stderr)
    return 255


def main(argv: list[str]) -> int:
    with open(os.environ["FAKE_PULUMI_LOG"], "a", encoding="utf-8") as log:
        log.write(json.dumps({"argv": argv}) + "\n")
    args = [a for a in argv if a != "--non-interactive"]
    if args == ["version"]:
        print(VERSION)
        return 0
    failing = os.environ.get("FAKE_PULUMI_FAIL", "")
    if failing and " ".join(args).startswith(failing):
        print("error: PULUMI_ACCESS_TOKEN must be set for login during non-interactive CLI "
              "sessions", file=sys.stderr)  # fmt: skip
        return 255
    state_path = os.environ["FAKE_PULUMI_STATE"]
    state = _load(state_path, {"stacks": {}, "current": None})
    stacks: dict[str, Any] = state["stacks"]
    name = _option(args, "--stack")
    command = args[:3] if args[:1] == ["stack"] else args[:1]

    def stack() -> dict[str, Any] | None:
        return stacks.get(name) if name else None

    if command[:2] == ["stack", "select"]:
        if stack() is None:
            return _missing(name or "")
        state["current"] = name
    elif command[:2] == ["stack", "init"]:
        new = args[2]
        if new in stacks:
            print(f"error: stack '{new}' already exists", file=sys.stderr)
            return 255
        stacks[new] = {"tags": {}, "resources": [], "outputs": {}, "secret_outputs": [],
                       "history": []}  # fmt: skip
        state["current"] = new
    elif command[:2] == ["stack", "ls"]:
        print(json.dumps([
            {"name": n, "current": n == state["current"], "resourceCount": len(s["resources"]),
             **({"lastUpdate": s["history"][0]["startTime"]} if s["history"] else {})}
            for n, s in stacks.items()
        ]))  # fmt: skip
    elif command == ["stack", "tag", "set"] or command == ["stack", "tag", "ls"]:
        found = stack()
        if found is None:
            return _missing(name or "")
        if args[2] == "set":
            found["tags"][args[3]] = args[4]
        else:
            print(json.dumps(found["tags"]))
    elif command[:2] == ["stack", "output"]:
        found = stack()
        if found is None:
            return _missing(name or "")
        shown = "--show-secrets" in args
        print(json.dumps({
            key: value if shown or key not in found["secret_outputs"] else "[secret]"
            for key, value in found["outputs"].items()
        }))  # fmt: skip
    elif command[:2] == ["stack", "history"]:
        found = stack()
        if found is None:
            return _missing(name or "")
        print(json.dumps(found["history"][:1] if "--page-size" in args else found["history"]))
    elif command[:2] == ["stack", "export"]:
        found = stack()
        if found is None:
            return _missing(name or "")
        print(json.dumps({"version": 3, "deployment": {"resources": found["resources"]}}))
    elif command[:2] == ["stack", "rm"]:
        gone = args[-1]
        if gone not in stacks:
            return _missing(gone)
        del stacks[gone]
    elif command in (["up"], ["destroy"]):
        found = stack()
        if found is None:
            return _missing(name or "")
        scenario_path = os.environ.get("FAKE_PULUMI_SCENARIO", "")
        scenario = _load(scenario_path, {}) if scenario_path else {}
        queue = scenario.get(command[0], [])
        step = queue.pop(0) if queue else {"exit": 0}
        if scenario_path:
            _save(scenario_path, scenario)
        print(step.get("stdout", f"{command[0]} of {name}"))
        if step.get("stderr"):
            print(step["stderr"], file=sys.stderr)
        if step.get("exit", 0) == 0:
            if command == ["up"]:
                found["resources"] = step.get("resources", found["resources"])
                found["outputs"] = step.get("outputs", found["outputs"])
                found["secret_outputs"] = step.get("secret_outputs", found["secret_outputs"])
            else:
                found["resources"], found["outputs"] = [], {}
            found["history"].insert(0, {
                "version": len(found["history"]) + 1, "kind": "update" if command == ["up"]
                else "destroy", "startTime": _now(), "endTime": _now(),
                "message": _option(args, "--message") or "", "environment": {}, "config": {},
                "result": "succeeded", "resourceChanges": {},
            })  # fmt: skip
        _save(state_path, state)
        return int(step.get("exit", 0))
    else:
        print(f"fake pulumi: unsupported command {args}", file=sys.stderr)
        return 2
    _save(state_path, state)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
