#!/usr/bin/env bash
# docblock.sh NAME: runs the shell block of docs/install.md marked
# `<!-- test: NAME -->` as an operator would type it: from the repository
# root, with the cluster's kubectl first on PATH and its kubeconfig. The
# caller's environment passes through (EVENTING_CORE for the way back,
# DOCBLOCK_IMAGES below).
set -euo pipefail
source "$(dirname "$0")/env.sh"
name=${1:?usage: docblock.sh NAME}
block=$(awk -v marker="<!-- test: $name -->" '
  $0 == marker { found = 1; next }
  found && /^```/ { if (open) exit; open = 1; next }
  open { print }' "$ROOT/docs/install.md")
[ -n "$block" ] || { echo "docs/install.md has no block marked $name" >&2; exit 1; }
# DOCBLOCK_IMAGES="FROM=TO ...": public images the block names, replaced
# by the cluster's own (it pulls nothing).
for pair in ${DOCBLOCK_IMAGES:-}; do
  block=${block//"${pair%%=*}"/"${pair#*=}"}
done
cd "$ROOT"
log "docs/install.md, $name"
bash -euo pipefail -c "$block"
