# shellcheck shell=sh
# The node Jobs' kubectl helpers, inlined where a script says `. ./kube.sh`
# (mig_inference.kube.scripts.load). Every kubectl output is captured, its status checked, and only
# then parsed: an error is never read as data.
# shellcheck disable=SC2034  # out and err are read by the scripts that include this file
KUBE_TRIES=${KUBECTL_TRIES:-3}
KUBE_TIMEOUT=${KUBECTL_REQUEST_TIMEOUT:-30s}
KUBE_RETRY_SECONDS=${KUBECTL_RETRY_SECONDS:-5}
kube_tmp=$(mktemp -d)
trap 'rm -rf "$kube_tmp"' EXIT

# kc ARGS...: kubectl, tried up to KUBECTL_TRIES times; 0 with its output in $out, or 1 with the
# last error in $err.
kc() {
  kc_try=1
  while :; do
    if out=$(kubectl --request-timeout="$KUBE_TIMEOUT" "$@" </dev/null 2>"$kube_tmp/err"); then
      return 0
    fi
    if [ "$kc_try" -ge "$KUBE_TRIES" ]; then
      err=$(tr '\n' ' ' <"$kube_tmp/err")
      return 1
    fi
    kc_try=$((kc_try + 1))
    sleep "$KUBE_RETRY_SECONDS"
  done
}

# entries MAP: the "key=value" entries of a map as kubectl's JSONPath prints it
# ({"k":"v",...}), one per line. Label keys and values, resource names and quantities hold no
# comma, quote or colon.
entries() {
  entries_body=${1#\{}
  entries_body=${entries_body%\}}
  entries_ifs=$IFS
  IFS=,
  for entries_pair in $entries_body; do
    entries_key=${entries_pair%%\":*}
    entries_value=${entries_pair#*\":}
    entries_value=${entries_value#\"}
    printf '%s=%s\n' "${entries_key#\"}" "${entries_value%\"}"
  done
  IFS=$entries_ifs
}

# gpu_devices ALLOCATABLE: the GPU resources of a node's allocatable map that are not zero
# (nvidia.com/gpu, nvidia.com/gpu.shared, nvidia.com/mig-*), "name=count" separated by spaces,
# in kubectl's (sorted) order: what the device plugin advertises.
gpu_devices() {
  gpu_found=""
  for gpu_entry in $(entries "$1"); do
    case ${gpu_entry%%=*} in
      nvidia.com/gpu | nvidia.com/gpu.shared | nvidia.com/mig-*)
        [ "${gpu_entry#*=}" = 0 ] || gpu_found="$gpu_found $gpu_entry"
        ;;
    esac
  done
  printf '%s' "${gpu_found# }"
}

# paused_labels LABELS: the node's DEPLOY_LABEL_PREFIX* labels set to PAUSED_VALUE (the MIG
# manager works, or a failed run left its operands paused).
paused_labels() {
  paused_found=""
  for paused_entry in $(entries "$1"); do
    case $paused_entry in
      DEPLOY_LABEL_PREFIX*=PAUSED_VALUE) paused_found="$paused_found ${paused_entry%%=*}" ;;
    esac
  done
  printf '%s' "${paused_found# }"
}

# not_ready READY: whether a node's Ready condition status (as read with its labels) says
# NotReady (False, or Unknown once its kubelet stopped posting); none read counts as Ready.
not_ready() {
  [ "$1" = False ] || [ "$1" = Unknown ]
}

# lost_node_reason NODE: why a node whose MIG manager ended its run is NotReady for good, and the
# way forward. With the host's driver, a MIG mode change stops and restarts the host's kubelet;
# on AL2023 (cgroup v2) that leaves containerd's state corrupt (NVIDIA/gpu-operator#2415,
# NVIDIA/mig-parted#368): no restart of a pod or service clears it, only a new instance does.
lost_node_reason() {
  printf '%s\n' "node $1 is NotReady since its MIG manager ended its run: the known fault of a MIG mode change with the host's driver, whose kubelet restart leaves containerd's state corrupt (NVIDIA/gpu-operator#2415; docs/troubleshooting.md). Only a new instance clears it: EKS node auto repair replaces a node NotReady for 30 minutes; elsewhere replace the instance (kubectl describe node $1 shows the kubelet's condition). The replacement's user data switches MIG mode on before its kubelet starts, so its first apply changes no mode"
}

# is_in WORD LIST: whether WORD is one of LIST's words.
is_in() {
  case " $2 " in
    *" $1 "*) return 0 ;;
  esac
  return 1
}

# restart_mig_manager_pods NODE: delete NODE's MIG manager pods in OPERATOR_NAMESPACE (the
# DaemonSet's new pod applies the label's current value once); 0 with their names in $managers,
# 1 with $err (also when none runs there).
restart_mig_manager_pods() {
  kc get pods -n "$OPERATOR_NAMESPACE" -l 'MIG_MANAGER_SELECTOR' \
    --field-selector "spec.nodeName=$1" -o 'jsonpath={.items[*].metadata.name}' || return 1
  managers=$out
  if [ -z "$managers" ]; then
    err="no MIG manager pod (MIG_MANAGER_SELECTOR, namespace $OPERATOR_NAMESPACE) runs on it: is the GPU Operator's MIG manager deployed there?"
    return 1
  fi
  for manager in $managers; do
    kc delete pod -n "$OPERATOR_NAMESPACE" "$manager" --ignore-not-found --wait=false || return 1
  done
  return 0
}

# dra_devices NODE: 0 with $dra_found set to the devices NVIDIA's DRA driver publishes for NODE in
# its ResourceSlices, counted as the device plugin would advertise them ("nvidia.com/gpu=N",
# "nvidia.com/mig-<profile>=N" with `+` as `.`), sorted by name and separated by spaces; 1 with
# $err when the listing fails.
dra_devices() {
  kc get resourceslices --field-selector "spec.nodeName=$1" \
    -o 'jsonpath={range .items[?(@.spec.driver=="DRA_DRIVER_NAME")].spec.devices[*]}{.attributes.type.string}{"|"}{.attributes.profile.string}{"\n"}{end}' \
    || return 1
  dra_found=$(printf '%s\n' "$out" | while IFS='|' read -r dra_kind dra_profile; do
    case $dra_kind in
      mig) printf 'nvidia.com/mig-%s\n' "$dra_profile" | tr '+' '.' ;;
      gpu) printf 'nvidia.com/gpu\n' ;;
    esac
  done | LC_ALL=C sort | uniq -c | while read -r dra_count dra_name; do
    printf '%s=%s ' "$dra_name" "$dra_count"
  done)
  dra_found=${dra_found% }
  return 0
}

# restart_dra_plugin NODE: delete the DRA driver's kubelet-plugin pods on NODE (its DaemonSet
# starts a new one, which enumerates the node's MIG devices afresh: the driver's static MIG mode
# discovers slices only when it starts); 0 with their names in $dra_old, 1 with $err.
restart_dra_plugin() {
  kc get pods -n "$DRA_NAMESPACE" -l 'DRA_PLUGIN_SELECTOR' --field-selector "spec.nodeName=$1" \
    -o 'jsonpath={.items[*].metadata.name}' || return 1
  dra_old=$out
  for dra_pod in $dra_old; do
    kc delete pod -n "$DRA_NAMESPACE" "$dra_pod" --ignore-not-found --wait=false || return 1
  done
  return 0
}

# dra_ready_pods NODE: 0 with the names of the kubelet-plugin pods running Ready on NODE (not
# being deleted) in $dra_pods; 1 with $err when the listing fails.
dra_ready_pods() {
  kc get pods -n "$DRA_NAMESPACE" -l 'DRA_PLUGIN_SELECTOR' --field-selector "spec.nodeName=$1" \
    -o 'jsonpath={range .items[*]}{.metadata.name}{"|"}{.metadata.deletionTimestamp}{"|"}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' \
    || return 1
  dra_pods=$(printf '%s\n' "$out" | while IFS='|' read -r dra_pod dra_deleting dra_status; do
    if [ -n "$dra_pod" ] && [ -z "$dra_deleting" ] && [ "$dra_status" = True ]; then
      printf '%s ' "$dra_pod"
    fi
  done)
  return 0
}

# dra_plugin_ready NODE OLD: 0 with dra_ready=1 when a kubelet-plugin pod not named in OLD runs
# Ready on NODE (dra_ready empty otherwise); 1 with $err when the listing fails.
dra_plugin_ready() {
  dra_ready=""
  kc get pods -n "$DRA_NAMESPACE" -l 'DRA_PLUGIN_SELECTOR' --field-selector "spec.nodeName=$1" \
    -o 'jsonpath={range .items[*]}{.metadata.name}{"|"}{.metadata.deletionTimestamp}{"|"}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' \
    || return 1
  while IFS='|' read -r dra_pod dra_deleting dra_status; do
    [ -n "$dra_pod" ] || continue
    is_in "$dra_pod" "$2" && continue
    if [ -z "$dra_deleting" ] && [ "$dra_status" = True ]; then
      dra_ready=1
    fi
  done <<DRA_PODS
$out
DRA_PODS
  return 0
}
