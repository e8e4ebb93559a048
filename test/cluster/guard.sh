#!/usr/bin/env bash
# The egress guard, installed before any cluster address is used: the
# cluster's bridge with the node's address, both cluster ranges routed to it
# (an un-DNATed packet for a ClusterIP stays on the bridge; `unreachable`
# would break host-to-ClusterIP), and iptables rules that let the ranges
# leave only by the bridge or lo and enter only from them. Idempotent.
set -euo pipefail
source "$(dirname "$0")/env.sh"

if ! ip link show "$BRIDGE" >/dev/null 2>&1; then
  ip link add "$BRIDGE" type bridge
fi
ip addr replace "$NODE_IP/${NODE_POD_CIDR#*/}" dev "$BRIDGE"
ip link set "$BRIDGE" up
ip route replace "$POD_CIDR" dev "$BRIDGE"
ip route replace "$SVC_CIDR" dev "$BRIDGE"

# chain TABLE NAME: create (or empty) a chain, filled below.
chain() { iptables -t "$1" -N "$2" 2>/dev/null || iptables -t "$1" -F "$2"; }
# hook TABLE BUILTIN NAME: jump to NAME first thing in BUILTIN, once.
hook() {
  while iptables -t "$1" -D "$2" -j "$3" 2>/dev/null; do :; done
  iptables -t "$1" -I "$2" 1 -j "$3"
}

# Out: anything to or from the cluster's ranges that would leave by another
# interface than the bridge or lo is dropped. mangle POSTROUTING sees every
# packet leaving (the host's and forwarded pods'), after DNAT and before
# masquerade, and neither kubelet nor kube-proxy puts rules ahead of it there
# (they insert theirs at the top of filter's chains, where ACCEPTs would
# pass packets before a guard). The host resolver 10.255.255.53 is in
# neither range.
chain mangle "$GUARD_OUT"
iptables -t mangle -A "$GUARD_OUT" -o "$BRIDGE" -j RETURN
iptables -t mangle -A "$GUARD_OUT" -o lo -j RETURN
for net in "$POD_CIDR" "$SVC_CIDR"; do
  iptables -t mangle -A "$GUARD_OUT" -d "$net" -j DROP
  iptables -t mangle -A "$GUARD_OUT" -s "$net" -j DROP
done
hook mangle POSTROUTING "$GUARD_OUT"

# In: the cluster's ranges are reached only from the bridge or lo (not eth0).
chain raw "$GUARD_IN"
iptables -t raw -A "$GUARD_IN" -i "$BRIDGE" -j RETURN
iptables -t raw -A "$GUARD_IN" -i lo -j RETURN
for net in "$POD_CIDR" "$SVC_CIDR"; do
  iptables -t raw -A "$GUARD_IN" -d "$net" -j DROP
  iptables -t raw -A "$GUARD_IN" -s "$net" -j DROP
done
hook raw PREROUTING "$GUARD_IN"
