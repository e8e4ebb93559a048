#!/usr/bin/env bash
# Runs each phase's smoke check once per cluster (a stamp under $RUN marks
# it passed), so a second cluster-up on a running cluster stays quick.
set -euo pipefail
source "$(dirname "$0")/env.sh"
for s in "$@"; do
  [ -f "$RUN/checked-$s" ] && continue
  "$SRC/$s.sh"
  touch "$RUN/checked-$s"
done
