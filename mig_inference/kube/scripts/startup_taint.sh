#!/bin/sh
# The startup-taint agent: see mig_inference/kube/startup_taints.py, which fills in the
# upper-case placeholders. On the nodes of each autoscaled MIG pool, the Cluster Autoscaler's
# startup taint STARTUP_TAINT_NAME comes off once the node carries its pool's config, reports
# success, has no operand paused and advertises the devices the plan gives it: until then the
# autoscaler counts the node as still starting, and grows the pool no further for the pods that
# wait for it. The agent never adds the taint (the cloud puts it on new nodes) and touches no
# other; API errors are tried again on the next round. AGENT_ROUNDS ends it after that many
# rounds (0: never).
set -euf
POLL=${AGENT_POLL_SECONDS:-15}
ROUNDS=${AGENT_ROUNDS:-0}
KUBECTL_TRIES=1
# shellcheck source=mig_inference/kube/scripts/kube.sh
. ./kube.sh

FIELDS='{range .items[*]}{.metadata.name}{"|"}{.metadata.labels.CONFIG_PATH}{"|"}{.metadata.labels.STATE_PATH}{"|"}{.metadata.labels}{"|"}{.status.allocatable}{"|"}{.spec.taints[*].key}{"\n"}{end}'
round=0
while :; do
  while read -r pool selector config capacity; do
    [ -n "$pool" ] || continue
    planned=$(printf '%s' "$capacity" | tr ',' ' ')
    if ! kc get nodes -l "$selector" -o "jsonpath=$FIELDS"; then
      echo "pool $pool: reading its nodes failed (tried again next round): $err"
      continue
    fi
    while IFS='|' read -r node node_config node_state node_labels node_alloc node_taints; do
      [ -n "$node" ] || continue
      is_in STARTUP_TAINT_NAME "$node_taints" || continue
      [ "$node_config" = "$config" ] && [ "$node_state" = success ] || continue
      [ -z "$(paused_labels "$node_labels")" ] || continue
      [ "$(gpu_devices "$node_alloc")" = "$planned" ] || continue
      if kc taint nodes "$node" "STARTUP_TAINT_NAME:NoSchedule-"; then
        echo "node $node (pool $pool): advertises its planned devices ($planned); removed the startup taint STARTUP_TAINT_NAME"
      else
        echo "node $node (pool $pool): removing the startup taint failed (tried again next round): $err"
      fi
    done <<NODES
$out
NODES
  done <<TARGETS
$AGENT_TARGETS
TARGETS
  round=$((round + 1))
  if [ "$ROUNDS" -gt 0 ] && [ "$round" -ge "$ROUNDS" ]; then
    exit 0
  fi
  sleep "$POLL"
done
