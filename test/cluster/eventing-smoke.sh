#!/usr/bin/env bash
# Phase-3 check: a PingSource delivers to a Knative Service sink (it fires
# every 5 s; the sink's first start is most of the wait).
set -euo pipefail
source "$(dirname "$0")/env.sh"
fail() { echo "eventing-smoke: $*" >&2; exit 1; }

kc apply -f "$SRC/manifests/pingsource.yaml" >/dev/null
kc -n kc-smoke-eventing wait --for=condition=Ready ksvc/sink --timeout=120s >/dev/null
kc -n kc-smoke-eventing wait --for=condition=Ready pingsource/ping --timeout=120s >/dev/null
src=/apis/v1/namespaces/kc-smoke-eventing/pingsources/ping
end=$((SECONDS + 130))
until kc -n kc-smoke-eventing logs -l serving.knative.dev/service=sink -c user-container --tail=-1 2>/dev/null | grep -q "ce-source=$src"; do
  [ $SECONDS -lt $end ] || fail "no event from $src at the sink after 130 s"
  sleep 2
done
log "sink got: $(kc -n kc-smoke-eventing logs -l serving.knative.dev/service=sink -c user-container --tail=-1 | grep "ce-source=$src" | head -1)"
# The PingSource first: a namespace being deleted keeps it firing until its
# last pod has stopped.
kc -n kc-smoke-eventing delete pingsource/ping --wait=true >/dev/null
kc delete namespace kc-smoke-eventing --wait=false >/dev/null
log "eventing-smoke: ok"
