#!/usr/bin/env bash
# Writes the configuration of containerd, CNI, kubelet, kube-proxy and
# CoreDNS under $ETC (same inputs, same files: a rerun changes nothing).
set -euo pipefail
source "$(dirname "$0")/env.sh"
mkdir -p "$ETC/cni" "$ETC/certs.d"

# Pods' resolv.conf names only the cluster DNS (kubelet's resolvConf; pods
# with dnsPolicy ClusterFirst get the same server plus the search list).
echo "nameserver $DNS_IP" >"$ETC/resolv.conf"

cat >"$ETC/containerd.toml" <<TOML
version = 2
root = "$RUN/containerd/root"
state = "$RUN/containerd/state"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper"]
[grpc]
  address = "$CONTAINERD_SOCK"
[metrics]
  address = ""
[plugins."io.containerd.internal.v1.opt"]
  path = "$RUN/containerd/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "dev.local/pause:v1"
  # runc cannot write oom_score_adj without CAP_SYS_RESOURCE.
  restrict_oom_score_adj = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = "$RUN/containerd/runc"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$ETC/cni"
  # A pull never leaves the machine: the registries images could name point
  # at a closed local port, so a missing image fails at once.
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = "$ETC/certs.d"
TOML
for r in dev.local docker.io registry.k8s.io gcr.io ghcr.io quay.io; do
  mkdir -p "$ETC/certs.d/$r"
  printf 'server = "http://127.0.0.1:9"\n[host."http://127.0.0.1:9"]\n  capabilities = ["pull", "resolve"]\n' >"$ETC/certs.d/$r/hosts.toml"
done

cat >"$ETC/cni/10-kc.conflist" <<JSON
{
  "cniVersion": "1.0.0",
  "name": "kc",
  "plugins": [{
    "type": "bridge", "bridge": "$BRIDGE", "isGateway": true, "ipMasq": false, "hairpinMode": true,
    "ipam": {
      "type": "host-local", "dataDir": "$RUN/cni/ipam",
      "ranges": [[{"subnet": "$NODE_POD_CIDR", "gateway": "$NODE_IP"}]],
      "routes": [{"dst": "0.0.0.0/0"}]
    }
  }]
}
JSON

cat >"$ETC/kubelet.yaml" <<YAML
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $NODE_IP
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $PKI/ca.crt}
authorization: {mode: Webhook}
containerRuntimeEndpoint: unix://$CONTAINERD_SOCK
cgroupDriver: cgroupfs
failCgroupV1: false
failSwapOn: false
clusterDNS: [$DNS_IP]
clusterDomain: cluster.local
resolvConf: $ETC/resolv.conf
volumePluginDir: $RUN/kubelet-plugins
podLogsDir: $RUN/pod-logs
serializeImagePulls: false
# The disk is shared with builds: evict only when it is really full.
evictionHard: {memory.available: 200Mi, nodefs.available: 2%, imagefs.available: 2%}
imageGCHighThresholdPercent: 100
YAML

cat >"$ETC/kube-proxy.yaml" <<YAML
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: $KUBECONFIG_FILE}
mode: iptables
hostnameOverride: $NODE_NAME
clusterCIDR: $POD_CIDR
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
# NodePorts answer on the bridge's address only, never on eth0.
nodePortAddresses: [$NODE_IP/32]
iptables: {localhostNodePorts: false}
# 0: leave the kernel's conntrack settings alone.
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
YAML

# CoreDNS answers cluster.local (and reverse zones) from the API and has no
# forwarder: every other name is REFUSED at once, so nothing is asked outside.
cat >"$ETC/Corefile" <<COREFILE
cluster.local:1053 in-addr.arpa:1053 ip6.arpa:1053 {
    errors
    health :8080
    ready :8181
    kubernetes cluster.local in-addr.arpa ip6.arpa {
        pods insecure
        ttl 30
    }
    cache 30
}
.:1053 {
    errors
    acl {
        block
    }
}
COREFILE
