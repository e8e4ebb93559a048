#!/usr/bin/env bash
# Brings the one-node cluster up (binaries and image archives are built by
# cluster.mk first). A running, healthy cluster is left as it is; anything
# else (a cluster killed without cluster-down) is cleared by down.sh first.
set -euo pipefail
source "$(dirname "$0")/env.sh"
alive() { [ -e "/proc/$1" ] && ! grep -q '^State:.*Z' "/proc/$1/status" 2>/dev/null; }
PROCS="containerd etcd kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy"

healthy() {
  local n
  for n in $PROCS; do
    [ -f "$RUN/pids/$n" ] && alive "$(cat "$RUN/pids/$n")" || return 1
  done
  kc get --raw /readyz >/dev/null 2>&1
}
# wait_for DESC SECONDS CMD...: poll CMD every 0.5 s.
wait_for() {
  local desc=$1 end=$((SECONDS + $2)); shift 2
  until "$@" >/dev/null 2>&1; do
    [ $SECONDS -lt $end ] || { log "timed out waiting for $desc"; return 1; }
    sleep 0.5
  done
}
# start NAME CMD...: run CMD in its own session, logging to $LOGS/NAME.log,
# unless it already runs.
start() {
  local n=$1; shift
  if [ -f "$RUN/pids/$n" ] && alive "$(cat "$RUN/pids/$n")"; then return 0; fi
  mkdir -p "$RUN/pids" "$LOGS"
  log "starting $n"
  setsid "$@" >>"$LOGS/$n.log" 2>&1 </dev/null &
  echo $! >"$RUN/pids/$n"
}

if healthy; then
  "$SRC/verify-guard.sh"
  log "cluster already up"
  exit 0
fi
"$SRC/down.sh"

# What the machine looks like before: down.sh puts it back.
mkdir -p "$STATE"
read -ra sysctls <<<"$SYSCTLS"
sysctl "${sysctls[@]}" >"$STATE/sysctl"
for p in $OUTSIDE_PATHS; do [ -e "$p" ] || echo "$p"; done >"$STATE/paths-created"
printf '%s\n' /sys/fs/cgroup/*/*/ | sed 's,/$,,' >"$STATE/cgroups"
if command -v nft >/dev/null; then nft list tables >"$STATE/nft-tables"; fi

"$SRC/certs.sh"
"$SRC/config.sh"
"$SRC/guard.sh"
"$SRC/verify-guard.sh"   # before any cluster address is used

mkdir -p "$RUN/containerd"
start containerd containerd --config "$ETC/containerd.toml"
wait_for containerd 30 ctr --address "$CONTAINERD_SOCK" version
# The images are imported, two at a time, while the control plane starts:
# the kubelet, started after, is the first to need them.
printf '%s\0' "$IMAGES"/*.tar |
  xargs -0 -P 2 -I{} ctr --address "$CONTAINERD_SOCK" -n k8s.io image import --no-unpack=false {} >/dev/null &
importing=$!

start etcd etcd --name kc --data-dir "$RUN/etcd" --unsafe-no-fsync \
  --listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
  --listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
  --initial-cluster "kc=http://127.0.0.1:$ETCD_PEER_PORT"

# The issuer is the in-cluster name of the API server, so pods (the proxy
# verifying Eventing's OIDC tokens) can fetch its discovery document.
start kube-apiserver kube-apiserver \
  --etcd-servers "http://127.0.0.1:$ETCD_PORT" \
  --bind-address "$NODE_IP" --advertise-address "$NODE_IP" --secure-port "$API_PORT" \
  --service-cluster-ip-range "$SVC_CIDR" --allow-privileged=true \
  --authorization-mode Node,RBAC --client-ca-file "$PKI/ca.crt" \
  --tls-cert-file "$PKI/apiserver.crt" --tls-private-key-file "$PKI/apiserver.key" \
  --kubelet-client-certificate "$PKI/admin.crt" --kubelet-client-key "$PKI/admin.key" \
  --kubelet-preferred-address-types=InternalIP \
  --service-account-issuer https://kubernetes.default.svc.cluster.local \
  --service-account-key-file "$PKI/sa.pub" --service-account-signing-key-file "$PKI/sa.key" \
  --requestheader-client-ca-file "$PKI/ca.crt" --requestheader-allowed-names front-proxy-client \
  --requestheader-username-headers X-Remote-User --requestheader-group-headers X-Remote-Group \
  --requestheader-extra-headers-prefix X-Remote-Extra- \
  --proxy-client-cert-file "$PKI/front-proxy.crt" --proxy-client-key-file "$PKI/front-proxy.key" \
  --enable-aggregator-routing=true
wait_for kube-apiserver 120 kc get --raw /readyz

start kube-controller-manager kube-controller-manager --kubeconfig "$KUBECONFIG_FILE" \
  --bind-address 127.0.0.1 --leader-elect=false --use-service-account-credentials \
  --service-account-private-key-file "$PKI/sa.key" --root-ca-file "$PKI/ca.crt" \
  --cluster-signing-cert-file "$PKI/ca.crt" --cluster-signing-key-file "$PKI/ca.key" \
  --service-cluster-ip-range "$SVC_CIDR" --cluster-cidr "$POD_CIDR" --allocate-node-cidrs --node-cidr-mask-size 24
start kube-scheduler kube-scheduler --kubeconfig "$KUBECONFIG_FILE" --bind-address 127.0.0.1 --leader-elect=false
wait "$importing" || { log "importing the images of $IMAGES failed"; exit 1; }
log "images imported: $(cd "$IMAGES" && printf '%s ' *)"

mkdir -p "$RUN/kubelet"
start kubelet kubelet --config "$ETC/kubelet.yaml" --kubeconfig "$KUBECONFIG_FILE" \
  --root-dir "$RUN/kubelet" --cert-dir "$RUN/kubelet-pki" \
  --node-ip="$NODE_IP" --hostname-override "$NODE_NAME"
start kube-proxy kube-proxy --config "$ETC/kube-proxy.yaml"

wait_for "node $NODE_NAME" 120 kc wait --for=condition=Ready "node/$NODE_NAME" --timeout=2s
log "node Ready"

kc -n kube-system create configmap coredns --from-file=Corefile="$ETC/Corefile" --dry-run=client -o yaml | kc apply -f - >/dev/null
# shellcheck disable=SC2016,SC2034,SC2269 # variables for envsubst, and its list of names unexpanded
COREFILE_HASH=$(sha256sum "$ETC/Corefile" | cut -c1-16) COREDNS_VERSION=$(cat "$BIN/coredns.version") DNS_IP=$DNS_IP \
  envsubst '${COREFILE_HASH} ${COREDNS_VERSION} ${DNS_IP}' <"$SRC/manifests/coredns.yaml" | kc apply -f - >/dev/null
kc -n kube-system rollout status deploy/coredns --timeout=120s >/dev/null
log "CoreDNS Ready at $DNS_IP"

"$SRC/verify-guard.sh"   # again, with every process running
log "cluster up; KUBECONFIG=$KUBECONFIG_FILE"
