#!/usr/bin/env bash
# Knative Eventing v0.50.0 core from the YAML inside the eventing module
# (ko:// images replaced by the dev.local images cluster.mk built: the
# controller, the webhook and upstream's pingsource-mt-adapter). Idempotent.
set -euo pipefail
source "$(dirname "$0")/env.sh"
V=$(cat "$BIN/eventing.version")
EVENTING=$(cd "$SRC/eventing" && go list -m -f '{{.Dir}}' knative.dev/eventing)
yamls() {
  local f
  for f in "$@"; do echo "---"; cat "$f"; done |
    sed "s|ko://knative.dev/eventing/cmd/\([a-z_-]*\)|dev.local/eventing-\1:$V|" | small_requests
}
D=$EVENTING/config/core
yamls "$D"/resources/*.yaml | kc apply -f - >/dev/null
kc wait --for=condition=Established crd --all --timeout=60s >/dev/null
# Deployments of what is not built here (job-sink, request-reply) are left
# out. The PingSource adapter's Deployment is applied only once: upstream's
# YAML says replicas 0 and the controller scales it, so applying it again
# would take a running adapter down.
adapter=$D/deployments/pingsource-mt-adapter.yaml
if kc -n knative-eventing get deploy/pingsource-mt-adapter >/dev/null 2>&1; then adapter=; fi
yamls "$D"/100-namespace.yaml "$D"/200-*.yaml "$D"/roles/*.yaml "$D"/configmaps/*.yaml \
  "$SRC/manifests/eventing-images.yaml" \
  "$D"/deployments/{controller,webhook}.yaml ${adapter:+"$adapter"} "$D"/webhooks/*.yaml | kc apply -f - >/dev/null
# The e2e tests' Eventing upgrades bring a release whose images differ
# from the ones applied here, as a real upgrade's do: the same binaries
# under a second name.
for c in controller webhook mtping; do
  ctr --address "$CONTAINERD_SOCK" -n k8s.io image tag --force "dev.local/eventing-$c:$V" "dev.local/eventing-$c:$V-next" >/dev/null
done
for d in eventing-controller eventing-webhook; do
  kc -n knative-eventing rollout status "deploy/$d" --timeout=180s >/dev/null
done
log "Knative Eventing $V Ready"
