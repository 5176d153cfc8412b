#!/usr/bin/env python3
"""A stand-in for `kubectl`, enough for the gate and re-partition scripts: nodes with labels and
a scripted MIG manager, pods holding devices, evictions a PodDisruptionBudget may refuse.

State lives in the JSON file named by FAKE_KUBECTL_STATE:
  nodes: {name: {labels: {...}, unschedulable: bool, joins_after: node,
                 after_relabel: [state, ...]}}  # states the MIG manager reports, one per poll,
                                                # once the node's config label changes
  pods:  [{namespace, name, node, limits: {...}, refusals: N}]  # N evictions refused (-1: all)
  log:   [commands that changed something, in order]
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

CONFIG = "nvidia.com/mig.config"
STATE = "nvidia.com/mig.config.state"


def _matches(labels: dict[str, str], selector: str) -> bool:
    return all(labels.get(k) == v for k, v in (p.split("=", 1) for p in selector.split(",") if p))


def _advance(node: dict[str, Any]) -> None:
    """One poll of a relabelled node: the MIG manager moves to its next scripted state."""
    if node.get("relabelled") and node.get("after_relabel"):
        node["labels"][STATE] = node["after_relabel"].pop(0)


def main(argv: list[str], state: dict[str, Any]) -> int:
    nodes: dict[str, dict[str, Any]] = state["nodes"]
    pods: list[dict[str, Any]] = state["pods"]
    log: list[str] = state.setdefault("log", [])
    verb = argv[0]
    if verb == "get" and argv[1] == "nodes" and "-l" in argv:
        selector = argv[argv.index("-l") + 1]
        wide = '{"|"}' in argv[-1]
        for name, node in nodes.items():
            joins_after = node.get("joins_after")  # an autoscaled node, added mid-roll-out
            if joins_after and not nodes[joins_after].get("relabelled"):
                continue
            if _matches(node["labels"], selector):
                labels = node["labels"]
                print(f"{name}|{labels.get(CONFIG, '')}|{labels.get(STATE, '')}" if wide else name)
        return 0
    if verb == "get" and argv[1] == "node":
        if argv[2] not in nodes:
            print(f'Error from server (NotFound): nodes "{argv[2]}" not found', file=sys.stderr)
            return 1
        node = nodes[argv[2]]
        if "unschedulable" in argv[-1]:
            print("true" if node.get("unschedulable") else "", end="")
            return 0
        _advance(node)
        print(f"{node['labels'].get(CONFIG, '')}|{node['labels'].get(STATE, '')}", end="")
        return 0
    if verb == "get" and argv[1] == "nodes":  # the gate's final listing
        print("\n".join(nodes))
        return 0
    if verb == "get" and argv[1] == "pods":
        selector = argv[argv.index("--field-selector") + 1]
        node_name = selector.split(",")[0].split("=", 1)[1]
        for held in pods:
            if held["node"] == node_name:
                print(f"{held['namespace']}/{held['name']} {json.dumps(held['limits'])} ")
        return 0
    if verb == "create" and argv[1] == "--raw":
        _, _, namespace, _, name, _ = argv[2].strip("/").split("/")[1:]
        json.loads(sys.stdin.read())  # the Eviction body must be JSON
        pod: dict[str, Any] | None = next(
            (p for p in pods if p["namespace"] == namespace and p["name"] == name), None
        )
        if pod is None:
            print(f'Error from server (NotFound): pods "{name}" not found', file=sys.stderr)
            return 1
        if pod.get("refusals", 0):
            pod["refusals"] -= 1 if pod["refusals"] > 0 else 0
            print(
                "Error from server (TooManyRequests): Cannot evict pod as it would violate the "
                "pod's disruption budget.",
                file=sys.stderr,
            )
            return 1
        pods.remove(pod)
        log.append(f"evict {namespace}/{name}")
        return 0
    if verb in ("cordon", "uncordon"):
        nodes[argv[1]]["unschedulable"] = verb == "cordon"
        log.append(f"{verb} {argv[1]}")
        return 0
    if verb == "label" and argv[1] == "node":
        node = nodes[argv[2]]
        for change in argv[3:]:
            if change.startswith("--"):
                continue
            if change.endswith("-"):
                node["labels"].pop(change[:-1], None)
            else:
                key, value = change.split("=", 1)
                if key == CONFIG and node["labels"].get(CONFIG) != value:
                    node["relabelled"] = True
                node["labels"][key] = value
        log.append(f"label {argv[2]} {' '.join(a for a in argv[3:] if not a.startswith('--'))}")
        return 0
    print(f"fake kubectl: unexpected command {argv}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    path = Path(os.environ["FAKE_KUBECTL_STATE"])
    data = json.loads(path.read_text())
    code = main(sys.argv[1:], data)
    path.write_text(json.dumps(data))
    sys.exit(code)
