#!/usr/bin/env bash
# Stops the local cluster and removes what it made on this machine: the
# processes up.sh recorded (checked to still be the binaries it started, so a
# reused PID is never killed), the containers and their shims, the pods'
# network namespaces, veths and bridge (with the node's address), mounts
# under the state dir, the kubelet's iptables chains, kubepods cgroups, CNI
# caches and the cluster's runtime data. It works on a cluster that is up, and
# on the leftovers of one that was killed half way. PKI, images and built
# binaries are kept, so the next up.sh is quick.
set -uo pipefail
. "$(dirname "$0")/lib.sh"
[ "$(id -u)" = 0 ] || die "the local cluster needs root"
export KUBECONFIG=$KUBECONFIG_ADMIN
KUBECTL=$(running_kubectl)
CTR=(ctr --address "$CONTAINERD_SOCK" -n k8s.io)

# pid_of NAME EXE: the recorded PID of NAME if that process is still running EXE.
pid_of() {
  local f=$PID_DIR/$1.pid pid exe
  [ -f "$f" ] || return 1
  pid=$(cat "$f"); exe=$(readlink "/proc/$pid/exe" 2>/dev/null) || return 1
  [ "$(basename "${exe% (deleted)}")" = "$2" ]
  echo "$pid"
}
# stop NAME EXE: TERM, then KILL after 10s.
stop() {
  local pid
  if pid=$(pid_of "$1" "$2"); then
    kill -TERM "$pid" 2>/dev/null
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
    kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null
    log "stopped $1 (pid $pid)"
  fi
  rm -f "$PID_DIR/$1.pid"
}

# 1. Pods first, while the kubelet still runs: their CNI DEL releases veths and addresses.
if pid_of kubelet kubelet >/dev/null && "$KUBECTL" get --raw /readyz >/dev/null 2>&1; then
  timeout 40 "$KUBECTL" delete pods --all --all-namespaces --grace-period=1 --wait=true >/dev/null 2>&1 || true
fi
for rev in "${ISTIO_REVISIONS[@]}"; do stop "istiod-$rev" pilot-discovery; done
stop kube-scheduler kube-scheduler
stop kube-controller-manager kube-controller-manager
stop kubelet kubelet

# 2. Containers. Record the network namespaces of the sandboxes while
#    containerd can still tell, then kill every task.
netns_list=$RUN_DIR/netns.list
if pid_of containerd containerd >/dev/null; then
  for id in $("${CTR[@]}" containers ls -q 2>/dev/null); do
    "${CTR[@]}" containers info "$id" 2>/dev/null |
      jq -r '.Spec.linux.namespaces[]? | select(.type == "network") | .path // empty' >> "$netns_list" 2>/dev/null
  done
  for t in $("${CTR[@]}" tasks ls -q 2>/dev/null); do "${CTR[@]}" tasks kill -s KILL "$t" >/dev/null 2>&1; done
fi
# Whatever still runs in the kubelet's pod cgroups is a container of this cluster.
for procs in /sys/fs/cgroup/*/kubepods/cgroup.procs /sys/fs/cgroup/*/kubepods/*/cgroup.procs /sys/fs/cgroup/*/kubepods/*/*/cgroup.procs /sys/fs/cgroup/*/kubepods/*/*/*/cgroup.procs; do
  [ -f "$procs" ] && xargs -r kill -KILL < "$procs" 2>/dev/null
done
for f in "$RUN_DIR"/containerd/state/io.containerd.runtime.v2.task/*/*/shim.pid; do
  [ -f "$f" ] || continue
  pid=$(cat "$f"); exe=$(readlink "/proc/$pid/exe" 2>/dev/null) || continue
  [[ $(basename "$exe") == containerd-shim* ]] && kill -KILL "$pid" 2>/dev/null && log "killed shim $pid"
done
stop containerd containerd
stop kube-apiserver kube-apiserver
stop etcd etcd

# 3. Network namespaces of the pods: those containerd named, any cni-* netns
#    holding an address of this cluster's pod range, and any cni-* netns
#    made while this cluster ran (not in up.sh's netns.before) that nothing
#    holds any more (no thread in it, no open file of it): a sandbox torn
#    down half way (its CNI DEL done, its record gone) leaves one with no
#    address.
# Held: by any thread's namespace, or an open file (a runtime setting a
# sandbox up holds its netns open before any process runs in it).
clear_netns() {
  local held= ns ino
  for ns in /run/netns/cni-*; do
    [ -e "$ns" ] || continue
    if ip netns exec "$(basename "$ns")" ip -4 -o addr show to "$POD_CIDR" 2>/dev/null | grep -q .; then
      echo "$ns" >> "$netns_list"
    elif [ -f "$RUN_DIR/netns.before" ] && ! grep -qxF "$ns" "$RUN_DIR/netns.before"; then
      ino=$(stat -L -c %i "$ns" 2>/dev/null) || continue
      [ -n "$held" ] || held=$(for l in /proc/[0-9]*/task/[0-9]*/ns/net /proc/[0-9]*/fd/*; do readlink "$l" 2>/dev/null; done | grep '^net:\[' | sort -u)
      grep -qxF "net:[$ino]" <<< "$held" || echo "$ns" >> "$netns_list"
    fi
  done
  [ -f "$netns_list" ] || return 0
  sort -u "$netns_list" | while read -r ns; do
    case $ns in /run/netns/cni-*|/var/run/netns/cni-*) ;; *) continue ;; esac
    [ -e "$ns" ] || continue
    umount "$ns" 2>/dev/null || umount -l "$ns" 2>/dev/null
    rm -f "$ns" 2>/dev/null && log "removed netns $ns"
  done
  rm -f "$netns_list"
}
clear_netns
# up.sh makes /run/netns a (shared) bind mount of itself when it was not a
# mount point (noted in netns.unmounted), as `ip netns add` also does. Such a
# bind made over a netns already mounted hides that mount (umount through
# the path says "not mounted", rm says "busy"): once every pod's netns is
# gone, the bind goes too, and what it hid is cleared.
if [ -f "$RUN_DIR/netns.unmounted" ]; then
  # (busy: something else is mounted under it, and stays)
  while mountpoint -q /run/netns; do umount /run/netns 2>/dev/null || break; done
  clear_netns
fi

# 4. Mounts under the state dir (overlay rootfs, volumes, shm), deepest first.
awk -v run="$RUN_DIR" 'index($2, run) == 1 { print $2 }' /proc/self/mounts | sort -r | while read -r m; do
  umount "$m" 2>/dev/null || umount -l "$m"
done

# 5. Links: veths on the pod bridge, and the bridge (which holds the node's address).
if ip link show "$BRIDGE" >/dev/null 2>&1; then
  for veth in $(ip -o link show master "$BRIDGE" | awk -F': ' '{ print $2 }' | cut -d@ -f1); do ip link del "$veth" 2>/dev/null; done
  ip link del "$BRIDGE" && log "removed bridge $BRIDGE"
fi

# 6. CNI caches of this network (results are named <network>-<container id>-<ifname>).
for r in /var/lib/cni/results/"$CNI_NETWORK"-*; do
  [ -e "$r" ] || continue
  id=${r#/var/lib/cni/results/$CNI_NETWORK-}; id=${id%-eth0}
  rm -f "$r" "/var/lib/cni/results/cni-loopback-$id-lo"
done
rm -rf "/var/lib/cni/networks/$CNI_NETWORK"
rmdir /var/lib/cni/results /var/lib/cni/networks /var/lib/cni 2>/dev/null
[ -f "$RUN_DIR/ip_forward.orig" ] && cat "$RUN_DIR/ip_forward.orig" > /proc/sys/net/ipv4/ip_forward

# 7. The kubelet's host iptables chains (KUBE-FIREWALL jumped to from INPUT and
#    OUTPUT, and its canary and hint chains), unless they were there before up.sh.
before=$RUN_DIR/host-chains.before
for ipt in iptables ip6tables; do
  for table in filter nat mangle; do
    for chain in KUBE-FIREWALL KUBE-KUBELET-CANARY KUBE-IPTABLES-HINT; do
      grep -qx "$ipt $table $chain" "$before" 2>/dev/null && continue
      $ipt -w -t "$table" -S "$chain" >/dev/null 2>&1 || continue
      for parent in INPUT OUTPUT FORWARD PREROUTING POSTROUTING; do
        while $ipt -w -t "$table" -D "$parent" -j "$chain" 2>/dev/null; do :; done
        while $ipt -w -t "$table" -D "$parent" -m comment --comment "kubelet firewall for dropping marked packets" -j "$chain" 2>/dev/null; do :; done
      done
      # Any other rule still jumping to it (with matches we did not spell out).
      $ipt -w -t "$table" -S | grep -E -- "^-A [A-Z]+ .*-j $chain( |\$)" | sed 's/^-A /-D /' | while read -r rule; do
        eval "$ipt -w -t $table $rule" 2>/dev/null
      done
      $ipt -w -t "$table" -F "$chain" 2>/dev/null && $ipt -w -t "$table" -X "$chain" 2>/dev/null && log "removed $ipt $table $chain"
    done
  done
done

# 8. kubepods cgroups, deepest first; pod log links into the state dir.
for hier in /sys/fs/cgroup/*/; do
  [ -d "${hier}kubepods" ] && find "${hier}kubepods" -depth -type d -exec rmdir {} + 2>/dev/null
done
for l in /var/log/containers/*.log; do
  [ -L "$l" ] && [[ $(readlink "$l") == "$RUN_DIR"/* ]] && rm -f "$l"
done
[ -d /run/containerd ] && find /run/containerd -depth -type d -empty -delete 2>/dev/null

# 9. Runtime data of the cluster (etcd, containerd root, kubelet dir).
rm -rf "$RUN_DIR"
log "cluster down"
exit 0
