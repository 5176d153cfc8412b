#!/bin/sh
# The MIG-ready gate: see mig/gate.py, which fills in the upper-case label placeholders.
set -eu
deadline=$(( $(date +%s) + GATE_TIMEOUT_SECONDS ))
while :; do
  ready=1
  report=""
  while read -r pool selector config want; do
    [ -n "$pool" ] || continue
    # A passing API error counts as "not ready yet", not as the gate's failure.
    states=$(kubectl get nodes -l "$selector" -o jsonpath='{range .items[*]}{.metadata.name}{"|"}{.metadata.labels.CONFIG_PATH}{"|"}{.metadata.labels.STATE_PATH}{"\n"}{end}') || states=""
    failed=$(printf '%s\n' "$states" | awk -F'|' '$3 == "failed" {print $1 " (config " $2 ")"}')
    if [ -n "$failed" ]; then
      printf '%s\n' "$failed" | while read -r node rest; do
        echo "MIG config failed on node $node $rest (pool $pool): STATE_LABEL=failed"
      done
      echo "see: kubectl logs -n <gpu-operator namespace> -l app=nvidia-mig-manager"
      exit 1
    fi
    done_count=$(printf '%s\n' "$states" | awk -F'|' -v c="$config" '$2 == c && $3 == "success"' | wc -l)
    stale=$(printf '%s\n' "$states" | awk -F'|' -v c="$config" '$1 != "" && $2 != c' | wc -l)
    report="$report $pool:$done_count/$want"
    if [ "$stale" -gt 0 ]; then
      report="$report($stale not yet $config)"
    fi
    if [ "$done_count" -lt "$want" ]; then
      ready=0
    fi
  done <<TARGETS
$GATE_TARGETS
TARGETS
  if [ "$ready" -eq 1 ]; then
    echo "MIG ready:$report"
    exit 0
  fi
  if [ "$(date +%s)" -ge "$deadline" ]; then
    echo "timed out waiting for CONFIG_LABEL and STATE_LABEL=success:$report"
    kubectl get nodes -L CONFIG_LABEL -L STATE_LABEL -L POOL_LABEL || true
    exit 1
  fi
  echo "waiting for STATE_LABEL=success:$report"
  sleep "${GATE_POLL_SECONDS:-10}"
done
