#!/bin/sh
# In-place re-partitioning of one pool: see mig/repartition.py, which fills in the
# upper-case label placeholders.
set -eu
POLL=${REPARTITION_POLL_SECONDS:-10}

# kubectl, retried on a passing API error; its output on success, 1 after the last try.
k() {
  tries=0
  while :; do
    if out=$(kubectl "$@" 2>&1); then
      printf '%s' "$out"
      return 0
    fi
    case "$out" in
      *NotFound*|*"not found"*) printf '%s' "$out"; return 1 ;;
    esac
    tries=$((tries + 1))
    if [ "$tries" -ge 3 ]; then
      printf '%s' "$out"
      return 1
    fi
    sleep "$POLL"
  done
}

# The pool's nodes, listed afresh (nodes the autoscaler adds during the roll-out count too).
pool_nodes() {
  if [ -n "${REPARTITION_SELECTOR:-}" ]; then
    k get nodes -l "$REPARTITION_SELECTOR" -o jsonpath='{range .items[*]}{.metadata.name}{"\n"}{end}'
  else
    # Word splitting is wanted: node names are DNS labels, one per word.
    # shellcheck disable=SC2086
    printf '%s\n' $REPARTITION_NODES
  fi
}

# "<config>|<state>" of node $1; empty when the node is gone.
state_of() {
  k get node "$1" -o jsonpath='{.metadata.labels.CONFIG_PATH}{"|"}{.metadata.labels.STATE_PATH}' || true
}

# namespace/name of every running pod on node $1 that holds GPU or MIG devices
gpu_pods() {
  k get pods --all-namespaces \
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
  echo "node $1 stays cordoned; once fixed: kubectl uncordon $1, then pulumi up again"
  rest=""
  for node in $(pool_nodes); do
    case " $done_nodes $1 " in
      *" $node "*) ;;
      *) [ "$(state_of "$node")" = "$TARGET_CONFIG|success" ] || rest="$rest $node" ;;
    esac
  done
  if [ -n "$rest" ]; then
    echo "left untouched (still on their old config):$rest"
  fi
  exit 1
}

done_nodes=""
while :; do
  batch=""
  taken=0
  for node in $(pool_nodes); do
    case " $done_nodes " in *" $node "*) continue ;; esac
    current=$(state_of "$node")
    if [ -z "$current" ]; then
      continue  # listed, then gone: scaled away or replaced
    fi
    if [ "$current" = "$TARGET_CONFIG|success" ]; then
      echo "node $node: already on $TARGET_CONFIG"
      done_nodes="$done_nodes $node"
      continue
    fi
    if [ "$taken" -lt "$MAX_UNAVAILABLE" ]; then
      batch="$batch $node"
      taken=$((taken + 1))
    fi
  done
  if [ -z "$batch" ]; then
    break
  fi
  deadline=$(( $(date +%s) + NODE_TIMEOUT_SECONDS ))
  kept_cordoned=""
  for node in $batch; do
    if [ "$(k get node "$node" -o jsonpath='{.spec.unschedulable}' || true)" = "true" ]; then
      kept_cordoned="$kept_cordoned $node"  # cordoned by someone else: it stays so
    fi
    k cordon "$node" >/dev/null || stop "$node" "cannot cordon it"
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
        stop "$node" "after ${NODE_TIMEOUT_SECONDS}s these pods still hold its GPUs (a PodDisruptionBudget refuses their eviction, or they are slow to stop): $held"
      fi
      sleep "$POLL"
    done
    echo "node $node: no pod holds a GPU or MIG device"
  done
  for node in $batch; do
    k label node "$node" "CONFIG_LABEL=$TARGET_CONFIG" "STATE_LABEL-" --overwrite >/dev/null \
      || stop "$node" "cannot relabel it"
    echo "node $node: CONFIG_LABEL=$TARGET_CONFIG"
  done
  for node in $batch; do
    pending_since=""
    while :; do
      current=$(state_of "$node")
      if [ -z "$current" ]; then
        echo "node $node: gone (scaled away or replaced); skipped"
        break
      fi
      config=${current%%|*}
      state=${current#*|}
      case "$state" in
        success)
          if [ "$config" = "$TARGET_CONFIG" ]; then
            break
          fi
          ;;
        failed)
          stop "$node" "STATE_LABEL=failed (config $config); see kubectl logs -l app=nvidia-mig-manager"
          ;;
        pending)
          if [ -z "$pending_since" ]; then
            pending_since=$(date +%s)
          fi
          if [ $(( $(date +%s) - pending_since )) -ge "$PENDING_LIMIT_SECONDS" ]; then
            stop "$node" "STATE_LABEL=pending for ${PENDING_LIMIT_SECONDS}s without moving"
          fi
          ;;
        *)
          pending_since=""
          ;;
      esac
      if [ "$(date +%s)" -ge "$deadline" ]; then
        stop "$node" "timed out after ${NODE_TIMEOUT_SECONDS}s (STATE_LABEL=${state:-unset})"
      fi
      sleep "$POLL"
    done
    case " $kept_cordoned " in
      *" $node "*) echo "node $node: $TARGET_CONFIG applied; left cordoned as it was" ;;
      *)
        if [ -n "$(state_of "$node")" ]; then
          k uncordon "$node" >/dev/null || true
          echo "node $node: $TARGET_CONFIG applied; uncordoned"
        fi
        ;;
    esac
    done_nodes="$done_nodes $node"
  done
done
echo "re-partitioned to $TARGET_CONFIG:$done_nodes"
