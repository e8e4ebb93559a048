#!/bin/sh
# What event-forwarding-proxy needs from the cluster, checked before the
# install changes anything (docs/install.md, section 2). It only reads:
#
#   sh release/preflight.sh [async|async-kpa|sync] [kubectl|operator]
#
# The profile (async, the default, async-kpa or sync) and how Eventing is managed
# (kubectl, the default: applied from its YAML, or operator: a
# KnativeEventing of the Knative Operator). Each missing part is listed
# with the command that fixes it, and the script exits 1; it exits 0 when
# the install can go ahead. EVENTING_NAMESPACE and SERVING_NAMESPACE name
# other system namespaces than Knative's defaults.
set -eu

profile=${1:-async}
manager=${2:-kubectl}
eventing_ns=${EVENTING_NAMESPACE:-knative-eventing}
serving_ns=${SERVING_NAMESPACE:-knative-serving}
# The Knative minors this release is tested with (docs/install.md, "What
# the tests run it on").
tested_minors="1.22 1.23"

case $profile in async | async-kpa | sync) ;; *) echo "preflight: profile $profile: want async, async-kpa or sync" >&2; exit 2 ;; esac
case $manager in kubectl | operator) ;; *) echo "preflight: $manager: want kubectl or operator" >&2; exit 2 ;; esac

missing=0
ok() { printf '  ok       %s\n' "$1"; }
info() { printf '  note     %s\n' "$1"; }
# lacks WHAT FIX: one missing part and the command that fixes it.
lacks() {
  printf '  MISSING  %s\n           fix: %s\n' "$1" "$2"
  missing=$((missing + 1))
}
# get ARGS...: kubectl get's output, empty if the object or its kind is
# not there (what it may read is checked first: see readable).
get() { kubectl get "$@" 2>/dev/null || true; }
# can VERB ARGS...: whether kubectl auth can-i says yes.
can() { [ "$(kubectl auth can-i "$@" 2>/dev/null || true)" = yes ]; }
# minor VERSION: 1.23 of 1.23.0 (or of v1.23.0); empty if VERSION is not one.
minor() { printf '%s\n' "${1#v}" | sed -n 's/^\([0-9][0-9]*\.[0-9][0-9]*\)\.[0-9].*/\1/p'; }
# older A B: whether minor A is older than minor B.
older() { [ "${1%%.*}" -lt "${2%%.*}" ] || { [ "${1%%.*}" -eq "${2%%.*}" ] && [ "${1#*.}" -lt "${2#*.}" ]; }; }

echo "preflight: the $profile profile, Eventing managed with $manager"

# The API server, then what the checks below read: without either, an
# absent object could not be told from one out of sight.
reached=$(kubectl get namespace "$eventing_ns" -o name 2>&1) || true
case $reached in
  namespace/*) ;;
  *NotFound*) lacks "Knative Eventing's namespace $eventing_ns" "install Knative Eventing, or set EVENTING_NAMESPACE to its namespace" ;;
  *Forbidden*) lacks "permission to get namespace $eventing_ns" "run the preflight as the one who installs (a cluster administrator)" ;;
  *) lacks "the API server: $reached" "point kubectl at the cluster (KUBECONFIG, --context)" ;;
esac
case $reached in
  namespace/* | *Forbidden*)
    for read in "get deployments -n $eventing_ns" "get deployments -n $serving_ns" "get configmaps -n $eventing_ns" \
      "get customresourcedefinitions" "get apiservices" "get knativeeventings.operator.knative.dev -n $eventing_ns"; do
      # shellcheck disable=SC2086 # the words of one question
      can $read || lacks "permission to $read" "run the preflight as the one who installs (a cluster administrator)"
    done
    ;;
esac
if [ "$missing" -gt 0 ]; then
  echo "preflight: $missing missing; nothing was changed"
  exit 1
fi

# Eventing, by the version label its release puts on its controller.
version=$(get -n "$eventing_ns" deployment eventing-controller -o "jsonpath={.metadata.labels['app\.kubernetes\.io/version']}")
if [ -z "$(get -n "$eventing_ns" deployment eventing-controller -o name)" ]; then
  lacks "Knative Eventing's controller ($eventing_ns/eventing-controller)" "install Knative Eventing's core (eventing-core.yaml of its release)"
else
  m=$(minor "$version")
  oldest=${tested_minors%% *}
  newest=${tested_minors##* }
  if [ -z "$m" ]; then
    info "Knative Eventing of version \"$version\": this release is tested with $tested_minors"
  elif older "$m" "$oldest"; then
    lacks "Knative Eventing $version, older than $oldest" "upgrade Knative Eventing to $newest first"
  elif older "$newest" "$m"; then
    info "Knative Eventing $version, newer than the $newest this release is tested with"
  else
    ok "Knative Eventing $version"
  fi
fi
if [ -n "$(get -n "$eventing_ns" deployment pingsource-mt-adapter -o name)" ]; then
  ok "the PingSource adapter's Deployment ($eventing_ns/pingsource-mt-adapter)"
else
  lacks "the PingSource adapter's Deployment ($eventing_ns/pingsource-mt-adapter)" "install Knative Eventing's core (eventing-core.yaml), which holds it"
fi

# Who manages Eventing: a KnativeEventing undoes a patch of the Deployment.
managed=$(get knativeeventings.operator.knative.dev -n "$eventing_ns" -o name)
if [ "$manager" = kubectl ] && [ -n "$managed" ]; then
  lacks "Eventing applied with kubectl: the Knative Operator manages it ($managed) and would undo the Deployment's patch" \
    "sh release/preflight.sh $profile operator, then the Operator block of docs/install.md"
elif [ "$manager" = operator ] && [ -z "$managed" ]; then
  lacks "a KnativeEventing in $eventing_ns for the Knative Operator block" \
    "sh release/preflight.sh $profile kubectl, then the kubectl block of docs/install.md"
else
  ok "Eventing managed with $manager"
fi

# Serving: the Service kind, and for the async profile its HPA class. The
# other two scale with Knative's own autoscaler, part of every Serving.
serving_version=$(get -n "$serving_ns" deployment controller -o "jsonpath={.metadata.labels['app\.kubernetes\.io/version']}")
if [ -n "$(get crd services.serving.knative.dev -o name)" ]; then
  ok "Knative Serving${serving_version:+ $serving_version}"
else
  lacks "Knative Serving (services.serving.knative.dev)" "install Knative Serving (serving-crds.yaml and serving-core.yaml of its release)"
fi
if [ "$profile" = async ]; then
  ready=$(get -n "$serving_ns" deployment autoscaler-hpa -o "jsonpath={.status.readyReplicas}")
  if [ "${ready:-0}" -gt 0 ]; then
    ok "Serving's HPA autoscaler ($serving_ns/autoscaler-hpa)"
  else
    release=knative-v${serving_version#v}
    case $(minor "$serving_version") in "") release="knative-<your Serving version>" ;; esac
    lacks "Serving's HPA autoscaler ($serving_ns/autoscaler-hpa, no ready replica): the async profile's Service has the HPA class" \
      "kubectl apply -f https://github.com/knative/serving/releases/download/$release/serving-hpa.yaml"
  fi
  available=$(get apiservice v1beta1.custom.metrics.k8s.io -o 'jsonpath={.status.conditions[?(@.type=="Available")].status}')
  if [ "$available" = True ]; then
    ok "the custom metrics API (v1beta1.custom.metrics.k8s.io)"
  else
    lacks "the custom metrics API (v1beta1.custom.metrics.k8s.io${available:+, Available $available}): both HPAs of the async profile read it" \
      "install Prometheus Adapter with release/prometheus-adapter-rule.yaml (docs/install.md, section 3), or use the async-kpa profile"
  fi
fi

# Eventing's OIDC only changes what the sinks see: noted, never refused.
oidc=$(get -n "$eventing_ns" configmap config-features -o "jsonpath={.data['authentication-oidc']}")
info "Eventing's OIDC (config-features authentication-oidc): ${oidc:-disabled}"

# What the install creates and changes, as the one who runs it.
before=$missing
for kind in serviceaccounts configmaps roles.rbac.authorization.k8s.io rolebindings.rbac.authorization.k8s.io \
  poddisruptionbudgets.policy services.serving.knative.dev horizontalpodautoscalers.autoscaling; do
  can create "$kind" -n "$eventing_ns" || lacks "permission to create $kind in $eventing_ns" "run the install as a cluster administrator"
done
can create clusterrolebindings.rbac.authorization.k8s.io ||
  lacks "permission to create clusterrolebindings" "run the install as a cluster administrator"
if [ "$manager" = kubectl ]; then
  can patch deployments.apps/pingsource-mt-adapter -n "$eventing_ns" ||
    lacks "permission to patch deployment pingsource-mt-adapter in $eventing_ns" "run the install as a cluster administrator"
else
  can patch knativeeventings.operator.knative.dev -n "$eventing_ns" ||
    lacks "permission to patch knativeeventings in $eventing_ns" "run the install as a cluster administrator"
fi
[ "$missing" -gt "$before" ] || ok "permission to create and patch what the install does"

if [ "$missing" -gt 0 ]; then
  echo "preflight: $missing missing; nothing was changed"
  exit 1
fi
echo "preflight: ready to install"
