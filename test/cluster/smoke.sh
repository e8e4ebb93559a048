#!/usr/bin/env bash
# Phase-1 check of a running cluster: node Ready, a Deployment's pod Running,
# its ClusterIP Service answering from the host, and from a pod the cluster
# names resolving while any other name fails at once (nothing forwarded).
set -euo pipefail
source "$(dirname "$0")/env.sh"
fail() { echo "smoke: $*" >&2; exit 1; }

kc wait --for=condition=Ready "node/$NODE_NAME" --timeout=10s >/dev/null
kc apply -f "$SRC/manifests/smoke.yaml" >/dev/null
kc -n kc-smoke rollout status deploy/hello --timeout=60s >/dev/null
kc -n kc-smoke wait --for=condition=Ready pod/probe --timeout=60s >/dev/null

ip=$(kc -n kc-smoke get svc hello -o jsonpath='{.spec.clusterIP}')
out=$(retry 10 curl -sS --max-time 5 "http://$ip/") || fail "ClusterIP $ip does not answer from the host"
[[ $out == "hello from hello-"* ]] || fail "ClusterIP $ip answered: $out"
log "host -> ClusterIP $ip: $out"

p() { kc -n kc-smoke exec probe -- /probe "$@"; }
out=$(p lookup kubernetes.default.svc.cluster.local) || fail "$out"
[[ $out == *"[$API_SVC_IP]"* ]] || fail "kubernetes.default.svc.cluster.local: $out"
log "pod: $out"
out=$(retry 10 p get http://hello.kc-smoke/) || fail "pod -> hello.kc-smoke: $out"
log "pod -> hello.kc-smoke: $out"
# Any other name fails, and fast (REFUSED locally, no upstream to wait for).
for name in example.com kubernetes.io; do
  if out=$(p lookup "$name" 2>&1); then fail "$name resolved: $out"; fi
  [[ $out =~ after\ ([0-9.]+)(ms|µs) ]] || fail "$name took long: $out"
  log "pod: $out"
done
kc delete namespace kc-smoke --wait=false >/dev/null
log "smoke: ok"
