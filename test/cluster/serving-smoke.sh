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
# Traefik marks the route's KIngress Ready once it has loaded it, not once
# its backend answers: the ClusterIP of the revision's Service the
# KIngress names, which kube-proxy programs in its own time (Traefik
# answers Bad Gateway until then). Wait until that ClusterIP answers from
# the node, whose rules are the ones Traefik's pod goes through, with the
# headers Traefik adds (the activator, if in the path, routes by them).
split='.spec.rules[0].http.paths[0].splits[0]'
kingress() { kc -n kc-smoke-serving get ingresses.networking.internal.knative.dev hello -o jsonpath="{$split.$1}"; }
svc=$(kingress serviceName)
port=$(kingress servicePort)
rev_ns=$(kingress appendHeaders.Knative-Serving-Namespace)
rev=$(kingress appendHeaders.Knative-Serving-Revision)
backend=$(kc -n kc-smoke-serving get svc "$svc" -o jsonpath='{.spec.clusterIP}'):$port
out=$(retry 60 curl -fsS --max-time 10 -H "Host: $host" -H "Knative-Serving-Namespace: $rev_ns" \
  -H "Knative-Serving-Revision: $rev" "http://$backend/") || fail "Traefik's backend $svc ($backend) does not answer: $out"
log "host -> Traefik's backend $svc $backend: $out"
# The KIngress is Ready once Traefik's Knative provider has taken it, a
# moment before Traefik's router serves it (a 404 meanwhile): the route is
# waited for, its last answer kept for the failure.
ip=$(kc -n traefik get svc traefik -o jsonpath='{.spec.clusterIP}')
hello_via() {
  local out
  if out=$(curl -sS --max-time 10 -H "Host: $host" "http://$1/" 2>&1) && [[ $out == "hello from hello-"* ]]; then
    echo "$out"
    return 0
  fi
  echo "$out"
  return 1
}
for addr in "$ip:80" "$NODE_IP:31080"; do
  out=$(retry 60 hello_via "$addr") || fail "$host via $addr answered, 60 s on: $out"
  log "host -> Traefik $addr (Host: $host): $out"
done
kc delete namespace kc-smoke-serving --wait=false >/dev/null
log "serving-smoke: ok"
