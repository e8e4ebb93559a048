#!/usr/bin/env bash
# Knative and the project on the cluster up.sh started, in two steps,
# each running its parts side by side (the node mostly waits on pods):
# Serving, Eventing, the Knative Operator (stopped) and monitoring installed
# beside the cluster's own smoke check; then their smoke checks beside the
# project's install, which needs them installed, not checked (a failed
# check fails the start all the same). Idempotent, as each part is.
set -euo pipefail
source "$(dirname "$0")/env.sh"

# together PART...: each PART (a script of this folder and its arguments,
# as one word) at once; fails naming every part that failed.
together() {
  local pids=() failed='' i part
  for part in "$@"; do
    # shellcheck disable=SC2086 # a part is a script and its arguments
    "$SRC"/$part &
    pids+=($!)
  done
  for i in "${!pids[@]}"; do
    wait "${pids[$i]}" || failed+=" [${*:i+1:1}]"
  done
  [ -z "$failed" ] || { log "failed:$failed"; return 1; }
}

together serving.sh eventing.sh operator.sh monitoring.sh "check.sh smoke"
together "check.sh serving-smoke" "check.sh eventing-smoke" "check.sh monitoring-smoke" project.sh
