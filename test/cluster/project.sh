#!/usr/bin/env bash
# Installs this project on the cluster from release/ (make release) by
# running docs/install.md's own blocks: the release's image archives
# imported into the node's containerd (where an operator pushes them to a
# registry), the install block, the async profile's Prometheus Adapter
# rule mounted as the adapter's configuration, and the forwarding block.
# Idempotent: a changed binary gets a new digest, so the Service makes a
# new revision and the adapter rolls out; an unchanged one changes nothing.
set -euo pipefail
source "$(dirname "$0")/env.sh"
NS=knative-eventing

# 1. The images, by the digests the release YAML names, with the block
# docs/install.md gives for nodes without a registry (ctr against the
# node's containerd), unless the node has them all already.
for archive in "$ROOT"/release/images/*.tar; do
  index=$(tar -xOf "$archive" index.json)
  name=$(sed -n 's/.*"io.containerd.image.name":"\([^"]*\)".*/\1/p' <<<"$index")
  digest=$(sed -n 's/.*"digest":"\(sha256:[0-9a-f]*\)".*/\1/p' <<<"$index")
  if ! ctr --address "$CONTAINERD_SOCK" -n k8s.io image ls -q | grep -qx "${name%:*}@$digest"; then
    CTR="ctr --address $CONTAINERD_SOCK" "$SRC/docblock.sh" load-images >/dev/null
    break
  fi
done
# 2. Install.
"$SRC/docblock.sh" install
# 3. The gauges for the two HPAs: the rules' ConfigMap as Prometheus
# Adapter's configuration file. It reads the file at start only, so the
# rules' hash in its pod template rolls it out when they change.
kc apply -f "$ROOT/release/prometheus-adapter-rule.yaml" >/dev/null
rules=$(sha256sum "$ROOT/release/prometheus-adapter-rule.yaml" | cut -c1-12)
kc -n monitoring patch deployment/prometheus-adapter --type strategic -p "{\"spec\":{\"template\":{
  \"metadata\":{\"annotations\":{\"event-forwarding.knative.dev/rules\":\"$rules\"}},
  \"spec\":{\"volumes\":[{\"name\":\"config\",\"configMap\":{\"name\":\"event-forwarding-prometheus-adapter\"}}]}}}}" >/dev/null
kc -n monitoring rollout status deployment/prometheus-adapter --timeout=120s >/dev/null
kc wait --for=condition=Available apiservice/v1beta1.custom.metrics.k8s.io --timeout=60s >/dev/null
# 4. Forwarding on.
"$SRC/docblock.sh" forwarding

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
# Ready is Knative's: Traefik loads the new route a moment later and
# answers 404 until then. Wait until the proxy itself answers through the
# cluster-local entry point (its own answers carry Kn-Forward-Error).
ingress=$(kc -n traefik get svc traefik-internal -o jsonpath='{.spec.clusterIP}:{.spec.ports[0].port}')
proxy_answers() {
  curl -sS -o /dev/null -D - --max-time 5 -H "Host: event-forwarding-proxy.$NS.svc.cluster.local" "http://$ingress/" |
    grep -qi '^Kn-Forward-Error:'
}
end=$((SECONDS + 120))
until proxy_answers; do
  [ $SECONDS -lt $end ] || { echo "project: the proxy does not answer through Traefik ($ingress) after 120 s" >&2; exit 1; }
  sleep 1
done
log "event-forwarding-proxy installed from release/: $(kc -n $NS get ksvc/event-forwarding-proxy -o jsonpath='{.spec.template.spec.containers[0].image}'), adapter $(kc -n $NS get deployment/pingsource-mt-adapter -o jsonpath='{.spec.template.spec.containers[0].image}')"
