#!/usr/bin/env bash
# Regenerates explain/capture/testdata/*.save: real iptables-save output of rules
# loaded with the real iptables-restore in throw-away network namespaces, and
# *.nft: real `nft list ruleset` output of Istio's native nftables mode
# (Istio's own istio-iptables, from the pilot-agent that
# hack/cluster/build-istio.sh builds from istio.io/istio, for Istio's rules; a
# proxy-init-shaped rule set for Linkerd's, as no real Linkerd can be built
# here). Needs root.
set -euo pipefail
cd "$(dirname "$0")/../.."
. hack/cluster/lib.sh
hack/cluster/build-istio.sh
out=explain/capture/testdata
bin=$ISTIO_BIN
ns=kmesh-td-$$
tmp=$(mktemp)
trap 'ip netns del "$ns" 2>/dev/null || true; rm -f "$tmp"' EXIT
dump() { # NAME SAVE-COMMAND ISTIO-ARGS…
  local name=$1 save=$2; shift 2
  ip netns add "$ns"
  # istio-iptables needs the pod's own addresses (it refuses to run without a
  # local IP): a veth eth0 with one of each family.
  ip -n "$ns" link add eth0 type veth peer name eth1
  ip -n "$ns" addr add 10.250.0.2/24 dev eth0
  ip -n "$ns" addr add fd00:250::2/64 dev eth0 nodad
  ip -n "$ns" link set eth0 up
  ip -n "$ns" link set lo up
  # No environment but PATH: istio-iptables also reads its settings from it.
  if ! log=$(ip netns exec "$ns" env -i PATH="$PATH" "$bin/pilot-agent" istio-iptables "$@" 2>&1); then
    die "istio-iptables $*: $log"
  fi
  ip netns exec "$ns" $save > "$tmp"
  mv "$tmp" "$out/$name"
  ip netns del "$ns"
}
dump istio-default.nft.save "iptables-nft-save -c" -p 15001 -z 15006 -u 1337 -m REDIRECT -i '*' -x "" -b '*' -d 15090,15021,15020
dump istio-tproxy-dns.legacy.save "iptables-legacy-save -c" -u 1337 -m TPROXY -b '*' -i '*' -d 15020 --redirect-dns --capture-all-dns --force-iptables-binary legacy
dump istio-default.v6.nosave-counters.save "ip6tables-save" -p 15001 -z 15006 -u 1337 -m REDIRECT -i '*' -x "" -b '*' -d 15090,15021,15020 --dual-stack
# Native nftables (istio-iptables --native-nftables writes inet tables with nft).
dump istio-native.nft "nft list ruleset" -p 15001 -z 15006 -u 1337 -m REDIRECT -i '*' -x "" -b '*' -d 15090,15021,15020 --native-nftables
dump istio-native-tproxy-dns.nft "nft list ruleset" -u 1337 -m TPROXY -i 10.0.0.0/8 -x 10.96.0.0/12 -b 8080,9090 -d 15020 -o 5432 -q 3306 -c eth9 -k tap0 \
  --redirect-dns --capture-all-dns --dual-stack --drop-invalid --native-nftables
# Linkerd's proxy-init rules, as linkerd2-proxy-init writes them (comments included).
ip netns add "$ns"
ip netns exec "$ns" iptables-nft-restore --noflush <<'RULES'
*nat
:PROXY_INIT_REDIRECT - [0:0]
:PROXY_INIT_OUTPUT - [0:0]
-A PROXY_INIT_REDIRECT -p tcp -m multiport --dports 4190,4191,4567,4568 -m comment --comment "proxy-init/ignore-port-4190,4191,4567,4568/1700000000" -j RETURN
-A PROXY_INIT_REDIRECT -p tcp -m comment --comment "proxy-init/redirect-all-incoming-to-proxy-port/1700000000" -j REDIRECT --to-ports 4143
-A PREROUTING -m comment --comment "proxy-init/install-proxy-init-prerouting/1700000000" -j PROXY_INIT_REDIRECT
-A PROXY_INIT_OUTPUT -m owner --uid-owner 2102 -m comment --comment "proxy-init/ignore-proxy-user-id/1700000000" -j RETURN
-A PROXY_INIT_OUTPUT -o lo -m comment --comment "proxy-init/ignore-loopback/1700000000" -j RETURN
-A PROXY_INIT_OUTPUT -p tcp -m multiport --dports 443,6443 -m comment --comment "proxy-init/ignore-port-443,6443/1700000000" -j RETURN
-A PROXY_INIT_OUTPUT -p tcp -m comment --comment "proxy-init/redirect-all-outgoing-to-proxy-port/1700000000" -j REDIRECT --to-ports 4140
-A OUTPUT -m comment --comment "proxy-init/install-proxy-init-output/1700000000" -j PROXY_INIT_OUTPUT
COMMIT
RULES
ip netns exec "$ns" iptables-nft-save -c > "$tmp" && mv "$tmp" "$out/linkerd-proxy-init.nft.save"
ip netns del "$ns"
ls -l "$out"
