#!/bin/sh
# The MIG-ready gate: see mig_inference/kube/gate.py, which fills in the upper-case placeholders.
# A node counts once it carries its pool's config, reports success and advertises the planned
# devices; a failed node fails the gate only when it carries the pool's config (a failed left by
# an older layout says nothing about this one). On a DRA pool the devices are those the DRA driver
# publishes, and a node whose kubelet plugin started before its layout was applied gets the plugin
# restarted once (with DRA_PLUGIN_BOUNCED, only one Ready with them). A node `pending` for
# PENDING_LIMIT_SECONDS on the pool's config (the MIG manager's known wedge,
# NVIDIA/gpu-operator#2833) gets its MIG manager pod restarted once, said in the output, and so
# does a node reporting success with its operands left paused on two polls (the same wedge's
# other face). A node NotReady with its run ended in success for as long is reported
# once with the way forward (NVIDIA/gpu-operator#2415: only a new instance clears it, which EKS's
# node auto repair brings, and the gate counts); nothing on it is restarted. API errors count as
# "not ready yet".
set -euf
POLL=${GATE_POLL_SECONDS:-10}
PENDING_LIMIT_SECONDS=${GATE_PENDING_LIMIT_SECONDS:-600}
NOTREADY_LIMIT_SECONDS=${GATE_NOTREADY_LIMIT_SECONDS:-$PENDING_LIMIT_SECONDS}
KUBECTL_TRIES=1
# shellcheck source=mig_inference/kube/scripts/kube.sh
. ./kube.sh

FIELDS='{range .items[*]}{.metadata.name}{"|"}{.metadata.labels.CONFIG_PATH}{"|"}{.metadata.labels.STATE_PATH}{"|"}{.metadata.labels}{"|"}{.status.allocatable}{"|"}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}'
deadline=$(($(date +%s) + GATE_TIMEOUT_SECONDS))
while :; do
  ready=1
  report=""
  details=""
  while read -r pool selector config want capacity dra; do
    [ -n "$pool" ] || continue
    planned=$(printf '%s' "$capacity" | tr ',' ' ')
    if ! kc get nodes -l "$selector" -o "jsonpath=$FIELDS"; then
      ready=0
      report="$report $pool:?/$want"
      details="$details
  pool $pool: reading its nodes failed (retried until the deadline): $err"
      continue
    fi
    count=0
    while IFS='|' read -r node node_config node_state node_labels node_alloc node_ready; do
      [ -n "$node" ] || continue
      if [ "$node_config" != "$config" ]; then
        details="$details
  node $node (pool $pool): CONFIG_LABEL=${node_config:-unset}${node_state:+ (STATE_LABEL=$node_state: about that config)}, not yet $config"
        continue
      fi
      if [ "$node_state" = success ] && not_ready "$node_ready"; then
        # Its run ended and the node is down: nothing on it can run, no restart is due.
        now=$(date +%s)
        [ -f "$kube_tmp/notready.$node" ] || echo "$now" >"$kube_tmp/notready.$node"
        if [ $((now - $(cat "$kube_tmp/notready.$node"))) -ge "$NOTREADY_LIMIT_SECONDS" ] \
          && [ ! -f "$kube_tmp/lost.$node" ]; then
          touch "$kube_tmp/lost.$node"
          echo "$(lost_node_reason "$node") (pool $pool)"
        fi
        details="$details
  node $node (pool $pool): STATE_LABEL=$node_state, but the node is NotReady$([ ! -f "$kube_tmp/lost.$node" ] || echo ' (NVIDIA/gpu-operator#2415: waiting for its replacement)')"
        continue
      fi
      rm -f "$kube_tmp/notready.$node"
      case $node_state in
        failed)
          echo "MIG config $config failed on node $node (pool $pool): STATE_LABEL=failed with CONFIG_LABEL=$config"
          ! not_ready "$node_ready" || lost_node_reason "$node"
          echo "see: kubectl logs -n <gpu-operator namespace> \$(kubectl get pod -n <gpu-operator namespace> -l MIG_MANAGER_SELECTOR --field-selector spec.nodeName=$node -o name)"
          exit 1
          ;;
        success)
          devices=$(gpu_devices "$node_alloc")
          paused=$(paused_labels "$node_labels")
          if [ -n "$dra" ]; then
            if ! dra_devices "$node"; then
              details="$details
  node $node (pool $pool): reading its ResourceSlices failed (retried until the deadline): $err"
              continue
            fi
            devices=$dra_found
            # Published before the layout was applied: the plugin discovers slices at start.
            # Kept where the MIG manager restarts the plugin around a change too (DRA_PLUGIN_BOUNCED:
            # scheduled by nvidia.com/gpu.deploy.client): a node's first layout can be applied
            # before the operator sets that label, with no pause, and a plugin started before
            # the layout existed keeps its old slices. There only a plugin seen Ready with the
            # wrong slices on two polls is restarted, never the one the MIG manager's pause is
            # bringing back (Ready a moment before it publishes).
            stale=1
            if [ -n "${DRA_PLUGIN_BOUNCED:-}" ] && [ ! -f "$kube_tmp/plugin.$node" ] && [ "$devices" != "$planned" ]; then
              stale=""
              if dra_ready_pods "$node"; then
                if [ -n "$dra_pods" ] && [ "$dra_pods" = "$(cat "$kube_tmp/stale.$node" 2>/dev/null || :)" ]; then
                  stale=1
                fi
                echo "$dra_pods" >"$kube_tmp/stale.$node"
              fi
            fi
            if [ -n "$stale" ] && [ -z "$paused" ] && [ "$devices" != "$planned" ] && [ ! -f "$kube_tmp/plugin.$node" ]; then
              if restart_dra_plugin "$node"; then
                echo "$dra_old" >"$kube_tmp/plugin.$node"
                echo "node $node (pool $pool): restarted its DRA kubelet plugin (${dra_old:-none was running}); it published '${devices:-nothing}', planned '$planned'"
              fi
            fi
            if [ -f "$kube_tmp/plugin.$node" ]; then
              if ! dra_plugin_ready "$node" "$(cat "$kube_tmp/plugin.$node")"; then
                dra_ready=""
              fi
              if [ -z "$dra_ready" ]; then
                details="$details
  node $node (pool $pool): its restarted DRA kubelet plugin is not Ready yet"
                continue
              fi
            fi
          fi
          if [ -n "$paused" ]; then
            # `success` with operands still paused on two polls: a MIG manager process that
            # completed a reconfigure before never restores them after a later failure
            # (v0.15.0's globals; its run writes `pending` before it pauses them, and restores
            # them before `success` otherwise). A new process, on the same layout, restores them.
            polls=$(($(cat "$kube_tmp/paused.$node" 2>/dev/null || echo 0) + 1))
            echo "$polls" >"$kube_tmp/paused.$node"
            if [ "$polls" -ge 2 ] && [ ! -f "$kube_tmp/unpause.$node" ]; then
              touch "$kube_tmp/unpause.$node"
              if restart_mig_manager_pods "$node"; then
                echo "node $node (pool $pool): STATE_LABEL=success with its operands left paused ($paused): the MIG manager's wedge of NVIDIA/gpu-operator#2833; restarted its MIG manager pod ($managers), which restores them"
              else
                echo "node $node (pool $pool): STATE_LABEL=success with its operands left paused ($paused); restarting its MIG manager failed: $err"
              fi
            fi
          else
            rm -f "$kube_tmp/paused.$node"
          fi
          if [ -z "$paused" ] && [ "$devices" = "$planned" ]; then
            count=$((count + 1))
          else
            details="$details
  node $node (pool $pool): STATE_LABEL=success, advertises '${devices:-no GPU devices}' (planned: '$planned')${paused:+, operands paused: $paused}"
          fi
          ;;
        pending)
          now=$(date +%s)
          [ -f "$kube_tmp/pending.$node" ] || echo "$now" >"$kube_tmp/pending.$node"
          if [ $((now - $(cat "$kube_tmp/pending.$node"))) -ge "$PENDING_LIMIT_SECONDS" ] \
            && [ ! -f "$kube_tmp/watchdog.$node" ]; then
            touch "$kube_tmp/watchdog.$node"
            if restart_mig_manager_pods "$node"; then
              echo "node $node (pool $pool): STATE_LABEL=pending for ${PENDING_LIMIT_SECONDS}s without moving: the MIG manager's known wedge (NVIDIA/gpu-operator#2833); restarted its MIG manager pod ($managers), as docs/troubleshooting.md says"
            else
              echo "node $node (pool $pool): STATE_LABEL=pending for ${PENDING_LIMIT_SECONDS}s without moving (NVIDIA/gpu-operator#2833); restarting its MIG manager failed: $err"
            fi
          fi
          details="$details
  node $node (pool $pool): STATE_LABEL=pending$([ ! -f "$kube_tmp/watchdog.$node" ] || echo ' (its MIG manager was restarted once)')"
          ;;
        *)
          details="$details
  node $node (pool $pool): STATE_LABEL=${node_state:-unset}"
          ;;
      esac
    done <<NODES
$out
NODES
    report="$report $pool:$count/$want"
    if [ "$count" -lt "$want" ]; then
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
    echo "timed out waiting for CONFIG_LABEL, STATE_LABEL=success and the planned devices:$report$details"
    exit 1
  fi
  echo "waiting for CONFIG_LABEL, STATE_LABEL=success and the planned devices:$report$details"
  sleep "$POLL"
done
