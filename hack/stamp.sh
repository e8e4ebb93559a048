#!/usr/bin/env bash
# stamp.sh STAMP FILE...: writes to STAMP the hash of FILE... (their names
# and contents), and only when it differs from what STAMP holds: STAMP's
# time then moves when the files' content does, not when only their times
# do (a fresh clone, a branch switched and back). make targets depend on
# the stamp instead of the files (Makefile, "Content stamps").
set -euo pipefail
stamp=${1:?usage: stamp.sh STAMP FILE...}
shift
# No files would hash standard input: a STAMP_ variable unset in make.
[ $# -gt 0 ] || { echo "stamp.sh: no files to stamp $stamp with" >&2; exit 2; }
mkdir -p "$(dirname "$stamp")"
hash=$(sha256sum -- "$@" | sha256sum | cut -d' ' -f1)
[ "$(cat "$stamp" 2>/dev/null)" = "$hash" ] || echo "$hash" >"$stamp"
