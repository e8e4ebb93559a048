#!/usr/bin/env bash
# Tears the cluster down and puts the machine back as cluster-up found it:
# processes, container processes, mounts, netns, cgroups, iptables chains
# (ours, kubelet's and kube-proxy's), routes, the bridge, sysctls and the
# paths made outside .cache. It relies on little: a cluster whose processes
# were killed (no clean stop) is cleared the same way. cluster-up runs it
# first when it finds such leftovers. The caches $BIN and $IMAGES stay.
set -euo pipefail
source "$(dirname "$0")/env.sh"

# alive PID: the process exists and is not a zombie.
alive() { [ -e "/proc/$1" ] && ! grep -q '^State:.*Z' "/proc/$1/status" 2>/dev/null; }
# stop PID...: SIGTERM, up to 10 s, then SIGKILL.
stop() {
  local p
  for p in "$@"; do kill -TERM "$p" 2>/dev/null || true; done
  for _ in $(seq 50); do
    for p in "$@"; do alive "$p" && break; p=; done
    [ -z "${p:-}" ] && return 0
    sleep 0.2
  done
  for p in "$@"; do kill -KILL "$p" 2>/dev/null || true; done
}
# ours: processes whose command line names this cluster's run directory or
# containerd socket (the control plane, containerd, its shims; not a build
# writing to $BIN), never this script's ancestors.
ours() {
  local f p=$$ self=" $$ "
  while [ "$p" -gt 1 ]; do p=$(awk '/^PPid:/ {print $2}' "/proc/$p/status"); self+="$p "; done
  while read -r f; do
    p=${f#/proc/}; p=${p%/cmdline}
    [[ $self == *" $p "* ]] || echo "$p"
  done < <(grep -laE -- "$RUN/|$CONTAINERD_SOCK" /proc/[0-9]*/cmdline 2>/dev/null)
  return 0
}
# Pods' processes, by their cgroups.
pod_pids() { { cat /sys/fs/cgroup/*/kubepods/cgroup.procs /sys/fs/cgroup/*/kubepods/**/cgroup.procs 2>/dev/null || true; } | sort -u; }
shopt -s globstar nullglob

log "stopping processes"
# All at once: each may take seconds to exit, and nothing here needs
# another to be still running while it stops.
cp=()
for n in kubelet kube-proxy kube-scheduler kube-controller-manager kube-apiserver etcd; do
  if [ -f "$RUN/pids/$n" ]; then cp+=("$(cat "$RUN/pids/$n")"); fi
done
[ ${#cp[@]} -eq 0 ] || stop "${cp[@]}"
mapfile -t pids < <(pod_pids); [ ${#pids[@]} -eq 0 ] || kill -KILL "${pids[@]}" 2>/dev/null || true
mapfile -t pids < <(ours); [ ${#pids[@]} -eq 0 ] || stop "${pids[@]}"
sleep 0.5
mapfile -t pids < <(pod_pids); [ ${#pids[@]} -eq 0 ] || { kill -KILL "${pids[@]}" 2>/dev/null || true; sleep 1; }

log "removing netns and mounts"
for ns in $(ip netns list 2>/dev/null | awk '$1 ~ /^cni-/ {print $1}'); do ip netns delete "$ns" || true; done
# Mount points under the cluster's directory, deepest first (repeat for stacks).
for _ in 1 2 3 4 5; do
  mps=$(awk -v c="$C/" 'index($5, c) == 1 {print $5}' /proc/self/mountinfo | awk '{print length, $0}' | sort -rn | cut -d' ' -f2-)
  [ -z "$mps" ] && break
  for m in $mps; do m=$(printf '%b' "$m"); umount "$m" 2>/dev/null || umount -l "$m" || true; done
done

log "removing cgroups"
for d in /sys/fs/cgroup/*/kubepods; do find "$d" -depth -type d -exec rmdir {} + 2>/dev/null || true; done
if [ -f "$STATE/cgroups" ]; then
  for d in /sys/fs/cgroup/*/*/; do
    d=${d%/}
    grep -qxF "$d" "$STATE/cgroups" || find "$d" -depth -type d -exec rmdir {} + 2>/dev/null || true
  done
fi

log "removing iptables rules and chains"
# unchain CMD: remove the chains KUBE-*, KC-* and CNI-* (kube-proxy's,
# kubelet's KUBE-FIREWALL and canaries, the guard's, CNI's) and every jump
# to them. Each table is saved, filtered and restored whole: one call per
# table, where deleting rule by rule takes a minute after the scenarios
# (thousands of kube-proxy rules). Rules of others come back as they were.
unchain() {
  local t saved
  for t in filter nat mangle raw; do
    saved=$("$1-save" -t "$t" 2>/dev/null) || continue
    grep -qE '^(:|-A )(KUBE-|KC-|CNI-)|-[jg] (KUBE-|KC-|CNI-)' <<<"$saved" || continue
    grep -Ev '^(:|-A )(KUBE-|KC-|CNI-)|-[jg] (KUBE-|KC-|CNI-)' <<<"$saved" | "$1-restore" -T "$t"
  done
}
unchain iptables
unchain ip6tables
# iptables-nft leaves empty tables behind; drop the ones that were not there
# before (and hold nothing), so the ruleset is as it was.
if command -v nft >/dev/null && [ -f "$STATE/nft-tables" ]; then
  nft list tables | while read -r _ fam name; do
    grep -qx "table $fam $name" "$STATE/nft-tables" && continue
    body=$(nft list table "$fam" "$name")
    # Only the table, its base chains and their policies: no rule left.
    if ! grep -Ev '^\s*(table .*\{|chain .*\{|type .*;|\}|)$' <<<"$body" | grep -q .; then
      nft delete table "$fam" "$name"
    fi
  done
fi

log "removing routes and the bridge"
for net in "$POD_CIDR" "$SVC_CIDR"; do ip route del "$net" 2>/dev/null || true; done
if ip link show "$BRIDGE" >/dev/null 2>&1; then ip link del "$BRIDGE"; fi
for l in $(ip -o link show type veth 2>/dev/null | awk -F'[ @:]+' -v b="$BRIDGE" '$0 ~ "master " b {print $2}'); do ip link del "$l" || true; done

if [ -f "$STATE/sysctl" ]; then
  log "restoring sysctls"
  while read -r k _ v; do sysctl -qw "$k=$v"; done <"$STATE/sysctl"
fi
if [ -f "$STATE/paths-created" ]; then
  log "removing paths made outside .cache"
  while read -r p; do rm -rf "$p"; done <"$STATE/paths-created"
fi
rm -rf "$RUN" "$LOGS" "$STATE" "$KUBECONFIG_FILE" "$CONTAINERD_SOCK" "$CONTAINERD_SOCK.ttrpc"
log "cluster down"
