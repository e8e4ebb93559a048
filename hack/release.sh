#!/usr/bin/env bash
# Builds the release (make release): the two images as OCI archives, and
# per profile one YAML with them by digest, from config/. Nothing is
# pushed; docs/install.md says how.
#
#   RELEASE_VERSION   vX.Y.Z, described in CHANGELOG.md (default: git describe)
#   RELEASE_REGISTRY  where the images will live (default dev.local, the test cluster's)
#   RELEASE_DIR       output folder (default release)
#   RELEASE_PLATFORMS os/arch list (default linux/amd64,linux/arm64)
#   IMGTAR            the image-archive writer (hack/imgtar), built by make
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
REGISTRY=${RELEASE_REGISTRY:-dev.local}
OUT=${RELEASE_DIR:-$ROOT/release}
PLATFORMS=${RELEASE_PLATFORMS:-linux/amd64,linux/arm64}
IMGTAR=${IMGTAR:?the path of hack/imgtar built}
# The binaries, in a folder of this run's own: two builds at once (make
# test's cluster lane and TestRelease) never pack each other's.
BUILD=$(mktemp -d)
trap 'rm -rf "$BUILD"' EXIT
# RELEASE_VERSION (vX.Y.Z) names a release, which CHANGELOG.md must
# describe under its own heading; without it, the tree's version ("dev"
# outside a git checkout).
VERSION=${RELEASE_VERSION:-}
if [ -n "$VERSION" ]; then
  [[ $VERSION =~ ^v[0-9]+\.[0-9]+\.[0-9]+$ ]] || { echo "release: VERSION=$VERSION is not vX.Y.Z" >&2; exit 1; }
  grep -qx "## $VERSION" "$ROOT/CHANGELOG.md" || { echo "release: CHANGELOG.md has no section ## $VERSION" >&2; exit 1; }
else
  VERSION=$(git -C "$ROOT" describe --tags --always --dirty 2>/dev/null || echo dev)
fi
MODULE=knative.dev/event-forwarding-proxy
mkdir -p "$OUT/images"
rm -f "$OUT"/*.yaml "$OUT"/preflight.sh "$OUT"/images/*.tar "$OUT"/images/*.json "$OUT/SHA256SUMS"

# image CMD [-env K=V]...: builds cmd/CMD for every platform and its OCI
# archive, with the image config's environment given, and the image's
# CycloneDX bill of materials (from the binaries' build info); prints the
# image by digest.
image() {
  local cmd=$1 name=event-forwarding-$1 platform digest
  shift
  for platform in ${PLATFORMS//,/ }; do
    (cd "$ROOT" && CGO_ENABLED=0 GOOS=${platform%/*} GOARCH=${platform#*/} \
      go build -trimpath -ldflags '-s -w' -o "$BUILD/$name-${platform#*/}" "./cmd/$cmd")
  done
  digest=$("$IMGTAR" -format oci -platforms "$PLATFORMS" -o "$OUT/images/$name.tar" -sbom "$OUT/images/$name.sbom.cdx.json" \
    -name "$REGISTRY/$name:$VERSION" -entrypoint "/$cmd" "$@" "$BUILD/$name-{arch}=/$cmd")
  echo "$REGISTRY/$name@$digest"
}
PROXY_IMAGE=$(image proxy)
# The adapter's image carries what it needs before its ConfigMap is read,
# since the Deployment's env is upstream's controller's: the Go runtime's
# GODEBUG (read at start-up only; see config/memory.go) and the system
# namespace until the controller sets it (a linked package of Eventing's
# sets an unset SYSTEM_NAMESPACE to knative-testing).
MTPING_IMAGE=$(image mtping -env GODEBUG=adaptivestackstart=0 -env SYSTEM_NAMESPACE=knative-eventing)

# profile NAME FILE...: one YAML of the files, images resolved, each
# object labelled with the release's version beside the project's name,
# quoted: a label is a string, and a hash of digits alone reads as a number.
profile() {
  local name=$1 f
  shift
  {
    cat <<HEADER
# event-forwarding-proxy $VERSION, $name profile (make release, from config/).
# Install: kubectl apply -f this file, then patch Knative Eventing's
# pingsource-mt-adapter Deployment with pingsource-mt-adapter-patch.yaml,
# or the KnativeEventing with knativeeventing-patch.yaml (docs/install.md). Uninstall after the way back, as docs/install.md says.
HEADER
    for f in "$@"; do
      echo "---"
      grep -v '^# ' "$f" | grep -v '^#$'
    done
  } | sed -e "s|ko://$MODULE/cmd/proxy|$PROXY_IMAGE|" -e "s|ko://$MODULE/cmd/mtping|$MTPING_IMAGE|" \
    -e "s|^    app.kubernetes.io/name: event-forwarding-proxy\$|&\n    app.kubernetes.io/version: \"$VERSION\"|" \
    >"$OUT/event-forwarding-proxy-$name.yaml"
}
base=()
for f in "$ROOT"/config/*.yaml; do
  [ "$(basename "$f")" = 400-proxy.yaml ] || base+=("$f")
done
profile async "${base[@]}" "$ROOT/config/400-proxy.yaml" "$ROOT/config/async/600-pingsource-adapter-hpa.yaml"
profile sync "${base[@]}" "$ROOT/config/sync/400-proxy.yaml"
profile async-kpa "${base[@]}" "$ROOT/config/async-kpa/400-proxy.yaml"
cp "$ROOT/config/async/500-prometheus-adapter.yaml" "$OUT/prometheus-adapter-rule.yaml"
# The adapter's one change to Eventing's Deployment: its image.
sed -e "s|ko://$MODULE/cmd/mtping|$MTPING_IMAGE|" -e '/^# This folder/,$d' \
  "$ROOT/config/patches/pingsource-mt-adapter.yaml" >"$OUT/pingsource-mt-adapter-patch.yaml"
# The same, for Eventing managed by the Knative Operator.
sed -e "s|ko://$MODULE/cmd/mtping|$MTPING_IMAGE|" \
  "$ROOT/config/patches/knativeeventing.yaml" >"$OUT/knativeeventing-patch.yaml"
# What the install checks first (docs/install.md): it only reads.
cp "$ROOT/config/preflight.sh" "$OUT/preflight.sh"
(cd "$OUT" && sha256sum ./*.yaml preflight.sh images/*.tar images/*.json >SHA256SUMS)
echo "release $VERSION in $OUT: $PROXY_IMAGE $MTPING_IMAGE"
