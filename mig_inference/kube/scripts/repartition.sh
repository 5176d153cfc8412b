#!/bin/sh
# In-place re-partitioning of one pool, MAX_UNAVAILABLE nodes at a time: see
# mig_inference/kube/repartition.py, which fills in the upper-case placeholders. POSIX sh (busybox ash
# in the Job's image). Per batch: look for GPU pods no eviction can move (or that no controller
# would recreate), cordon (marked with CORDON_ANNOTATION; the pool's nodes still to be switched
# too, each until its own batch, so evicted replicas land only on switched nodes), evict the pods
# holding GPU or MIG devices, switch the node to the pool's allocation (the device plugin or
# NVIDIA's DRA driver, one off before the other on), relabel (or restart the MIG manager when the
# label is already the target) unless only the plugin changed, wait for success with the target
# config and the planned devices advertised (on a DRA pool: the driver's kubelet plugin restarted
# and the slices published), uncordon, and, before the next batch, wait until every replica of
# the pool's services is Ready. Then, on existing pools, release the nodes the pool no longer
# names.
# The emptiest nodes go first. The pool's own PodDisruptionBudgets (one replica at a time
# otherwise) are relaxed only for a drain whose replicas have no room on the nodes already
# switched, and restored after it and on every way out; budgets an earlier run left relaxed are
# restored first. Before any node is touched, a switch between the device plugin and DRA that the
# replicas of the pool's services cannot follow is refused (no_stranded_replicas).
set -euf
POLL=${REPARTITION_POLL_SECONDS:-10}
NOTREADY_LIMIT_SECONDS=${NOTREADY_LIMIT_SECONDS:-$PENDING_LIMIT_SECONDS}
TARGET_ALLOCATION="device-plugin"
[ -z "${DRA_POOL:-}" ] || TARGET_ALLOCATION=dra
# shellcheck source=mig_inference/kube/scripts/kube.sh
. ./kube.sh

NODE_FIELDS='{.metadata.name}{"|"}{.metadata.labels.CONFIG_PATH}{"|"}{.metadata.labels.STATE_PATH}{"|"}{.metadata.annotations.CORDON_PATH}{"|"}{.spec.unschedulable}{"|"}{.metadata.resourceVersion}{"|"}{.metadata.labels}{"|"}{.status.allocatable}{"|"}{.status.conditions[?(@.type=="Ready")].status}'
# A pod's controller, as `kubectl drain` finds it (metav1.GetControllerOf): none for a bare pod.
POD_FIELDS='{range .items[*]}{.metadata.namespace}/{.metadata.name}{"|"}{.metadata.ownerReferences[?(@.controller==true)].kind}{"|"}{.metadata.deletionTimestamp}{"|"}{.spec.containers[*].resources.limits}{.spec.initContainers[*].resources.limits}{"|"}{.spec.resourceClaims[*].name}{"|"}{.metadata.labels.app\.kubernetes\.io/name}{"\n"}{end}'
CORDON='{"metadata":{"annotations":{"CORDON_ANNOTATION":"'$TARGET_CONFIG'"}},"spec":{"unschedulable":true}}'
UNCORDON='{"metadata":{"annotations":{"CORDON_ANNOTATION":null}},"spec":{"unschedulable":null}}'
CLEAR_STATE='{"metadata":{"labels":{"STATE_LABEL":null}}}'
RELEASE='{"metadata":{"labels":{"POOL_LABEL":null}}}'
JOIN='{"metadata":{"labels":{"POOL_LABEL":"'${NAMED_POOL:-}'"}}}'
RELEASE_AND_UNCORDON='{"metadata":{"labels":{"POOL_LABEL":null},"annotations":{"CORDON_ANNOTATION":null}},"spec":{"unschedulable":null}}'

pool=""        # the pool's nodes, as last listed
batch=""       # the nodes being re-partitioned now
ours=""        # nodes of the batch this Job (or an earlier run of it) cordoned
foreign=""     # nodes of the batch someone else cordoned: they stay cordoned
keep=""        # nodes whose label or MIG manager was changed: a stop leaves them cordoned
done_nodes=""  # on the target, finished
held=""        # nodes still to be switched that this Job cordoned so evicted replicas cannot land there
gone=""        # vanished from the cluster
released=""    # no longer named by the pool: moved out of it
SERVICE_POD_FIELDS='{range .items[*]}{.metadata.namespace}/{.metadata.name}{"|"}{.spec.nodeName}{"|"}{.metadata.deletionTimestamp}{"|"}{.status.conditions[?(@.type=="Ready")].status}{"|"}{.spec.containers[*].resources.limits}{"\n"}{end}'
BUDGETS_FIELDS='{range .items[*]}{.metadata.namespace}/{.metadata.name}{"|"}{.spec.maxUnavailable}{"|"}{.metadata.annotations.RELAXED_PATH}{"\n"}{end}'

# read_node NODE: node_found (empty when the node does not exist), node_config, node_state,
# node_mark (CORDON_ANNOTATION), node_cordoned, node_version (resourceVersion), node_paused,
# node_devices, node_allocation (dra or device-plugin: which plugin its labels run), node_switched
# (its labels run the pool's plugin, and only it), node_ready (its Ready condition's status). A
# read that fails stops the Job.
read_node() {
  kc get node "$1" --ignore-not-found -o "jsonpath=$NODE_FIELDS" \
    || stop "node $1" "reading it failed after $KUBE_TRIES tries: $err"
  IFS='|' read -r node_found node_config node_state node_mark node_cordoned node_version \
    node_labels node_alloc node_ready <<EOF
$out
EOF
  node_paused=$(paused_labels "$node_labels")
  node_joined=""
  case " $(entries "$node_labels" | tr '\n' ' ') " in
    *" POOL_LABEL=${NAMED_POOL:-} "*) node_joined=true ;;
  esac
  node_devices=$(gpu_devices "$node_alloc")
  node_allocation="device-plugin"
  node_plugin_off=""
  for node_entry in $(entries "$node_labels"); do
    case $node_entry in
      ALLOCATION_LABEL=dra) node_allocation=dra ;;
      DEVICE_PLUGIN_LABEL=false) node_plugin_off=1 ;;
    esac
  done
  node_switched=""
  if [ "$node_allocation" = "$TARGET_ALLOCATION" ]; then
    case $TARGET_ALLOCATION in
      dra) [ -z "$node_plugin_off" ] || node_switched=1 ;;
      *) [ -n "$node_plugin_off" ] || node_switched=1 ;;
    esac
  fi
  if [ -n "${DRA_POOL:-}" ] && [ -n "$node_found" ]; then
    # NVIDIA's DRA driver publishes the slices in ResourceSlices, not in the node's allocatable.
    dra_devices "$1" || stop "node $1" "listing its ResourceSlices failed after $KUBE_TRIES tries: $err"
    node_devices=$dra_found
  fi
}

# list_budgets: the PodDisruptionBudgets of the stack's services on the pool (BUDGET_SELECTOR), in
# $budgets: "NAMESPACE/NAME|MAX_UNAVAILABLE|RELAXED_FROM" a line. A listing that fails stops the Job.
list_budgets() {
  kc get pdb --all-namespaces -l "$BUDGET_SELECTOR" -o "jsonpath=$BUDGETS_FIELDS" \
    || stop "the pool's PodDisruptionBudgets" "listing them ($BUDGET_SELECTOR) failed after $KUBE_TRIES tries: $err"
  budgets=$out
}

# relax_budget NAMESPACE/NAME WHY: one of the pool's budgets (as list_budgets last listed them) lets
# every replica go, marked with the value to restore (RELAXED_ANNOTATION), recorded in
# $kube_tmp/relaxed for restore_budgets. A budget that is not the pool's, one with minAvailable (set
# by someone else) and one relaxed already are left as they are.
relax_budget() {
  if [ -f "$kube_tmp/relaxed" ]; then
    while read -r relaxed _; do
      [ "$relaxed" != "$1" ] || return 0
    done <"$kube_tmp/relaxed"
  fi
  while IFS='|' read -r budget strict relaxed_from; do
    [ "$budget" = "$1" ] || continue
    [ -z "$relaxed_from" ] || strict=$relaxed_from
    [ -n "$strict" ] || return 0 # minAvailable: set by someone else, left alone
    kc patch pdb -n "${budget%%/*}" "${budget#*/}" --type merge -o name \
      -p '{"metadata":{"annotations":{"RELAXED_ANNOTATION":"'"$strict"'"}},"spec":{"maxUnavailable":"100%"}}' \
      || stop "PodDisruptionBudget $budget" "relaxing it failed after $KUBE_TRIES tries: $err"
    echo "$budget $strict" >>"$kube_tmp/relaxed"
    echo "PodDisruptionBudget $budget: maxUnavailable 100% for the drain of$batch (was $strict): $2"
    return 0
  done <<BUDGETS
$budgets
BUDGETS
}

# take_over_budgets: the pool's budgets an earlier run left relaxed (marked: its restore failed, or
# it was killed before it could restore them, after its last node too) get their value back now,
# whether or not this run has a node to switch. A restore that fails stops the Job before any node
# is touched (the command to do it by hand is printed).
take_over_budgets() {
  [ -n "${BUDGET_SELECTOR:-}" ] || return 0
  list_budgets
  while IFS='|' read -r budget strict relaxed_from; do
    [ -n "$budget" ] && [ -n "$relaxed_from" ] || continue
    echo "$budget $relaxed_from" >>"$kube_tmp/relaxed"
    echo "PodDisruptionBudget $budget: left at maxUnavailable $strict by an earlier run; taken over"
  done <<BUDGETS
$budgets
BUDGETS
  restore_budgets || stop "the pool's PodDisruptionBudgets" "an earlier run left them relaxed, and restoring them failed (above)"
}

# loosen: before the batch is drained, the budgets of the pool's services whose replicas on the
# batch could not all land at once on the nodes already switched: per GPU resource the batch's
# replicas hold, when the switched schedulable nodes have fewer free devices of it than the batch
# has replicas holding it (or the resource cannot be counted: a resource claim), those services'
# budgets are relaxed for this drain. The others stay strict: each evicted replica lands on a
# free device and turns Ready before its budget lets the next one go, so such a service keeps all
# but one replica serving, and the drain takes a model load per replica. Not while a replica of
# the pool's services is Pending (pace let none through that could land on a switched node: it
# waits for the Job to end, a slice the new layout lacks): the Job then takes no longer than it
# must, and every budget of the batch is relaxed. restore_budgets gives the relaxed ones back
# once the drain is over.
loosen() {
  [ -n "${BUDGET_SELECTOR:-}" ] || return 0
  kc get pods --all-namespaces -l "$BUDGET_SELECTOR" -o "jsonpath=$SERVICE_POD_FIELDS" \
    || stop "the pool's services" "listing their pods failed after $KUBE_TRIES tries: $err"
  job_waiters=""
  while IFS='|' read -r pod pod_node deleting _ _; do
    [ -z "$pod" ] || [ -n "$deleting" ] || [ -n "$pod_node" ] || job_waiters="$job_waiters $pod"
  done <<PODS
$out
PODS
  list_budgets
  wanted="" # "RESOURCE NAMESPACE/BUDGET POD" per replica of the pool's services on the batch
  for node in $batch; do
    is_in "$node" "$gone" && continue
    gpu_pods "$node"
    wanted="$wanted$holding"
  done
  [ -n "$wanted" ] || return 0
  printf '%s' "$wanted" | while read -r wanted_resource _ _; do echo "$wanted_resource"; done \
    | LC_ALL=C sort -u >"$kube_tmp/resources"
  while read -r resource; do
    need=$(printf '%s' "$wanted" | grep -c "^$resource " || true)
    room=0
    if [ "$resource" != - ] && [ -z "$job_waiters" ]; then
      for node in $done_nodes; do
        free_on "$node" "$resource"
        [ "$node_cordoned" = true ] || room=$((room + free_count))
      done
    fi
    if [ "$need" -le "$room" ]; then
      echo "  $need replica(s) holding $resource leave$batch as their budgets allow: $room free for them on the nodes already switched"
      continue
    fi
    why="$need replica(s) holding $resource on$batch, $room free for them on the nodes already switched"
    [ "$resource" != - ] || why="$need replica(s) holding a resource claim on$batch"
    [ -z "$job_waiters" ] || why="replicas of the pool's services wait for the Job to end (Pending:$job_waiters), so it takes no longer than it must"
    printf '%s' "$wanted" | while read -r wanted_resource budget _; do
      [ "$wanted_resource" != "$resource" ] || echo "$budget"
    done | LC_ALL=C sort -u >"$kube_tmp/loosen"
    while read -r budget; do
      relax_budget "$budget" "$why"
    done <"$kube_tmp/loosen"
  done <"$kube_tmp/resources"
}

# restore_budgets: every budget relaxed (or taken over) since the last restore gets its value back;
# 1 when one could not be restored (named, with the command to do it by hand: its mark stays, so the
# next run takes it over). Never stops: the EXIT trap calls it.
restore_budgets() {
  [ -s "$kube_tmp/relaxed" ] || return 0
  restore_status=0
  while read -r budget strict; do
    case $strict in
      *%) value="\"$strict\"" ;;
      *) value=$strict ;;
    esac
    restore='{"metadata":{"annotations":{"RELAXED_ANNOTATION":null}},"spec":{"maxUnavailable":'"$value"'}}'
    if kc patch pdb -n "${budget%%/*}" "${budget#*/}" --type merge -p "$restore" -o name; then
      echo "PodDisruptionBudget $budget: maxUnavailable $strict again"
    else
      echo "PodDisruptionBudget $budget: could not be restored ($err); it still lets every replica go. By hand: kubectl patch pdb -n ${budget%%/*} ${budget#*/} --type merge -p '$restore'"
      restore_status=1
    fi
  done <"$kube_tmp/relaxed"
  : >"$kube_tmp/relaxed"
  return "$restore_status"
}

# On every way out (the end, a stop, a failed command, SIGTERM at the Job's deadline) the budgets
# are restored; a restore that fails makes the Job fail.
on_exit() {
  exit_status=$?
  restore_budgets || exit_status=1
  rm -rf "$kube_tmp"
  exit "$exit_status"
}
trap on_exit EXIT
trap 'exit 143' TERM
trap 'exit 130' INT

# plugin_current NODE: not a DRA pool, or the DRA kubelet plugin this Job restarted on NODE was
# replaced by one that runs Ready.
plugin_current() {
  [ -n "${DRA_POOL:-}" ] && [ -f "$kube_tmp/plugin.$1" ] || return 0
  dra_plugin_ready "$1" "$(cat "$kube_tmp/plugin.$1")" \
    || stop "node $1" "listing its DRA kubelet-plugin pods failed after $KUBE_TRIES tries: $err"
  [ -n "$dra_ready" ]
}

# on_target: the node last read runs the pool's plugin, carries the target, reports success, has
# its operands back and advertises the planned devices (hardware evidence: the state label names
# no config); on a DRA pool, a kubelet plugin this Job restarted there is back.
on_target() {
  [ -n "$node_switched" ] && [ "$node_config" = "$TARGET_CONFIG" ] && [ "$node_state" = success ] \
    && [ -z "$node_paused" ] && [ "$node_devices" = "$CAPACITY_PER_NODE" ] \
    && plugin_current "$node_found"
}

# gpu_pods NODE: holders (pods on NODE holding GPU or MIG devices, or on a DRA pool any device
# claim, to evict), leaving (those already terminating), pinned (those a DaemonSet controls:
# DaemonSets ignore cordons and recreate an evicted pod, so no eviction frees their GPUs) and
# unmanaged (no controller: evicted, they are gone for good; holders too with EVICT_UNMANAGED),
# and holding: "RESOURCE NAMESPACE/BUDGET POD" a line per holder (the GPU resource it holds, `-` for
# a resource claim; the budget the program gives its Deployment, named as it: the pod's
# app.kubernetes.io/name). A listing that fails stops the Job.
gpu_pods() {
  kc get pods --all-namespaces \
    --field-selector "spec.nodeName=$1,status.phase!=Succeeded,status.phase!=Failed" \
    -o "jsonpath=$POD_FIELDS" \
    || stop "node $1" "listing its pods failed after $KUBE_TRIES tries: $err"
  holders=""
  leaving=""
  pinned=""
  unmanaged=""
  holding=""
  while IFS='|' read -r pod controller deleting limits claims app; do
    case $limits in
      *'"nvidia.com/gpu'* | *'"nvidia.com/mig-'*) ;;
      *) [ -n "${DRA_POOL:-}" ] && [ -n "$claims" ] || continue ;;
    esac
    if [ "$controller" = DaemonSet ]; then
      pinned="$pinned $pod"
    elif [ -z "$deleting" ] && [ -z "$controller" ] && [ -z "${EVICT_UNMANAGED:-}" ]; then
      unmanaged="$unmanaged $pod"
    elif [ -n "$deleting" ]; then
      leaving="$leaving $pod"
    else
      holders="$holders $pod"
      holder_resource=$(gpu_resource "$limits")
      [ -z "$app" ] || holding="$holding${holder_resource:--} ${pod%%/*}/$app $pod
"
    fi
  done <<EOF
$out
EOF
}

# evict NAMESPACE/NAME: through the Eviction API, so PodDisruptionBudgets decide; 1 with $err
# when the API refused (the next listing says whether the pod is gone).
evict() {
  printf '{"apiVersion":"policy/v1","kind":"Eviction","metadata":{"name":"%s","namespace":"%s"}}' \
    "${1#*/}" "${1%%/*}" >"$kube_tmp/eviction.json"
  if kubectl --request-timeout="$KUBE_TIMEOUT" create --raw \
    "/api/v1/namespaces/${1%%/*}/pods/${1#*/}/eviction" -f "$kube_tmp/eviction.json" \
    </dev/null >/dev/null 2>"$kube_tmp/err"; then
    return 0
  fi
  err=$(tr '\n' ' ' <"$kube_tmp/err")
  return 1
}

# patch_node NODE PATCH: one JSON merge patch; stops the Job when it fails.
patch_node() {
  kc patch node "$1" --type merge -p "$2" -o name \
    || stop "node $1" "patching it with $2 failed after $KUBE_TRIES tries: $err"
}

# restart_mig_manager NODE: delete the node's MIG manager pod; the DaemonSet's new one applies
# the label's current value once (NVIDIA's manager reacts to a change of the value only, so a
# same-value relabel re-applies nothing).
restart_mig_manager() {
  restart_mig_manager_pods "$1" || stop "node $1" "restarting its MIG manager failed: $err"
  echo "node $1: restarted its MIG manager ($managers): the new one applies $TARGET_CONFIG"
}

# uncordon NODE: lift this Job's cordon; 1 when the API refuses (said, never fatal: a stop
# calls it).
uncordon() {
  if kc patch node "$1" --type merge -p "$UNCORDON" -o name; then
    return 0
  fi
  echo "node $1: could not be uncordoned ($err); by hand: kubectl uncordon $1 && kubectl annotate node $1 CORDON_ANNOTATION-"
  return 1
}

# stop SUBJECT REASON: exit 1. Nodes of the batch cordoned by this Job and never relabelled are
# uncordoned; relabelled ones not yet finished stay cordoned (their GPUs are not in service) with
# the way back; the nodes not reached are named.
stop() {
  echo "STOPPED at $1: $2"
  for node in $batch; do
    is_in "$node" "$done_nodes $gone" && continue
    if is_in "$node" "$keep" && is_in "$node" "$ours"; then
      echo "node $node stays cordoned (CORDON_ANNOTATION=$TARGET_CONFIG): its GPUs are not in service."
      echo "  Fix the cause (kubectl logs -n $OPERATOR_NAMESPACE \$(kubectl get pod -n $OPERATOR_NAMESPACE -l MIG_MANAGER_SELECTOR --field-selector spec.nodeName=$node -o name)),"
      echo "  then run pulumi up again: the Job resumes $node, clears its STATE_LABEL, restarts its MIG manager so that $TARGET_CONFIG is applied again, and uncordons it. By hand:"
      echo "  kubectl label node $node STATE_LABEL- && kubectl delete pod -n $OPERATOR_NAMESPACE -l MIG_MANAGER_SELECTOR --field-selector spec.nodeName=$node"
      echo "  then, once it reports STATE_LABEL=success: kubectl uncordon $node && kubectl annotate node $node CORDON_ANNOTATION-"
    elif is_in "$node" "$ours"; then
      if uncordon "$node"; then
        echo "node $node: uncordoned (never relabelled)"
      fi
    fi
  done
  for node in $held; do
    is_in "$node" "$ours $done_nodes $gone" && continue
    if uncordon "$node"; then
      echo "node $node: uncordoned (held until its turn, never relabelled)"
    fi
  done
  rest=""
  for node in $pool; do
    is_in "$node" "$done_nodes $gone $batch" || rest="$rest $node"
  done
  if [ -n "$rest" ]; then
    echo "left untouched (still on their old config):$rest"
  fi
  exit 1
}

# join_pool NODE: on an existing pool, a node on the target carries the pool's label (Pulumi's
# patch applies it only after this Job, so the replicas of a node being released can move there
# now).
join_pool() {
  if [ -n "${NAMED_POOL:-}" ] && [ -z "$node_joined" ]; then
    patch_node "$1" "$JOIN"
    echo "node $1: POOL_LABEL=$NAMED_POOL"
  fi
}

# finish NODE: the node last read is on the target: lift our cordon.
finish() {
  join_pool "$1"
  if is_in "$1" "$foreign"; then
    echo "node $1: $TARGET_CONFIG applied ($node_devices); left cordoned as it was (cordoned by someone else)"
  elif [ -n "$node_mark" ]; then
    patch_node "$1" "$UNCORDON"
    echo "node $1: $TARGET_CONFIG applied ($node_devices); uncordoned"
  else
    echo "node $1: $TARGET_CONFIG applied ($node_devices)"
  fi
  done_nodes="$done_nodes $1"
}

# list_pool: the pool's nodes, in $pool (by its selector, or as named).
list_pool() {
  if [ -n "$REPARTITION_SELECTOR" ]; then
    kc get nodes -l "$REPARTITION_SELECTOR" -o 'jsonpath={.items[*].metadata.name}' \
      || stop "the pool" "listing its nodes ($REPARTITION_SELECTOR) failed after $KUBE_TRIES tries: $err"
    pool=$out
  else
    pool=$REPARTITION_NODES
  fi
}

# emptiest_first NODES: NODES in $emptiest by how many pods hold GPU devices there (on a DRA pool,
# a resource claim too), fewest first, ties in the order given: a node switched early with room
# gives the replicas of the next batch somewhere to go at once (`loosen` keeps their budgets
# then). One listing of every pod; a listing that fails stops the Job.
emptiest_first() {
  emptiest=$1
  # shellcheck disable=SC2086 # the node names, split (globbing is off: set -f)
  set -- $1
  [ "$#" -gt 1 ] || return 0
  emptiest=""
  kc get pods --all-namespaces --field-selector "status.phase!=Succeeded,status.phase!=Failed" \
    -o 'jsonpath={range .items[*]}{.spec.nodeName}{"|"}{.spec.containers[*].resources.limits}{"|"}{.spec.resourceClaims[*].name}{"\n"}{end}' \
    || stop "the pool" "listing the pods on its nodes failed after $KUBE_TRIES tries: $err"
  printf '%s\n' "$out" | while IFS='|' read -r pod_node limits claims; do
    [ -n "$pod_node" ] || continue
    case $limits in
      *'"nvidia.com/gpu'* | *'"nvidia.com/mig-'*) echo "$pod_node" ;;
      *) [ -z "${DRA_POOL:-}" ] || [ -z "$claims" ] || echo "$pod_node" ;;
    esac
  done | LC_ALL=C sort | uniq -c >"$kube_tmp/holders"
  position=0
  for node in "$@"; do
    position=$((position + 1))
    count=0
    while read -r holders_there holders_node; do
      [ "$holders_node" != "$node" ] || count=$holders_there
    done <"$kube_tmp/holders"
    printf '%06d %06d %s\n' "$count" "$position" "$node"
  done | LC_ALL=C sort >"$kube_tmp/emptiest"
  while read -r _ _ node; do
    emptiest="$emptiest $node"
  done <"$kube_tmp/emptiest"
}

# pick: list the pool afresh; finish nodes already on the target; batch = up to MAX_UNAVAILABLE
# of the others, those an earlier run cordoned first, then the emptiest.
pick() {
  batch=""
  list_pool
  resumed=""
  relabelled=""
  fresh=""
  for node in $pool; do
    is_in "$node" "$done_nodes $gone" && continue
    read_node "$node"
    if [ -z "$node_found" ]; then
      echo "node $node: gone (scaled away or replaced); skipped"
      gone="$gone $node"
    elif on_target && [ -n "$node_mark" ]; then
      echo "node $node: on $TARGET_CONFIG, cordoned by an earlier run"
      finish "$node"
    elif on_target; then
      echo "node $node: already on $TARGET_CONFIG ($node_devices)${node_cordoned:+; cordoned by someone else, left so}"
      join_pool "$node"
      done_nodes="$done_nodes $node"
    elif [ -n "$node_mark" ] && ! is_in "$node" "$held"; then
      resumed="$resumed $node"
      [ "$node_config" != "$TARGET_CONFIG" ] || relabelled="$relabelled $node"
    else
      fresh="$fresh $node"
    fi
  done
  emptiest_first "$fresh"
  todo="$resumed $emptiest"
  batch=""
  ours=""
  foreign=""
  keep=""
  taken=0
  for node in $todo; do
    [ "$taken" -lt "$MAX_UNAVAILABLE" ] || break
    batch="$batch $node"
    taken=$((taken + 1))
    if is_in "$node" "$resumed"; then
      ours="$ours $node"
      # Relabelled by the earlier run: its MIG manager may be mid-change, so it stays out of
      # service until it is back on a layout.
      if is_in "$node" "$relabelled"; then
        keep="$keep $node"
      fi
    fi
  done
}

# no_pinned_pods NODES: stop before cordoning when a GPU pod on one of them can never be evicted,
# or would be deleted for good.
no_pinned_pods() {
  for node in $1; do
    gpu_pods "$node"
    [ -z "$pinned" ] || stop "node $node" "pods owned by a DaemonSet hold its GPUs:$pinned. DaemonSets ignore cordons and recreate an evicted pod, so no drain frees these GPUs: keep that DaemonSet off the pool's nodes (nodeSelector or affinity), then run pulumi up again"
    no_unmanaged_pods "$node"
  done
}

# no_unmanaged_pods NODE: stop when pods that declare no controller hold its GPUs (gpu_pods last
# run for NODE), as `kubectl drain` refuses them without --force.
no_unmanaged_pods() {
  [ -z "$unmanaged" ] || stop "node $1" "pods that declare no controller hold its GPUs:$unmanaged. No controller would recreate them, so an eviction deletes them for good; \`kubectl drain\` refuses them too. Move or delete them yourself, or set ${UNMANAGED_KEY:-evictUnmanagedPods}: true to let the Job evict them, then run pulumi up again"
}

cordon_batch() {
  for node in $batch; do
    read_node "$node"
    if [ -z "$node_found" ]; then
      echo "node $node: gone (scaled away or replaced); skipped"
      gone="$gone $node"
    elif is_in "$node" "$held"; then
      ours="$ours $node"
      [ "$node_cordoned" = true ] || patch_node "$node" "$CORDON"
      echo "node $node: cordoned since an earlier batch (CORDON_ANNOTATION=$TARGET_CONFIG)"
    elif [ -n "$node_mark" ]; then
      is_in "$node" "$ours" || ours="$ours $node"
      if [ "$node_mark" != "$TARGET_CONFIG" ] || [ "$node_cordoned" != true ]; then
        patch_node "$node" "$CORDON"
      fi
      echo "node $node: cordoned by an earlier run (for $node_mark); resumed"
    elif [ "$node_cordoned" = true ]; then
      foreign="$foreign $node"
      echo "node $node: cordoned by someone else (no CORDON_ANNOTATION): re-partitioned, and left cordoned"
    else
      ours="$ours $node"
      patch_node "$node" "$CORDON"
      echo "node $node: cordoned (CORDON_ANNOTATION=$TARGET_CONFIG)"
    fi
  done
}

# hold_rest: cordon the pool's nodes still to be switched beyond the batch (marked as the batch's
# are) until their own batch, so a replica the drain evicts lands only on a node already switched
# or waits for its own. Left schedulable, such a node would take it, and its own drain would evict
# it again, maybe before it serves; a service whose replicas gathered there would drop to none.
# The cost: the pool's spare slices on those nodes take no new pod while the Job runs. A node an
# earlier run cordoned and never relabelled is held the same way (a stop uncordons it); one it
# relabelled stays cordoned until its batch, as its MIG manager may be mid-change.
hold_rest() {
  for node in $todo; do
    is_in "$node" "$batch $held $gone" && continue
    read_node "$node"
    [ -n "$node_found" ] || continue
    if [ -n "$node_mark" ]; then
      [ "$node_config" != "$TARGET_CONFIG" ] || continue
      [ "$node_mark" = "$TARGET_CONFIG" ] && [ "$node_cordoned" = true ] || patch_node "$node" "$CORDON"
      held="$held $node"
      echo "node $node: cordoned by an earlier run, never relabelled; held until its turn"
      continue
    fi
    [ "$node_cordoned" != true ] || continue
    patch_node "$node" "$CORDON"
    held="$held $node"
    echo "node $node: cordoned until its turn (CORDON_ANNOTATION=$TARGET_CONFIG), so evicted replicas land only on switched nodes"
  done
}

# gpu_resource LIMITS: the GPU resource a limits map (as kubectl prints it) requests, if any.
gpu_resource() {
  for limit in $(entries "$1"); do
    case ${limit%%=*} in
      nvidia.com/gpu | nvidia.com/gpu.shared | nvidia.com/mig-*)
        printf '%s' "${limit%%=*}"
        return 0
        ;;
    esac
  done
}

# free_on NODE RESOURCE: how many RESOURCE devices NODE advertises that no pod holds.
free_on() {
  read_node "$1"
  free_total=0
  for device in $node_devices; do
    [ "${device%%=*}" = "$2" ] && free_total=${device#*=}
  done
  kc get pods --all-namespaces \
    --field-selector "spec.nodeName=$1,status.phase!=Succeeded,status.phase!=Failed" \
    -o 'jsonpath={range .items[*]}{.spec.containers[*].resources.limits}{"\n"}{end}' \
    || stop "node $1" "listing its pods failed after $KUBE_TRIES tries: $err"
  free_held=$(printf '%s\n' "$out" | grep -c "\"$2\"" || true)
  free_count=$((free_total - free_held))
}

# pace: before the next batch is drained, the pool's services (their pods carry BUDGET_SELECTOR)
# settle: none of their replicas bound to a node, wherever, is still loading, and none Pending
# could still land on a schedulable node already switched (a free device of what it asks for).
# Anywhere, not only on the nodes just switched: a replica still loading when its node is drained
# would be evicted before it serves (the relaxed budgets no longer refuse it), and the drain would
# take the service below the replicas outside the batch. A service whose slice survives the new
# layout keeps serving from the switched nodes; one whose slice is gone has nothing to wait for.
# The reconfiguration deadline bounds the wait: a replica that never gets Ready (a crash loop)
# stops the Job there, naming it, as the service's own budget would refuse the drain.
pace() {
  [ -n "${BUDGET_SELECTOR:-}" ] || return 0
  pace_deadline=$(($(date +%s) + RECONFIGURE_TIMEOUT_SECONDS))
  while :; do
    kc get pods --all-namespaces -l "$BUDGET_SELECTOR" -o "jsonpath=$SERVICE_POD_FIELDS" \
      || stop "the pool's services" "listing their pods failed after $KUBE_TRIES tries: $err"
    loading=""
    wanted=""
    while IFS='|' read -r pod pod_node deleting ready limits; do
      [ -n "$pod" ] && [ -z "$deleting" ] || continue
      if [ -z "$pod_node" ]; then
        wanted="$wanted $(gpu_resource "$limits")"
      elif [ "$ready" != True ]; then
        loading="$loading $pod@$pod_node"
      fi
    done <<EOF
$out
EOF
    landing=""
    if [ -z "$loading" ]; then
      for resource in $(printf '%s' "$wanted" | tr ' ' '\n' | LC_ALL=C sort -u); do
        for node in $done_nodes; do
          free_on "$node" "$resource"
          [ "$node_cordoned" != true ] && [ "$free_count" -gt 0 ] || continue
          landing="$landing $resource@$node"
        done
      done
    fi
    if [ -z "$loading$landing" ]; then
      return 0
    fi
    [ "$(date +%s)" -lt "$pace_deadline" ] || stop "the pool's services" "after ${RECONFIGURE_TIMEOUT_SECONDS}s they have not settled before the drain of the next batch: still loading:${loading:- none}; Pending that could land on a switched node:${landing:- none}"
    echo "  waiting for the pool's services to settle: loading:${loading:- none}; free devices for Pending replicas:${landing:- none}"
    sleep "$POLL"
  done
}

# drain_batch: evict the GPU pods of the batch until none is left or the drain deadline; the
# pool's budgets are relaxed only as `loosen` finds they must be, and given back once the drain
# is over. At the deadline, budgets of the pool that still refused (their replicas land on the
# switched nodes' free devices more slowly than the drain may take) are relaxed once, for one
# more DRAIN_TIMEOUT_SECONDS; any other refusal stops the Job.
drain_batch() {
  deadline=$(($(date +%s) + DRAIN_TIMEOUT_SECONDS))
  widened=""
  loosen
  while :; do
    left=""
    refused=""
    refused_pods=""
    holding_all=""
    for node in $batch; do
      is_in "$node" "$gone" && continue
      gpu_pods "$node"
      [ -z "$pinned" ] || stop "node $node" "pods owned by a DaemonSet appeared on it and hold its GPUs:$pinned (no eviction can free them)"
      no_unmanaged_pods "$node"
      holding_all="$holding_all$holding"
      for pod in $holders; do
        if evict "$pod"; then
          echo "  evicted $pod"
        else
          refused="$refused
  $pod: $err"
          refused_pods="$refused_pods $pod"
        fi
      done
      left="$left$holders$leaving"
    done
    if [ -z "$left" ]; then
      restore_budgets || stop "the pool's PodDisruptionBudgets" "restoring them after the drain of$batch failed (above)"
      return 0
    fi
    if [ "$(date +%s)" -ge "$deadline" ]; then
      if [ -z "$widened" ] && widen; then
        widened=1
        deadline=$(($(date +%s) + DRAIN_TIMEOUT_SECONDS))
        continue
      fi
      stop "the drain of$batch" "after ${DRAIN_TIMEOUT_SECONDS}s these pods still hold GPU or MIG devices:$left${refused:+
their evictions were refused (a PodDisruptionBudget decides):$refused}"
    fi
    [ -z "$refused" ] || echo "  evictions refused, retried until the drain deadline:$refused"
    sleep "$POLL"
  done
}

# widen: relax the pool's budgets of the refused pods of the drain's last round ($refused_pods,
# $holding_all); 0 when it relaxed one.
widen() {
  [ -n "${BUDGET_SELECTOR:-}" ] && [ -n "$refused_pods" ] || return 1
  list_budgets
  widened_one=1
  printf '%s' "$holding_all" | while read -r _ budget pod; do
    is_in "$pod" "$refused_pods" && echo "$budget"
  done | LC_ALL=C sort -u >"$kube_tmp/widen"
  while read -r budget; do
    before=$(cat "$kube_tmp/relaxed" 2>/dev/null || true)
    relax_budget "$budget" "its replicas did not all leave$batch within ${DRAIN_TIMEOUT_SECONDS}s one at a time"
    [ "$before" = "$(cat "$kube_tmp/relaxed")" ] || widened_one=0
  done <"$kube_tmp/widen"
  return "$widened_one"
}

# relabel NODE: one patch that sets the target and clears the state, so a terminal state seen
# later was written for the new value. The patch holds the resourceVersion the Job last read (the
# API refuses it when the node changed since); after a failure the node is read again, and one
# that already carries the target took an earlier attempt whose answer was lost: patching it again
# would clear the state its MIG manager has written since.
relabel() {
  relabel_try=1
  while :; do
    relabel_patch='{"metadata":{"resourceVersion":"'$node_version'","labels":{"CONFIG_LABEL":"'$TARGET_CONFIG'","STATE_LABEL":null}}}'
    if kubectl --request-timeout="$KUBE_TIMEOUT" patch node "$1" --type merge -p "$relabel_patch" \
      -o name </dev/null >/dev/null 2>"$kube_tmp/err"; then
      return 0
    fi
    err=$(tr '\n' ' ' <"$kube_tmp/err")
    read_node "$1"
    [ -n "$node_found" ] || return 0
    [ "$node_config" != "$TARGET_CONFIG" ] || return 0
    [ "$relabel_try" -lt "$KUBE_TRIES" ] || stop "node $1" "relabelling it failed after $KUBE_TRIES tries: $err"
    relabel_try=$((relabel_try + 1))
    sleep "$KUBE_RETRY_SECONDS"
  done
}

# unoffered NODE: 0 once the plugin being turned off no longer offers NODE's devices: to DRA, the
# node's allocatable holds no GPU device (the device plugin is gone); back, no DRA kubelet-plugin
# pod runs there and no ResourceSlice of the driver names the node. 1 with what is left in
# $offered. A read that fails stops the Job.
unoffered() {
  read_node "$1"
  [ -n "$node_found" ] || return 0
  if [ "$TARGET_ALLOCATION" = dra ]; then
    offered=$(gpu_devices "$node_alloc")
    [ -z "$offered" ]
    return
  fi
  kc get pods --all-namespaces -l 'DRA_PLUGIN_SELECTOR' --field-selector "spec.nodeName=$1" \
    -o 'jsonpath={.items[*].metadata.name}' \
    || stop "node $1" "listing its DRA kubelet-plugin pods failed after $KUBE_TRIES tries: $err"
  offered="kubelet-plugin pods: ${out:-none}"
  [ -z "$out" ] || return 1
  dra_devices "$1" || stop "node $1" "listing its ResourceSlices failed after $KUBE_TRIES tries: $err"
  offered="ResourceSlices: $dra_found"
  [ -z "$dra_found" ]
}

# switch_batch: each node of the batch whose labels run the other plugin gets the pool's: the
# running one is turned off, and the other on only once nothing offers the node's devices, so a
# slice is never offered twice. A node already on the target layout is then left to its new
# plugin (on a DRA pool, the one started here publishes the slices it finds).
switch_batch() {
  switched=""
  for node in $batch; do
    is_in "$node" "$gone" && continue
    read_node "$node"
    [ -n "$node_found" ] && [ -z "$node_switched" ] || continue
    keep="$keep $node"
    if [ "$TARGET_ALLOCATION" = dra ]; then
      switch_off='{"metadata":{"labels":{"DEVICE_PLUGIN_LABEL":"false"}}}'
      switch_on='{"metadata":{"labels":{"ALLOCATION_LABEL":"dra"}}}'
      switch_from="the device plugin"
      switch_to="the DRA kubelet plugin"
    else
      switch_off='{"metadata":{"labels":{"ALLOCATION_LABEL":null}}}'
      switch_on='{"metadata":{"labels":{"DEVICE_PLUGIN_LABEL":"true"}}}'
      switch_from="the DRA kubelet plugin"
      switch_to="the device plugin"
    fi
    patch_node "$node" "$switch_off"
    echo "node $node: $switch_from turned off (allocation $node_allocation -> $TARGET_ALLOCATION)"
    until unoffered "$node"; do
      [ "$(date +%s)" -lt "$deadline" ] || stop "node $node" "$switch_from still offers its devices after ${RECONFIGURE_TIMEOUT_SECONDS}s ($offered), so $switch_to was not turned on"
      sleep "$POLL"
    done
    patch_node "$node" "$switch_on"
    echo "node $node: nothing offers its devices any more; $switch_to turned on"
    if [ "$node_config" = "$TARGET_CONFIG" ] && [ "$node_state" = success ]; then
      # Its layout stays: the DRA kubelet plugin started now publishes it, so no restart of it
      # is due; wait_batch counts the node once a Ready one does.
      switched="$switched $node"
      [ "$TARGET_ALLOCATION" != dra ] || : >"$kube_tmp/plugin.$node"
    fi
  done
}

# trigger_batch: make each node's MIG manager apply the target, provably: a relabel that also
# clears the state (a terminal state seen later was written for the new value), or, when the label
# is the target already, a cleared state and a new MIG manager pod.
trigger_batch() {
  for node in $batch; do
    is_in "$node" "$gone" && continue
    read_node "$node"
    # A reboot in progress finishes first: clearing `rebooting` could make the MIG manager reboot
    # the node again.
    while [ -n "$node_found" ] && [ "$node_state" = rebooting ]; do
      [ "$(date +%s)" -lt "$deadline" ] || stop "node $node" "still STATE_LABEL=rebooting after ${RECONFIGURE_TIMEOUT_SECONDS}s"
      sleep "$POLL"
      read_node "$node"
    done
    if [ -z "$node_found" ]; then
      echo "node $node: gone (scaled away or replaced); skipped"
      gone="$gone $node"
      continue
    fi
    keep="$keep $node"
    # A node only switched to the other plugin keeps its layout: no MIG manager run.
    is_in "$node" "$switched" && continue
    if [ "$node_config" != "$TARGET_CONFIG" ]; then
      was_config=$node_config
      was_paused=$node_paused
      was_state=$node_state
      relabel "$node"
      echo "node $node: CONFIG_LABEL=$TARGET_CONFIG (was ${was_config:-unset}), STATE_LABEL cleared"
      # A run for the old value may still write its end state; paused operands stay paused
      # after a failure until the process restarts (NVIDIA mig-parted v0.15.0).
      if [ -n "$was_paused" ] || [ "$was_state" = pending ]; then
        restart_mig_manager "$node"
      fi
    else
      patch_node "$node" "$CLEAR_STATE"
      echo "node $node: already labelled $TARGET_CONFIG (STATE_LABEL=${node_state:-unset}${node_paused:+, operands paused}); STATE_LABEL cleared"
      restart_mig_manager "$node"
    fi
  done
}

# wait_batch: until each node reports success with the target config and advertises the planned
# devices; stops at failed, a pending that does not move, or the deadline.
wait_batch() {
  waiting=""
  for node in $batch; do
    is_in "$node" "$gone" || waiting="$waiting $node"
  done
  while [ -n "$waiting" ]; do
    still=""
    for node in $waiting; do
      read_node "$node"
      if [ -z "$node_found" ]; then
        echo "node $node: gone (scaled away or replaced); skipped"
        gone="$gone $node"
        continue
      fi
      [ "$node_config" = "$TARGET_CONFIG" ] || stop "node $node" "its CONFIG_LABEL became '${node_config}' while the Job waited for $TARGET_CONFIG (someone else relabelled it)"
      now=$(date +%s)
      case $node_state in
        failed)
          ! not_ready "$node_ready" || stop "node $node" "STATE_LABEL=failed with CONFIG_LABEL=$TARGET_CONFIG, and $(lost_node_reason "$node")"
          stop "node $node" "STATE_LABEL=failed with CONFIG_LABEL=$TARGET_CONFIG: its MIG manager could not apply the layout"
          ;;
        pending)
          rm -f "$kube_tmp/success.$node"
          [ -f "$kube_tmp/pending.$node" ] || echo "$now" >"$kube_tmp/pending.$node"
          if [ $((now - $(cat "$kube_tmp/pending.$node"))) -ge "$PENDING_LIMIT_SECONDS" ]; then
            # The MIG manager's known wedge (NVIDIA/gpu-operator#2833): operands that did not stop
            # within its 5 minutes end its run with no state, and it waits for a label change
            # that never comes. Its pod restarted, it applies the label again (docs/
            # troubleshooting.md); a second wedge stops the Job.
            [ ! -f "$kube_tmp/watchdog.$node" ] || stop "node $node" "STATE_LABEL=pending for ${PENDING_LIMIT_SECONDS}s without moving, again after its MIG manager was restarted (its operands do not stop: kubectl get pods -n $OPERATOR_NAMESPACE --field-selector spec.nodeName=$node; NVIDIA/gpu-operator#2833)"
            touch "$kube_tmp/watchdog.$node"
            echo "node $node: STATE_LABEL=pending for ${PENDING_LIMIT_SECONDS}s without moving: the MIG manager's known wedge (NVIDIA/gpu-operator#2833); restarting its MIG manager pod, as docs/troubleshooting.md says"
            restart_mig_manager "$node"
            echo "$now" >"$kube_tmp/pending.$node"
          fi
          ;;
        success)
          rm -f "$kube_tmp/pending.$node"
          if not_ready "$node_ready"; then
            # The run ended, the node went down with it and nothing on it can be restarted: a
            # node NotReady for NOTREADY_LIMIT_SECONDS stops the Job with the way forward
            # (NVIDIA/gpu-operator#2415); the instance that replaces it is no node of this batch.
            rm -f "$kube_tmp/success.$node"
            [ -f "$kube_tmp/notready.$node" ] || echo "$now" >"$kube_tmp/notready.$node"
            if [ $((now - $(cat "$kube_tmp/notready.$node"))) -ge "$NOTREADY_LIMIT_SECONDS" ]; then
              stop "node $node" "STATE_LABEL=success with CONFIG_LABEL=$TARGET_CONFIG, but $(lost_node_reason "$node"); run pulumi up again once it is replaced (the Job skips a node that is gone)"
            fi
            still="$still $node"
            continue
          fi
          rm -f "$kube_tmp/notready.$node"
          if on_target; then
            finish "$node"
            continue
          fi
          # The device plugin comes back after the MIG manager restores its label. The DRA
          # driver's kubelet plugin discovers slices only when it starts. With DRA_PLUGIN_BOUNCED
          # it is scheduled by nvidia.com/gpu.deploy.client=true, which the MIG manager (v0.15.0+)
          # pauses around the change: its DaemonSet stops the plugin and starts a new one after,
          # and the Job only waits for the new slices. Otherwise (an older GPU Operator, whose
          # MIG manager leaves the plugin running) the Job restarts it once.
          if [ -n "${DRA_POOL:-}" ] && [ -z "${DRA_PLUGIN_BOUNCED:-}" ] && [ ! -f "$kube_tmp/plugin.$node" ]; then
            restart_dra_plugin "$node" \
              || stop "node $node" "restarting its DRA kubelet plugin failed after $KUBE_TRIES tries: $err"
            echo "$dra_old" >"$kube_tmp/plugin.$node"
            echo "node $node: restarted its DRA kubelet plugin (${dra_old:-none was running}) to publish the slices of $TARGET_CONFIG"
          fi
          [ -f "$kube_tmp/success.$node" ] || echo "$now" >"$kube_tmp/success.$node"
          if [ $((now - $(cat "$kube_tmp/success.$node"))) -ge "$ADVERTISE_TIMEOUT_SECONDS" ]; then
            stop "node $node" "STATE_LABEL=success, but after ${ADVERTISE_TIMEOUT_SECONDS}s it advertises '${node_devices:-no GPU devices}'${DRA_POOL:+ in the ResourceSlices of the DRA driver (its kubelet plugin, restarted${DRA_PLUGIN_BOUNCED:+ by the MIG manager}: kubectl get pods -n $DRA_NAMESPACE -l DRA_PLUGIN_SELECTOR --field-selector spec.nodeName=$node)} where the plan has '$CAPACITY_PER_NODE'${node_paused:+ (operands still paused: $node_paused)}"
          fi
          ;;
        *)
          rm -f "$kube_tmp/pending.$node" "$kube_tmp/success.$node"
          ;;
      esac
      still="$still $node"
    done
    waiting=$still
    [ -n "$waiting" ] || return 0
    if [ "$(date +%s)" -ge "$deadline" ]; then
      stop "node ${waiting# }" "no STATE_LABEL=success with the planned devices within ${RECONFIGURE_TIMEOUT_SECONDS}s (last: STATE_LABEL=${node_state:-unset}, devices '${node_devices}')"
    fi
    sleep "$POLL"
  done
}

# release: nodes that carry the pool's label but are no longer named by REPARTITION_NODES_KEY (a
# node swapped out of an existing pool). Their GPU pods are evicted while the pool's label still
# keeps other workloads' replicas off, so the pool's replicas move to the pool's nodes; then the
# pool label goes and the Job's cordon is lifted. Pulumi removes the node's other labels and taints
# when it deletes its patches, last in the update: by then no pod holds its GPUs, so the layout
# the GPU Operator falls back to is applied to idle GPUs.
release() {
  [ -n "${NAMED_POOL:-}" ] || return 0
  kc get nodes -l "POOL_LABEL=$NAMED_POOL" -o 'jsonpath={.items[*].metadata.name}' \
    || stop "the pool" "listing the nodes that carry its label (POOL_LABEL=$NAMED_POOL) failed after $KUBE_TRIES tries: $err"
  outgoing=""
  for node in $out; do
    is_in "$node" "$REPARTITION_NODES" || outgoing="$outgoing $node"
  done
  [ -n "$outgoing" ] || return 0
  echo "released from the pool (no longer in $REPARTITION_NODES_KEY):$outgoing"
  no_pinned_pods "$outgoing"
  batch=$outgoing
  ours=""
  foreign=""
  keep=""
  cordon_batch
  drain_batch
  for node in $batch; do
    is_in "$node" "$gone" && continue
    if is_in "$node" "$ours"; then
      patch_node "$node" "$RELEASE_AND_UNCORDON"
      echo "node $node: its GPU pods moved; POOL_LABEL removed; uncordoned"
    else
      patch_node "$node" "$RELEASE"
      echo "node $node: its GPU pods moved; POOL_LABEL removed; left cordoned as it was (cordoned by someone else)"
    fi
    released="$released $node"
  done
  batch=""
}

# no_stranded_replicas: before any node is touched, refuse a switch between the device plugin and
# DRA that replicas of the pool's services (BUDGET_SELECTOR) could not follow. Their pods ask for
# a slice the way the plugin being turned off serves it until their Deployments roll, after this
# Job: a `nvidia.com/mig-*` request reaches a DRA node only through the extended-resource bridge
# (SWITCH_KEEPS_REQUESTS: the program sets it on a DRA pool when the bridge is on and DynamicMIG
# off), and a resource claim never reaches the device plugin (a request does, whatever the stack
# says now: the pods decide on the way back). Only the nodes such replicas run on are read: a
# pool none of whose replicas run on a node to switch switches.
STRANDED_POD_FIELDS='{range .items[*]}{.spec.nodeName}{"|"}{.metadata.deletionTimestamp}{"|"}{.metadata.labels.app\.kubernetes\.io/instance}{"|"}{.metadata.labels.app\.kubernetes\.io/name}{"|"}{.spec.containers[*].resources.limits}{"|"}{.spec.resourceClaims[*].name}{"\n"}{end}'
no_stranded_replicas() {
  [ -n "${BUDGET_SELECTOR:-}" ] || return 0
  kc get pods --all-namespaces -l "$BUDGET_SELECTOR" -o "jsonpath=$STRANDED_POD_FIELDS" \
    || stop "the pool's services" "listing their pods ($BUDGET_SELECTOR) failed after $KUBE_TRIES tries: $err"
  bound="" # "NODE SERVICE" for each replica that could not follow a switch of its node
  while IFS='|' read -r pod_node deleting instance name limits claims; do
    [ -n "$pod_node" ] && [ -z "$deleting" ] || continue
    # Back to the device plugin a claim is stranded (the device plugin serves requests); to DRA
    # a request is, unless the bridge serves it.
    if [ "$TARGET_ALLOCATION" = dra ]; then
      [ -z "${SWITCH_KEEPS_REQUESTS:-}" ] || continue
      case $limits in
        *'"nvidia.com/gpu'* | *'"nvidia.com/mig-'*) ;;
        *) continue ;;
      esac
    elif [ -z "$claims" ]; then
      continue
    fi
    bound="$bound$pod_node ${instance:-$name}
"
  done <<PODS
$out
PODS
  [ -n "$bound" ] || return 0
  list_pool
  switching=""
  stranded="" # the service of each stranded replica, one a line
  for node in $pool; do
    on_node=""
    while read -r bound_node service; do
      if [ "$bound_node" = "$node" ]; then
        on_node="$on_node$service
"
      fi
    done <<BOUND
$bound
BOUND
    [ -n "$on_node" ] || continue
    read_node "$node"
    [ -n "$node_found" ] && [ -z "$node_switched" ] || continue
    switching="$switching $node"
    stranded="$stranded$on_node"
  done
  [ -n "$stranded" ] || return 0
  replicas=$(printf '%s' "$stranded" | LC_ALL=C sort | uniq -c | while read -r count service; do
    printf ', %s (%s)' "$service" "$count"
  done)
  if [ "$TARGET_ALLOCATION" = dra ]; then
    direction="from the device plugin to DRA"
    why="without the extended-resource bridge a pod's nvidia.com/mig-* request does not carry over to DRA, which hands out slices through resource claims"
    kept="device-plugin"
  else
    direction="from DRA back to the device plugin"
    why="a pod's resource claim does not carry over to the device plugin, which serves nvidia.com/mig-* requests only"
    kept="dra"
  fi
  stop "the pool's move $direction" "switching$switching would strand $(printf '%s' "$stranded" | grep -c .) replicas of the pool's services running there (${replicas#, }): $why, so a switched node's replicas would have nowhere to run until their Deployments roll, after this Job has switched every node. Nothing was cordoned, labelled or evicted. Ways forward: on Kubernetes BRIDGE_KUBERNETES_VERSION or later turn the extended-resource bridge on (dra: kubernetesVersion BRIDGE_KUBERNETES_VERSION+, extendedResources: true; to move back, first in a pulumi up that keeps allocation: dra) and the pool moves in place, node by node; or move the services to a new pool with the target allocation first (services[].pool) and remove this one later; or keep allocation: $kept. mig-inference diff --deployed shows the plan of each"
}

if [ -z "$REPARTITION_SELECTOR" ]; then
  missing=""
  for node in $REPARTITION_NODES; do
    read_node "$node"
    [ -n "$node_found" ] || missing="$missing $node"
  done
  if [ -n "$missing" ]; then
    echo "STOPPED before any change: $REPARTITION_NODES_KEY names nodes the cluster does not have:$missing"
    echo "correct $REPARTITION_NODES_KEY in the stack file (kubectl get nodes lists the cluster's nodes), then run pulumi up again"
    exit 1
  fi
fi

take_over_budgets
no_stranded_replicas
drained=""  # a batch of this run is done: the replicas it moved settle before the next drain
while :; do
  pick
  [ -n "$batch" ] || break
  [ -z "$drained" ] || pace
  no_pinned_pods "$todo"
  cordon_batch
  hold_rest
  drain_batch
  deadline=$(($(date +%s) + RECONFIGURE_TIMEOUT_SECONDS))
  switch_batch
  trigger_batch
  wait_batch
  drained=1
done
release
restore_budgets || exit 1
echo "re-partitioned to $TARGET_CONFIG:${done_nodes:- no node}${gone:+ (gone, skipped:$gone)}${released:+; released:$released}"
