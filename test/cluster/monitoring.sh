#!/usr/bin/env bash
# Prometheus and Prometheus Adapter (the Pods custom metrics API the HPA
# class of Knative Services asks for), in namespace monitoring. Idempotent.
set -euo pipefail
source "$(dirname "$0")/env.sh"
hash_of() { sed -n '/^data:/,/^---/p' "$1" | sha256sum | cut -c1-16; }
PROMETHEUS_VERSION=$(cat "$BIN/prometheus.version") PROMETHEUS_CONFIG_HASH=$(hash_of "$SRC/manifests/prometheus.yaml") \
  envsubst '${PROMETHEUS_VERSION} ${PROMETHEUS_CONFIG_HASH}' <"$SRC/manifests/prometheus.yaml" | kc apply -f - >/dev/null
ADAPTER_VERSION=$(cat "$BIN/prometheus-adapter.version") ADAPTER_CONFIG_HASH=$(hash_of "$SRC/manifests/prometheus-adapter.yaml") \
  envsubst '${ADAPTER_VERSION} ${ADAPTER_CONFIG_HASH}' <"$SRC/manifests/prometheus-adapter.yaml" | kc apply -f - >/dev/null
kc -n monitoring rollout status deploy/prometheus --timeout=120s >/dev/null
kc -n monitoring rollout status deploy/prometheus-adapter --timeout=120s >/dev/null
kc wait --for=condition=Available apiservice/v1beta1.custom.metrics.k8s.io --timeout=60s >/dev/null
log "Prometheus $(cat "$BIN/prometheus.version") and Prometheus Adapter $(cat "$BIN/prometheus-adapter.version") Ready"
