"""The MIG-ready gate: which pools to wait for, and the POSIX shell loop the gate Job runs.

The Job succeeds once every gated pool has at least its minimum number of nodes reporting
`nvidia.com/mig.config.state=success`, and fails at once, naming the node and its state, when a
node reports `failed`, or when the deadline passes.
"""

from __future__ import annotations

import hashlib

from mig.labels import MIG_STATE_LABEL, POOL_LABEL
from mig.plan import StackPlan

GATE_SCRIPT = r"""set -eu
deadline=$(( $(date +%s) + GATE_TIMEOUT_SECONDS ))
while :; do
  ready=1
  report=""
  for target in $GATE_POOLS; do
    pool=${target%%=*}
    want=${target##*=}
    states=$(kubectl get nodes -l "POOL_LABEL=$pool" \
      -o jsonpath='{range .items[*]}{.metadata.name}{" "}{.metadata.labels.STATE_PATH}{"\n"}{end}')
    failed=$(printf '%s\n' "$states" | awk '$2 == "failed" {print $1}')
    if [ -n "$failed" ]; then
      for node in $failed; do
        echo "MIG config failed on node $node (pool $pool): STATE_LABEL=failed"
      done
      echo "see: kubectl logs -n <gpu-operator namespace> -l app=nvidia-mig-manager"
      exit 1
    fi
    done_count=$(printf '%s\n' "$states" | awk '$2 == "success"' | wc -l)
    report="$report $pool:$done_count/$want"
    if [ "$done_count" -lt "$want" ]; then
      ready=0
    fi
  done
  if [ "$ready" -eq 1 ]; then
    echo "MIG ready:$report"
    exit 0
  fi
  if [ "$(date +%s)" -ge "$deadline" ]; then
    echo "timed out waiting for STATE_LABEL=success:$report"
    kubectl get nodes -L STATE_LABEL -L POOL_LABEL || true
    exit 1
  fi
  echo "waiting for STATE_LABEL=success:$report"
  sleep "${GATE_POLL_SECONDS:-10}"
done
"""


def gate_script() -> str:
    state_path = MIG_STATE_LABEL.replace(".", "\\.")
    return (
        GATE_SCRIPT.replace("POOL_LABEL", POOL_LABEL)
        .replace("STATE_PATH", state_path)
        .replace("STATE_LABEL", MIG_STATE_LABEL)
    )


def gated_pools(plan: StackPlan) -> dict[str, int]:
    """Pools to wait for and how many nodes must report success: operator-managed pools with
    MIG enabled and at least one node (a pool scaled to zero has nothing to wait for)."""
    return {
        pool.name: pool.min_nodes
        for pool in plan.pools
        if pool.operator_managed and pool.mig_enabled and pool.min_nodes > 0
    }


def gate_pools_value(pools: dict[str, int]) -> str:
    return " ".join(f"{name}={count}" for name, count in sorted(pools.items()))


def gate_fingerprint(plan: StackPlan) -> str:
    """Changes when a gated pool's MIG config or size changes, so the gate runs again."""
    parts = sorted(
        f"{pool.name}:{pool.config_name}:{pool.min_nodes}"
        for pool in plan.pools
        if pool.name in gated_pools(plan)
    )
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:8]
