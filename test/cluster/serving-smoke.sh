#!/usr/bin/env bash
# Phase-2 check: a hello Knative Service becomes Ready and answers through
# Traefik from the host, by Traefik's ClusterIP and by its NodePort on the
# bridge's address (never eth0).
set -euo pipefail
source "$(dirname "$0")/env.sh"
fail() { echo "serving-smoke: $*" >&2; exit 1; }

kc apply -f "$SRC/manifests/hello-ksvc.yaml" >/dev/null
kc -n kc-smoke-serving wait --for=condition=Ready ksvc/hello --timeout=120s >/dev/null
url=$(kc -n kc-smoke-serving get ksvc hello -o jsonpath='{.status.url}')
host=${url#http://}
ip=$(kc -n traefik get svc traefik -o jsonpath='{.spec.clusterIP}')
for addr in "$ip:80" "$NODE_IP:31080"; do
  out=$(retry 10 curl -sS --max-time 10 -H "Host: $host" "http://$addr/") || fail "$host via $addr: no answer"
  [[ $out == "hello from hello-"* ]] || fail "$host via $addr answered: $out"
  log "host -> Traefik $addr (Host: $host): $out"
done
kc delete namespace kc-smoke-serving --wait=false >/dev/null
log "serving-smoke: ok"
