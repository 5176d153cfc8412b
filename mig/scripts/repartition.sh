#!/bin/sh
# In-place re-partitioning of one pool: see mig/repartition.py, which fills in the
# upper-case label placeholders.
set -eu
POLL=${REPARTITION_POLL_SECONDS:-10}
if [ -n "${REPARTITION_SELECTOR:-}" ]; then
  nodes=$(kubectl get nodes -l "$REPARTITION_SELECTOR" -o jsonpath='{range .items[*]}{.metadata.name}{"\n"}{end}')
else
  nodes=$REPARTITION_NODES
fi

state_of() {
  kubectl get node "$1" -o jsonpath='{.metadata.labels.CONFIG_PATH}{"|"}{.metadata.labels.STATE_PATH}'
}

# namespace/name of every running pod on node $1 that holds GPU or MIG devices
gpu_pods() {
  kubectl get pods --all-namespaces \
    --field-selector "spec.nodeName=$1,status.phase!=Succeeded,status.phase!=Failed" \
    -o jsonpath='{range .items[*]}{.metadata.namespace}{"/"}{.metadata.name}{" "}{.spec.containers[*].resources.limits}{" "}{.spec.initContainers[*].resources.limits}{"\n"}{end}' \
    | awk '/nvidia\.com\/(mig-|gpu)/ {print $1}'
}

# Evict through the Eviction API, so PodDisruptionBudgets decide; 1 when refused.
evict() {
  ns=${1%%/*}
  name=${1#*/}
  body="{\"apiVersion\":\"policy/v1\",\"kind\":\"Eviction\",\"metadata\":{\"name\":\"$name\",\"namespace\":\"$ns\"}}"
  if out=$(printf '%s' "$body" | kubectl create --raw "/api/v1/namespaces/$ns/pods/$name/eviction" -f - 2>&1); then
    echo "  evicted $1"
    return 0
  fi
  case "$out" in
    *NotFound*|*"not found"*) return 0 ;;
  esac
  echo "  eviction of $1 refused (retrying): $out"
  return 1
}

stop() {
  echo "STOPPED at node $1: $2"
  echo "node $1 stays cordoned; once fixed: kubectl uncordon $1"
  if [ -n "$3" ]; then
    echo "left untouched (still on their old config):$3"
  fi
  exit 1
}

todo=""
for node in $nodes; do
  if [ "$(state_of "$node")" = "$TARGET_CONFIG|success" ]; then
    echo "node $node: already on $TARGET_CONFIG"
  else
    todo="$todo $node"
  fi
done
if [ -z "$todo" ]; then
  echo "nothing to re-partition: every node is on $TARGET_CONFIG"
  exit 0
fi

# Word splitting is wanted: node names are DNS labels.
# shellcheck disable=SC2086
set -- $todo
while [ $# -gt 0 ]; do
  batch=""
  taken=0
  while [ $# -gt 0 ] && [ "$taken" -lt "$MAX_UNAVAILABLE" ]; do
    batch="$batch $1"
    shift
    taken=$((taken + 1))
  done
  rest=""
  for node in "$@"; do rest="$rest $node"; done
  deadline=$(( $(date +%s) + NODE_TIMEOUT_SECONDS ))
  for node in $batch; do
    kubectl cordon "$node" >/dev/null
    echo "node $node: cordoned"
  done
  for node in $batch; do
    while :; do
      pods=$(gpu_pods "$node")
      if [ -z "$pods" ]; then
        break
      fi
      for pod in $pods; do
        evict "$pod" || true
      done
      if [ "$(date +%s)" -ge "$deadline" ]; then
        held=$(printf '%s' "$pods" | tr '\n' ' ')
        stop "$node" "after ${NODE_TIMEOUT_SECONDS}s these pods still hold its GPUs (a PodDisruptionBudget refuses their eviction, or they are slow to stop): $held" "$rest"
      fi
      sleep "$POLL"
    done
    echo "node $node: no pod holds a GPU or MIG device"
  done
  for node in $batch; do
    kubectl label node "$node" "CONFIG_LABEL=$TARGET_CONFIG" "STATE_LABEL-" --overwrite >/dev/null
    echo "node $node: CONFIG_LABEL=$TARGET_CONFIG"
  done
  for node in $batch; do
    pending_since=""
    while :; do
      current=$(state_of "$node")
      config=${current%%|*}
      state=${current#*|}
      case "$state" in
        success)
          if [ "$config" = "$TARGET_CONFIG" ]; then
            break
          fi
          ;;
        failed)
          stop "$node" "STATE_LABEL=failed (config $config); see kubectl logs -l app=nvidia-mig-manager" "$rest"
          ;;
        pending)
          if [ -z "$pending_since" ]; then
            pending_since=$(date +%s)
          fi
          if [ $(( $(date +%s) - pending_since )) -ge "$PENDING_LIMIT_SECONDS" ]; then
            stop "$node" "STATE_LABEL=pending for ${PENDING_LIMIT_SECONDS}s without moving" "$rest"
          fi
          ;;
        *)
          pending_since=""
          ;;
      esac
      if [ "$(date +%s)" -ge "$deadline" ]; then
        stop "$node" "timed out after ${NODE_TIMEOUT_SECONDS}s (STATE_LABEL=${state:-unset})" "$rest"
      fi
      sleep "$POLL"
    done
    kubectl uncordon "$node" >/dev/null
    echo "node $node: $TARGET_CONFIG applied; uncordoned"
  done
done
echo "re-partitioned to $TARGET_CONFIG:$todo"
