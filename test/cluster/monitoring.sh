#!/usr/bin/env bash
# Prometheus and Prometheus Adapter (the Pods custom metrics API the HPA
# class of Knative Services asks for), in namespace monitoring. Idempotent.
# `monitoring.sh manifest` prints Prometheus's manifest, its version and
# config hash left as variables, and applies nothing.
set -euo pipefail
source "$(dirname "$0")/env.sh"

# prometheus_manifest prints manifests/prometheus.yaml with each line
# `#kit-job NAME` replaced by the job NAME of the kit's scrape-config.yaml,
# indented as that line, so that the cluster runs the kit's relabeling
# verbatim. Two parts of the job change: its kubernetes_sd_configs, which
# Debian's Prometheus lacks, becomes podsd's /pods of the same namespace;
# its scrape_interval goes, so the cluster's 10 s applies to it as to every
# target (the scenarios wait on the adapter's HPA, which reads its series).
prometheus_manifest() {
  awk '
    function fail(msg) { print "monitoring.sh: " FILENAME ": " msg >"/dev/stderr"; failed = 1; exit 1 }
    function flush() {
      if (sd) jobs[name] = jobs[name] sdpre "http_sd_configs: [{url: \"http://127.0.0.1:8000/pods" \
        (ns == "" ? "" : "?namespace=" ns) "\", refresh_interval: 10s}]\n"
      sd = 0
    }
    # scrape-config.yaml: a job runs from its "- job_name:" line to the
    # next line indented no deeper, and is kept re-indented to column 0.
    FNR == NR {
      indent = match($0, /[^ ]/) - 1
      if (indent < 0) next
      if ($0 ~ /^ *- job_name: /) { flush(); name = $NF; dash = indent; jobs[name] = "- job_name: " name "\n"; next }
      if (name == "") next
      if (indent <= dash) { flush(); name = ""; next }
      if (sd && indent > sdindent) {
        if ($0 ~ /role:/ && $NF != "pod") fail("job " name ": role " $NF "; podsd lists pods")
        if ($1 == "names:") {
          ns = $0; sub(/^[^[]*\[ */, "", ns); sub(/ *\].*$/, "", ns)
          if (ns ~ /[ ,]/) fail("job " name ": namespaces " ns "; podsd lists one or all")
        }
        next
      }
      flush()
      if ($1 == "kubernetes_sd_configs:") { sd = 1; ns = ""; sdindent = indent; sdpre = substr($0, dash + 1, indent - dash); next }
      if ($1 == "scrape_interval:" && indent == dash + 2) next
      jobs[name] = jobs[name] substr($0, dash + 1) "\n"
      next
    }
    FNR == 1 { flush() }
    $1 == "#kit-job" {
      if (!($2 in jobs)) fail("no job " $2 " in config/monitoring/scrape-config.yaml")
      pre = substr($0, 1, match($0, /[^ ]/) - 1)
      n = split(jobs[$2], lines, "\n")
      for (i = 1; i < n; i++) print pre lines[i]
      next
    }
    { print }
    END { if (failed) exit 1 }
  ' "$ROOT/config/monitoring/scrape-config.yaml" "$SRC/manifests/prometheus.yaml"
}

if [ "${1:-}" = manifest ]; then
  prometheus_manifest
  exit
fi

# hash_of: a hash of the data of the ConfigMap that starts a manifest on
# standard input; a change rolls the Deployment that mounts it.
hash_of() { sed -n '/^data:/,/^---/p' | sha256sum | cut -c1-16; }
manifest=$(prometheus_manifest)
# shellcheck disable=SC2016,SC2034,SC2269 # variables for envsubst, and its list of names unexpanded
PROMETHEUS_VERSION=$(cat "$BIN/prometheus.version") PROMETHEUS_CONFIG_HASH=$(hash_of <<<"$manifest") \
  envsubst '${PROMETHEUS_VERSION} ${PROMETHEUS_CONFIG_HASH}' <<<"$manifest" | kc apply -f - >/dev/null
# shellcheck disable=SC2016,SC2034,SC2269 # variables for envsubst, and its list of names unexpanded
ADAPTER_VERSION=$(cat "$BIN/prometheus-adapter.version") ADAPTER_CONFIG_HASH=$(hash_of <"$SRC/manifests/prometheus-adapter.yaml") \
  envsubst '${ADAPTER_VERSION} ${ADAPTER_CONFIG_HASH}' <"$SRC/manifests/prometheus-adapter.yaml" | kc apply -f - >/dev/null
kc -n monitoring rollout status deploy/prometheus --timeout=120s >/dev/null
kc -n monitoring rollout status deploy/prometheus-adapter --timeout=120s >/dev/null
kc wait --for=condition=Available apiservice/v1beta1.custom.metrics.k8s.io --timeout=60s >/dev/null
log "Prometheus $(cat "$BIN/prometheus.version") and Prometheus Adapter $(cat "$BIN/prometheus-adapter.version") Ready"
