#!/usr/bin/env bash
# Runs one phase of `make test` and records how long it took, so that the
# run ends with a table of its phases (make test runs two lanes side by
# side: their lines are told apart by the phase name in front of each).
#
#   phase.sh run NAME CMD...   run CMD, each output line behind "NAME | ",
#                              and append NAME, start, end and exit code
#                              to $PHASES_FILE when it is set
#   phase.sh table             the table of $PHASES_FILE, ending with the
#                              line "phases: N passed, N failed"
set -euo pipefail

# clock M:SS of a number of seconds.
clock() { printf '%d:%02d' $(($1 / 60)) $(($1 % 60)); }

run() {
  local name=$1 start rc
  shift
  start=$(date +%s)
  set +e
  "$@" 2>&1 | sed -u "s/^/$name | /"
  rc=${PIPESTATUS[0]}
  set -e
  if [ -n "${PHASES_FILE:-}" ]; then
    printf '%s\t%s\t%s\t%s\n' "$name" "$start" "$(date +%s)" "$rc" >>"$PHASES_FILE"
  fi
  return "$rc"
}

table() {
  local file=${PHASES_FILE:?PHASES_FILE names the phases recorded}
  [ -s "$file" ] || { echo "phases: none recorded in $file"; return 1; }
  local first last passed=0 failed=0 name start end rc result
  first=$(cut -f2 "$file" | sort -n | head -n1)
  last=$(cut -f3 "$file" | sort -n | tail -n1)
  echo
  printf '%-16s %8s %8s  %s\n' phase start took result
  while IFS=$'\t' read -r name start end rc; do
    if [ "$rc" -eq 0 ]; then result=ok passed=$((passed + 1)); else result="failed ($rc)" failed=$((failed + 1)); fi
    printf '%-16s %8s %8s  %s\n' "$name" "$(clock $((start - first)))" "$(clock $((end - start)))" "$result"
  done < <(sort -t$'\t' -k2,2n "$file")
  printf '%-16s %8s %8s\n' "wall clock" "" "$(clock $((last - first)))"
  echo "phases: $passed passed, $failed failed"
}

case ${1:-} in
run) shift; [ $# -ge 2 ] || { echo "usage: $0 run NAME CMD..." >&2; exit 2; }; run "$@" ;;
table) table ;;
*) echo "usage: $0 run NAME CMD... | $0 table" >&2; exit 2 ;;
esac
