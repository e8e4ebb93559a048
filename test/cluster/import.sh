#!/usr/bin/env bash
# Imports image archives into the running node's containerd, by the names
# they carry: images that cluster-up does not import, for the scenarios
# that need them only (make bench-cluster's Eventing release before the
# cluster's). Importing one already there changes nothing.
set -euo pipefail
source "$(dirname "$0")/env.sh"
[ $# -gt 0 ] || { echo "usage: $0 ARCHIVE..." >&2; exit 2; }
[ -S "$CONTAINERD_SOCK" ] || { echo "no cluster running (make cluster-up)" >&2; exit 1; }
for archive in "$@"; do
  ctr --address "$CONTAINERD_SOCK" -n k8s.io image import --no-unpack=false "$archive" >/dev/null
done
log "images imported: $(for a in "$@"; do basename "$a"; done | tr '\n' ' ')"
