#!/usr/bin/env bash
# Installs this project on the cluster as docs/install.md tells an
# operator: the YAML of config/ with its ko:// images resolved to the
# dev.local images cluster.mk built from this tree (what `ko apply` does
# with a registry), the Prometheus Adapter rule of config/async/ mounted as
# the adapter's configuration, and forwarding turned on. Idempotent: a
# changed binary gets a new image tag, so the Service makes a new revision
# and the adapter rolls out; an unchanged one changes nothing.
set -euo pipefail
source "$(dirname "$0")/env.sh"
NS=knative-eventing
PROXY_URL=http://event-forwarding-proxy.$NS.svc.cluster.local

# image NAME BINARY: the image archive of BINARY, imported; prints its name.
image() {
  local tag ref
  tag=$(sha256sum "$2" | cut -c1-12)
  ref=dev.local/$1:$tag
  if ! ctr --address "$CONTAINERD_SOCK" -n k8s.io image ls -q | grep -qx "$ref"; then
    "$BIN/imgtar" -o "$IMAGES/$1.tar" -name "$ref" -entrypoint "/$1" "$2=/$1"
    ctr --address "$CONTAINERD_SOCK" -n k8s.io image import --no-unpack=false "$IMAGES/$1.tar" >/dev/null
  fi
  echo "$ref"
}
PROXY_IMAGE=$(image event-forwarding-proxy "$BIN/event-forwarding-proxy")
MTPING_IMAGE=$(image event-forwarding-mtping "$BIN/event-forwarding-mtping")
resolve() {
  sed -e "s|ko://knative.dev/event-forwarding-proxy/cmd/proxy|$PROXY_IMAGE|" \
    -e "s|ko://knative.dev/event-forwarding-proxy/cmd/mtping|$MTPING_IMAGE|"
}
# yamls DIR: the folder's YAML files as `kubectl apply -f DIR` reads them.
yamls() {
  local f
  for f in "$1"/*.yaml; do echo "---"; cat "$f"; done | resolve
}

# 1. Apply (the default install: the async profile).
yamls "$ROOT/config" | kc apply -f - >/dev/null
# 2. The held-call gauge for the HPA: the rule's ConfigMap as Prometheus
# Adapter's configuration file.
yamls "$ROOT/config/async" | kc apply -f - >/dev/null
kc -n monitoring patch deployment/prometheus-adapter --type strategic \
  -p '{"spec":{"template":{"spec":{"volumes":[{"name":"config","configMap":{"name":"event-forwarding-prometheus-adapter"}}]}}}}' >/dev/null
kc -n monitoring rollout status deployment/prometheus-adapter --timeout=120s >/dev/null
kc wait --for=condition=Available apiservice/v1beta1.custom.metrics.k8s.io --timeout=60s >/dev/null
# 3. Forwarding on.
kc -n $NS patch configmap/config-event-forwarding --type merge \
  -p "{\"data\":{\"event-forwarding-proxy\":\"$PROXY_URL\"}}" >/dev/null

# Ready for this generation, its latest revision serving: a wait on Ready
# alone could see the previous generation's condition.
ksvc_state() {
  kc -n $NS get ksvc/event-forwarding-proxy -o jsonpath='{.metadata.generation}/{.status.observedGeneration} {.status.conditions[?(@.type=="Ready")].status} {.status.latestCreatedRevisionName}/{.status.latestReadyRevisionName}'
}
end=$((SECONDS + 300))
until read -r gen ready revs <<<"$(ksvc_state)" && [ "${gen%/*}" = "${gen#*/}" ] && [ "$ready" = True ] && [ "${revs%/*}" = "${revs#*/}" ]; do
  [ $SECONDS -lt $end ] || { echo "project: event-forwarding-proxy not Ready after 300 s: $(ksvc_state)" >&2; exit 1; }
  sleep 2
done
# The previous revision keeps a pod (the HPA class has no scale to zero):
# removed as docs/install.md says, nothing being held at install time.
for rev in $(kc -n $NS get revisions -l serving.knative.dev/service=event-forwarding-proxy -o name); do
  [ "${rev#*/}" = "${revs#*/}" ] || kc -n $NS delete "$rev" >/dev/null
done
kc -n $NS rollout status deployment/pingsource-mt-adapter --timeout=180s >/dev/null
log "event-forwarding-proxy installed: $PROXY_IMAGE, adapter $MTPING_IMAGE, forwarding to $PROXY_URL"
