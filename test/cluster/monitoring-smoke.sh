#!/usr/bin/env bash
# Phase-4 check: Prometheus scrapes annotated pods (itself) with namespace
# and pod labels, and the Pods custom metrics API serves such a series
# through Prometheus Adapter.
set -euo pipefail
source "$(dirname "$0")/env.sh"
fail() { echo "monitoring-smoke: $*" >&2; exit 1; }

ip=$(kc -n monitoring get svc prometheus -o jsonpath='{.spec.clusterIP}')
q='up{job="pods",namespace="monitoring"}'
scraped() { curl -sS --max-time 5 -G "http://$ip:9090/api/v1/query" --data-urlencode "query=$q" | grep '"value":\[[0-9.]*,"1"\]'; }
out=$(retry 60 scraped) || fail "Prometheus does not scrape its own pod: $out"
log "Prometheus: $q = 1"

m=/apis/custom.metrics.k8s.io/v1beta1/namespaces/monitoring/pods/%2A/prometheus_http_requests
served() { kc get --raw "$m" | grep '"metricName":"prometheus_http_requests"'; }
out=$(retry 90 served) || fail "custom metrics API $m: $out"
log "custom.metrics.k8s.io: $(grep -o '"describedObject":{[^}]*}' <<<"$out" | head -1) $(grep -o '"value":"[^"]*"' <<<"$out" | head -1)"
log "monitoring-smoke: ok"
