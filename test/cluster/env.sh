# shellcheck shell=bash disable=SC2034
# (sourced: the scripts that source it use its names)
# Names, paths and ranges of the one-node cluster, sourced by every script.
# Ranges stay clear of eth0 (192.0.2.0/24) and the host resolver
# (10.255.255.53, in 10.255.255.0/24).
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
C=$ROOT/.cache/cluster          # everything the cluster writes lives here
BIN=$C/bin                      # cached binaries (kept by cluster-down)
IMAGES=$C/images                # cached image archives (kept by cluster-down)
RUN=$C/run                      # state of one cluster (removed by cluster-down)
STATE=$C/state                  # what the machine looked like before (until down restores it)
LOGS=$C/logs
PKI=$RUN/pki
ETC=$RUN/etc
KUBECONFIG_FILE=$C/kubeconfig
CONTAINERD_SOCK=$C/containerd.sock
SRC=$ROOT/test/cluster

BRIDGE=kcbr0
POD_CIDR=10.244.0.0/16          # the whole range, routed to the bridge
NODE_POD_CIDR=10.244.0.0/24     # the node's share, on the bridge
NODE_IP=10.244.0.1              # the bridge's address is the node's IP
SVC_CIDR=10.96.0.0/16
API_SVC_IP=10.96.0.1
DNS_IP=10.96.0.10
API_PORT=6443
ETCD_PORT=32379                 # not etcd's default: tests on this machine run their own
ETCD_PEER_PORT=32380
NODE_NAME=kc-node
GUARD_OUT=KC-GUARD-OUT          # filter: cluster ranges leave only by the bridge or lo
GUARD_IN=KC-GUARD-IN            # raw: cluster ranges enter only from the bridge or lo
SYSCTLS="vm.overcommit_memory kernel.panic kernel.panic_on_oops net.ipv4.ip_forward net.bridge.bridge-nf-call-iptables"
# Paths kubelet, containerd and CNI write outside .cache: removed by down if
# they did not exist before up.
OUTSIDE_PATHS="/var/lib/kubelet /var/log/containers /var/log/pods /run/netns /run/containerd /var/lib/cni /usr/libexec/kubernetes /etc/cni /opt/cni /run/mount"

export KUBECONFIG=$KUBECONFIG_FILE
export PATH=$BIN:$ROOT/.cache/bin:$PATH
kc() { "$BIN/kubectl" --kubeconfig "$KUBECONFIG_FILE" "$@"; }
log() { echo "[$(date +%T)] $*" >&2; }
# retry SECONDS CMD...: CMD's output once it succeeds, polling every 0.5 s
# (kube-proxy and Traefik program a new endpoint a moment after it is Ready).
retry() {
  local end=$((SECONDS + $1)) out; shift
  until out=$("$@" 2>&1); do
    [ $SECONDS -lt $end ] || { echo "$out"; return 1; }
    sleep 0.5
  done
  echo "$out"
}
# small_requests: a YAML stream with every container's CPU request set to
# 20m and HorizontalPodAutoscalers capped at one replica. Knative's control
# plane requests about a core in all, which on this 2-core node would leave
# room for three proxy pods; scheduling is all a request changes here (the
# limits stay), and one node needs one activator.
small_requests() {
  awk '/^---/ || /^kind:/ { req = 0 }
    /^ *requests:/ { req = 1 } /^ *limits:/ { req = 0 }
    req && /^ *cpu:/ { sub(/cpu:.*/, "cpu: 20m") }
    /^ *maxReplicas:/ { sub(/maxReplicas:.*/, "maxReplicas: 1") }
    { print }'
}
