#!/usr/bin/env bash
# The Knative Operator, from its module's own config/ (the namespace, both
# CRDs, the operator's RBAC, its Deployment and ConfigMaps) with the image
# cluster.mk built, at 0 replicas: the Operator flavour's scenario
# (e2e/operator_test.go) starts it, hands Eventing to it with a
# KnativeEventing, and stops it again, so that the other scenarios, and
# the next run's, find Eventing as kubectl applied it. The Operator's
# webhook is not installed: it serves only conversions between CRD
# versions, and both CRDs have one version. Idempotent.
set -euo pipefail
source "$(dirname "$0")/env.sh"
V=$(cat "$BIN/operator.version")
CONFIG=$(cd "$SRC/operator" && go list -m -f '{{.Dir}}' knative.dev/operator)/config
files=("$CONFIG/000-namespace.yaml" "$CONFIG"/crd/bases/*.yaml)
# The Operator's RBAC as its release has it: the aggregated roles, which
# gather Eventing's own so that the Operator may grant them, bound to its
# account (config/rbac's kustomization binds them to a placeholder). Not
# the webhook's.
for f in service_account role role_binding clusterrole_aggregated clusterrole_aggregated_binding; do
  files+=("$CONFIG/rbac/$f.yaml")
done
files+=("$CONFIG"/manager/{operator,config-logging-configmap,config-observability-configmap}.yaml)
for f in "${files[@]}"; do echo "---"; cat "$f"; done |
  sed -e "s|ko://knative.dev/operator/cmd/operator|dev.local/operator:$V|" -e 's|^  replicas: 1$|  replicas: 0|' | small_requests |
  kc -n knative-operator apply -f - >/dev/null
kc -n knative-operator rollout status deploy/knative-operator --timeout=180s >/dev/null
log "Knative Operator $V installed, stopped"
