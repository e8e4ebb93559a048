#!/usr/bin/env bash
# Runs the unit and the integration suites again and again beside busy
# loops (make stress), as a loaded CI machine runs them: a test that
# assumes how soon something happens fails here first. The first failure
# stops it and names the run.
#
#   STRESS_RUNS       how many times both suites run (default 10)
#   STRESS_LOAD       busy loops beside them (default 2, one per core)
#   INTEGRATION_PKGS  the integration packages, from make
#   INTEGRATION_PARALLEL  how many of them run at once, as make integration
#   UNIT_TAGS         the build tags of the unit tests, from make
#   GO                the go command (default go)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
RUNS=${STRESS_RUNS:-10}
LOAD=${STRESS_LOAD:-2}
GO=${GO:-go}
read -ra PKGS <<<"${INTEGRATION_PKGS:?the integration packages, from make}"
PARALLEL=${INTEGRATION_PARALLEL:?how many integration packages run at once, from make}
UNIT_TAGS=${UNIT_TAGS:?the build tags of the unit tests, from make}
cd "$ROOT"

# Each loop is bounded by timeout as well, so that none outlives a run
# whose trap could not fire (SIGKILL): 45 minutes a run is far more than
# both suites take loaded.
loops=()
stop() {
  for pid in "${loops[@]}"; do kill "$pid" 2>/dev/null || true; done
}
trap stop EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
for _ in $(seq "$LOAD"); do
  timeout "$((RUNS * 45))m" sh -c 'while :; do :; done' &
  loops+=($!)
done

# -timeout above make unit's 20m: the loops slow every package down.
for run in $(seq "$RUNS"); do
  echo "stress: run $run of $RUNS, unit tests"
  if ! "$GO" test -race -count=1 -timeout 40m -tags "$UNIT_TAGS" ./...; then
    echo "stress: run $run of $RUNS failed (unit tests) with $LOAD busy loops; $((run - 1)) passed before it" >&2
    exit 1
  fi
  echo "stress: run $run of $RUNS, integration tests"
  if ! "$GO" test -race -count=1 -timeout 40m -p "$PARALLEL" -tags integration "${PKGS[@]}"; then
    echo "stress: run $run of $RUNS failed (integration tests) with $LOAD busy loops; $((run - 1)) passed before it" >&2
    exit 1
  fi
done
echo "stress: $RUNS of $RUNS runs passed with $LOAD busy loops"
