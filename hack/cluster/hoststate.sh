#!/usr/bin/env bash
# Prints, one item a line and sorted, the host state the local cluster can
# leave behind: its processes, network namespaces, links, mounts, iptables
# chains and rules (both backends, IPv4 and IPv6, counters dropped), nftables
# tables (Istio's native nftables mode writes inet istio-proxy-*; one left in
# the host's namespace captures the host's own traffic), kubepods cgroups and
# CNI caches. `hoststate.sh` before up.sh and after down.sh must
# print the same; `hoststate.sh --ours` prints only what is the cluster's own
# and must print nothing after down.sh.
set -uo pipefail
. "$(dirname "$0")/lib.sh"

ours=0; [ "${1:-}" = --ours ] && ours=1
{
  for p in /proc/[0-9]*; do
    exe=$(readlink "$p/exe" 2>/dev/null) || continue
    case $(basename "$exe") in
      etcd|kube-apiserver|kubelet|kube-controller-manager|kube-scheduler|containerd|containerd-shim*|runc|pilot-discovery|pause)
        echo "process $(basename "$exe") pid ${p#/proc/} $(tr '\0' ' ' < "$p/cmdline" | cut -c1-120)" ;;
    esac
  done
  ip netns list 2>/dev/null | awk '{ print "netns " $1 }'
  ip -o link show | awk -F': ' '{ split($2, n, "@"); print "link " n[1] }'
  awk -v s="$STATE_DIR" '$2 ~ "^/run/netns/" || $2 ~ "^/var/run/netns/" || index($2, s) == 1 { print "mount " $2 }' /proc/self/mounts
  for save in iptables-nft-save ip6tables-nft-save iptables-legacy-save ip6tables-legacy-save; do
    command -v "$save" >/dev/null || continue
    $save 2>/dev/null | awk -v b="$save" '
      /^\*/ { t = substr($0, 2) }
      /^:/ { c = substr($1, 2); if (c !~ /^(PREROUTING|INPUT|FORWARD|OUTPUT|POSTROUTING)$/) print "chain " b " " t " " c }
      /^-A / { print "rule " b " " t " " $0 }'
  done
  if command -v nft >/dev/null; then nft list tables 2>/dev/null | sed 's/^table /nft-table /'; fi
  find /sys/fs/cgroup -maxdepth 2 -name kubepods -type d 2>/dev/null | sed 's/^/cgroup /'
  ls /var/lib/cni/results 2>/dev/null | sed 's/^/cni-result /'
  if [ -d "/var/lib/cni/networks/$CNI_NETWORK" ]; then echo "cni-ipam $CNI_NETWORK"; fi
  if [ -d "$RUN_DIR" ]; then echo "state $RUN_DIR"; fi
} | sort | if [ $ours = 1 ]; then
  grep -E "^process |^nft-table inet istio-proxy-|^link $BRIDGE\$|^mount |^chain .* KUBE-|^rule .* KUBE-|^cgroup |^cni-result ($CNI_NETWORK|cni-loopback)-|^cni-ipam |^state |^netns cni-" | grep -v "^mount /run/netns/[^c]" || true
else cat; fi
