#!/usr/bin/env bash
# Checks the egress guard; cluster-up runs it before any cluster address is
# used (and again once everything runs) and fails if any part is missing.
set -euo pipefail
source "$(dirname "$0")/env.sh"

fail() { echo "verify-guard: $*" >&2; exit 1; }

# The bridge carries the node's address and is up.
ip -br addr show dev "$BRIDGE" | grep -qw "$NODE_IP/${NODE_POD_CIDR#*/}" || fail "$BRIDGE lacks $NODE_IP"
ip link show "$BRIDGE" | grep -q '<.*UP.*>' || fail "$BRIDGE is down"

# Both ranges route to the bridge (far ends of each range checked).
for a in 10.244.0.2 10.244.255.254 10.96.0.1 "$DNS_IP" 10.96.255.254; do
  ip route get "$a" | grep -q "dev $BRIDGE" || fail "$a does not route to $BRIDGE: $(ip route get "$a")"
done
ip route show exact "$SVC_CIDR" | grep -q "dev $BRIDGE" || fail "no route $SVC_CIDR dev $BRIDGE"
ip route show exact "$POD_CIDR" | grep -q "dev $BRIDGE" || fail "no route $POD_CIDR dev $BRIDGE"
# The host resolver still goes its own way (the guard does not cover it).
ip route get 10.255.255.53 | grep -vq "dev $BRIDGE" || fail "host resolver routed to $BRIDGE"

# The iptables guard: first in its hook, with exactly the expected rules.
expect_chain() { # TABLE HOOK CHAIN DIR(o|i)
  local want got
  [ "$(iptables -t "$1" -S "$2" | sed -n 2p)" = "-A $2 -j $3" ] || fail "$3 is not first in $1 $2"
  want="-N $3
-A $3 -$4 $BRIDGE -j RETURN
-A $3 -$4 lo -j RETURN
-A $3 -d $POD_CIDR -j DROP
-A $3 -s $POD_CIDR -j DROP
-A $3 -d $SVC_CIDR -j DROP
-A $3 -s $SVC_CIDR -j DROP"
  got=$(iptables -t "$1" -S "$3") || fail "no chain $3 in $1"
  [ "$got" = "$want" ] || fail "$1 $3 is
$got
want
$want"
}
expect_chain mangle POSTROUTING "$GUARD_OUT" o
expect_chain raw PREROUTING "$GUARD_IN" i
for a in 10.255.255.53 192.0.2.1; do
  case $a in 10.244.*|10.96.*) fail "guard range covers $a";; esac
done

# DNS: pods get only the cluster DNS; CoreDNS forwards nothing.
if [ "$(grep -v '^#' "$ETC/resolv.conf" | grep -c nameserver)" != 1 ] || ! grep -qx "nameserver $DNS_IP" "$ETC/resolv.conf"; then
  fail "$ETC/resolv.conf names more than $DNS_IP"
fi
! grep -Eq '^\s*(forward|proxy|grpc)\b' "$ETC/Corefile" || fail "Corefile forwards"

# Running processes carry the flags the guard relies on.
args() { tr '\0' ' ' <"/proc/$(cat "$RUN/pids/$1")/cmdline" 2>/dev/null; }
if [ -f "$RUN/pids/kube-apiserver" ] && a=$(args kube-apiserver); then
  [[ $a == *"--kubelet-preferred-address-types=InternalIP "* ]] || fail "kube-apiserver may resolve node names"
fi
if [ -f "$RUN/pids/kubelet" ] && a=$(args kubelet); then
  [[ $a == *"--node-ip=$NODE_IP "* ]] || fail "kubelet's node IP is not $NODE_IP"
  grep -q "^resolvConf: $ETC/resolv.conf$" "$ETC/kubelet.yaml" || fail "kubelet does not use $ETC/resolv.conf"
fi
echo "verify-guard: ok"
