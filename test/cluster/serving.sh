#!/usr/bin/env bash
# Knative Serving v0.50.0 from the YAML inside the serving, networking and
# caching modules (ko:// images replaced by the dev.local images cluster.mk
# built), with Traefik's Knative provider as its ingress. Idempotent.
set -euo pipefail
source "$(dirname "$0")/env.sh"
V=$(cat "$BIN/serving.version")
moddir() { (cd "$SRC/serving" && go list -m -f '{{.Dir}}' "$1"); }
SERVING=$(moddir knative.dev/serving)
NETWORKING=$(moddir knative.dev/networking)
CACHING=$(moddir knative.dev/caching)
# yamls FILE...: the files as one stream, images replaced.
yamls() {
  local f
  for f in "$@"; do echo "---"; cat "$f"; done |
    sed "s|ko://knative.dev/serving/cmd/\([a-z-]*\)|dev.local/serving-\1:$V|" | small_requests
}

# Serving's module zip leaves out the files that are symlinks in its
# repository: the networking and caching CRDs and config-network come from
# their own modules.
yamls "$NETWORKING"/config/{certificate,domain-claim,ingress,serverlessservice}.yaml \
  "$CACHING/config/image.yaml" "$SERVING"/config/core/300-resources/*.yaml | kc apply -f - >/dev/null
kc wait --for=condition=Established crd --all --timeout=60s >/dev/null
yamls "$SERVING"/config/core/{100-namespace.yaml,200-roles/*.yaml,200-serviceaccount.yaml,configmaps/*.yaml} \
  "$NETWORKING/config/config-network.yaml" "$SERVING"/config/core/{deployments/*.yaml,webhooks/*.yaml,999-cache.yaml} \
  "$SERVING/config/hpa-autoscaling/controller.yaml" | kc apply -f - >/dev/null
kc -n knative-serving rollout status deploy/webhook --timeout=180s >/dev/null

# Traefik is the ingress; images are never resolved for dev.local; routes
# are named <service>.<namespace>.kc.test (reached with a Host header).
kc -n knative-serving patch configmap/config-network --type merge \
  -p '{"data":{"ingress-class":"traefik.ingress.networking.knative.dev"}}' >/dev/null
kc -n knative-serving patch configmap/config-deployment --type merge \
  -p '{"data":{"registries-skipping-tag-resolving":"kind.local,ko.local,dev.local"}}' >/dev/null
kc -n knative-serving patch configmap/config-domain --type merge -p '{"data":{"kc.test":""}}' >/dev/null

# shellcheck disable=SC2016 # envsubst's list of names, unexpanded
TRAEFIK_VERSION=$(cat "$BIN/traefik.version") envsubst '${TRAEFIK_VERSION}' <"$SRC/manifests/traefik.yaml" | kc apply -f - >/dev/null
for d in controller webhook autoscaler activator autoscaler-hpa; do
  kc -n knative-serving rollout status "deploy/$d" --timeout=180s >/dev/null
done
kc -n traefik rollout status deploy/traefik --timeout=120s >/dev/null
log "Knative Serving $V Ready, Traefik $(cat "$BIN/traefik.version") as its ingress"
