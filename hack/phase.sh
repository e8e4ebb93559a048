#!/usr/bin/env bash
# Runs one phase of `make test` and records how long it took, so that the
# run ends with a table of its phases (make test runs two lanes side by
# side: their lines are told apart by the phase name in front of each).
#
#   phase.sh run NAME CMD...   run CMD, each output line behind "NAME | ",
#                              and append NAME, start, end, exit code and
#                              CPU seconds to $PHASES_FILE when it is set
#   phase.sh table             for each failed phase the lines that tell
#                              why, then the table of $PHASES_FILE, ending
#                              with the line "phases: N passed, N failed"
#
# Each phase's output is kept in $PHASES_FILE's folder, as NAME.log: a
# run that fails ends with why, where a CI log's tail shows it.
set -euo pipefail

# clock M:SS of a number of seconds.
clock() { printf '%d:%02d' $(($1 / 60)) $(($1 % 60)); }

run() {
  local name=$1 start rc
  shift
  start=$(date +%s)
  set +e
  "$@" 2>&1 | tee "$(log_of "$name")" | sed -u "s/^/$name | /"
  rc=${PIPESTATUS[0]}
  set -e
  if [ -n "${PHASES_FILE:-}" ]; then
    # The user and system CPU time of the processes this shell waited
    # for: the phase's command and what it waited for in turn, not what
    # it left running (the cluster's daemons). times is a builtin that
    # must run in this shell, not in a pipe's or $(...)'s subshell.
    local cpu_file=${PHASES_FILE%.*}.$name.times
    times >"$cpu_file"
    printf '%s\t%s\t%s\t%s\t%s\n' "$name" "$start" "$(date +%s)" "$rc" "$(children_cpu "$cpu_file")" >>"$PHASES_FILE"
  fi
  return "$rc"
}

# children_cpu FILE: whole seconds of CPU in the second line of bash's
# times output in FILE ("1m2.500s 0m3.250s": children's user and system).
children_cpu() {
  awk 'NR == 2 {
    total = 0
    for (i = 1; i <= 2; i++) { split($i, t, /[ms]/); total += t[1] * 60 + t[2] }
    printf "%d\n", total + 0.5
  }' "$1"
}

# log_of NAME: where phase NAME's output is kept.
log_of() {
  if [ -n "${PHASES_FILE:-}" ]; then echo "${PHASES_FILE%.*}.$1.log"; else echo /dev/null; fi
}

# why LOG: the last lines of each failing Go test's output in LOG (go
# test's output, -v or not; a test whose subtest failed is left to the
# subtest), or LOG's last lines when no Go test failed in it.
why() {
  awk -v keep=8 '
    { tail[++total % 30] = $0 }
    /^=== (RUN|CONT|NAME|PAUSE) / { current = $3; next }
    /^ *--- FAIL: / { if (!($3 in seen)) { seen[$3] = 1; failed[++failures] = $3 }; current = $3; next }
    /^ *--- (PASS|SKIP): / || /^(FAIL|ok|PASS)([ \t]|$)/ { next }
    { count[current]++; lines[current, count[current] % keep] = $0 }
    END {
      for (i = 1; i <= failures; i++) {
        name = failed[i]; leaf = 1
        for (j = 1; j <= failures; j++) if (index(failed[j], name "/") == 1) leaf = 0
        if (!leaf) continue
        print "--- FAIL: " name
        n = count[name]
        for (k = (n > keep ? n - keep + 1 : 1); k <= n; k++) print lines[name, k % keep]
      }
      if (failures == 0) for (k = (total > 30 ? total - 29 : 1); k <= total; k++) print tail[k % 30]
    }' "$1"
}

table() {
  local file=${PHASES_FILE:?PHASES_FILE names the phases recorded}
  [ -s "$file" ] || { echo "phases: none recorded in $file"; return 1; }
  local first last passed=0 failed=0 name start end rc result
  while IFS=$'\t' read -r name start end rc cpu; do
    [ "$rc" -eq 0 ] || { echo; echo "why $name failed ($(log_of "$name")):"; why "$(log_of "$name")"; }
  done < <(sort -t$'\t' -k2,2n "$file")
  first=$(cut -f2 "$file" | sort -n | head -n1)
  last=$(cut -f3 "$file" | sort -n | tail -n1)
  echo
  printf '%-16s %8s %8s %8s  %s\n' phase start took cpu result
  local cpus=0
  while IFS=$'\t' read -r name start end rc cpu; do
    if [ "$rc" -eq 0 ]; then result=ok passed=$((passed + 1)); else result="failed ($rc)" failed=$((failed + 1)); fi
    cpus=$((cpus + ${cpu:-0}))
    printf '%-16s %8s %8s %8s  %s\n' "$name" "$(clock $((start - first)))" "$(clock $((end - start)))" "$(clock "${cpu:-0}")" "$result"
  done < <(sort -t$'\t' -k2,2n "$file")
  printf '%-16s %8s %8s %8s\n' "wall clock" "" "$(clock $((last - first)))" "$(clock "$cpus")"
  echo "phases: $passed passed, $failed failed; cpu is user and system time of each phase's processes"
}

case ${1:-} in
run) shift; [ $# -ge 2 ] || { echo "usage: $0 run NAME CMD..." >&2; exit 2; }; run "$@" ;;
table) table ;;
*) echo "usage: $0 run NAME CMD... | $0 table" >&2; exit 2 ;;
esac
