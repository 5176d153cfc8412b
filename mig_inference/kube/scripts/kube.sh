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

# is_in WORD LIST: whether WORD is one of LIST's words.
is_in() {
  case " $2 " in
    *" $1 "*) return 0 ;;
  esac
  return 1
}
