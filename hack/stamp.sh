#!/usr/bin/env bash
# stamp.sh STAMP FILE...: writes to STAMP the hash of FILE... (their names
# and contents), and only when it differs from what STAMP holds: STAMP's
# time then moves when the files' content does, not when only their times
# do (a fresh clone, a branch switched and back). make targets depend on
# the stamp instead of the files (Makefile, "Content stamps").
set -euo pipefail
stamp=$1
shift
mkdir -p "$(dirname "$stamp")"
hash=$(sha256sum -- "$@" | sha256sum | cut -d' ' -f1)
[ "$(cat "$stamp" 2>/dev/null)" = "$hash" ] || echo "$hash" >"$stamp"
