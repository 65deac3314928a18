#!/usr/bin/env bash
# Makes the rule dumps under explain/capture/testdata/releases/: what the REAL
# istio-iptables of each Istio release writes, for every argument set in
# explain/capture/testdata/releases/sets.tsv, each run in a fresh network
# namespace and dumped with the real iptables-save, ip6tables-save and (where
# the release has --native-nftables) nft list ruleset.
#
# Run by hand, as root, not in CI:
#   ISTIO_SRC=/path/to/istio.git hack/testdata/istio-releases.sh [TAG…]
# ISTIO_SRC is a git repository of istio/istio that holds the release tags
# (a bare mirror is enough). For each TAG (default: the newest patch of every
# minor from 1.20 to 1.30) the script extracts the tag's tree, adds a
# small main package that calls tools/istio-iptables/pkg/cmd.GetCommand, and
# builds it with the release's own go.mod (modules from the Go module proxy;
# pilot-agent itself does not build for old releases, istio-iptables does).
# The current release is the pilot-agent hack/cluster/build-istio.sh builds
# from the version hack/tools/istio/go.mod pins (directory "current").
#
# Nothing of Istio's source is kept in the project: the tree and the binary
# live under the cache directory; only the dumps (data the real binaries
# produced) are written to the testdata directory, with a SOURCE file naming
# the tag, its commit and the iptables tools used.
set -euo pipefail
cd "$(dirname "$0")/../.."
. hack/cluster/lib.sh
[ "$(id -u)" = 0 ] || die "needs root (network namespaces)"
out=explain/capture/testdata/releases
sets=$out/sets.tsv
tags=("$@")
[ ${#tags[@]} -gt 0 ] || tags=(1.20.8 1.21.6 1.22.8 1.23.6 1.24.6 1.25.5 1.26.8 1.27.9 1.28.10 1.29.6 1.30.3 current)
build=$CACHE_DIR/istio-releases
mkdir -p "$build"

# binary_for TAG: prints the path of that release's istio-iptables, building
# it once.
binary_for() {
  local tag=$1
  if [ "$tag" = current ]; then
    hack/cluster/build-istio.sh >&2
    printf '%s\n' "$ISTIO_BIN/pilot-agent istio-iptables"
    return
  fi
  [ -n "${ISTIO_SRC:-}" ] || die "ISTIO_SRC: a git repository of istio/istio with its release tags"
  local dir=$build/$tag bin=$build/$tag/istio-iptables
  if [ ! -x "$bin" ]; then
    rm -rf "$dir/src"
    mkdir -p "$dir/src"
    git -C "$ISTIO_SRC" archive "$tag" | tar -x -C "$dir/src"
    mkdir -p "$dir/src/kmesh-istio-iptables"
    # GetCommand took no argument before 1.21, the log options since.
    local call='cmd.GetCommand(log.DefaultOptions())' imp='"istio.io/istio/pkg/log"'
    if ! grep -q 'func GetCommand(logOpts' "$dir/src/tools/istio-iptables/pkg/cmd/root.go"; then
      call='cmd.GetCommand()' imp=''
    fi
    cat >"$dir/src/kmesh-istio-iptables/main.go" <<EOF
package main

import (
	"os"

	$imp
	"istio.io/istio/tools/istio-iptables/pkg/cmd"
)

func main() {
	if err := $call.Execute(); err != nil {
		os.Exit(1)
	}
}
EOF
    # Istio 1.6's module graph names vbom.ml/util, which the module proxy
    # does not serve and istio-iptables does not link: an empty stand-in
    # module lets the graph resolve (only for the release outside the model
    # whose rules the Istio articles show).
    local log
    if ! log=$(cd "$dir/src" && go build -o "$bin" ./kmesh-istio-iptables 2>&1); then
      grep -q 'vbom.ml/util' <<<"$log" || die "$tag: $log"
      mkdir -p "$dir/stub-vbom"
      printf 'module vbom.ml/util\n' >"$dir/stub-vbom/go.mod"
      (cd "$dir/src" && go mod edit -replace "vbom.ml/util=$dir/stub-vbom" && go build -o "$bin" ./kmesh-istio-iptables) >&2
    fi
    git -C "$ISTIO_SRC" rev-parse "$tag^{commit}" >"$dir/commit"
  fi
  printf '%s\n' "$bin"
}

# Legacy sets run with the legacy tools first on PATH (1.20 to 1.24 call
# plain "iptables") and with the legacy filter table already in the network
# namespace (later releases pick the backend that already holds tables, as on
# a node whose tools are legacy).
legacy_path=$build/legacy-bin
mkdir -p "$legacy_path"
for t in iptables iptables-save iptables-restore ip6tables ip6tables-save ip6tables-restore; do
  ln -sf "$(command -v "${t/tables/tables-legacy}")" "$legacy_path/$t"
done

ns=kmt-rel-$$
cleanup() { ip netns del "$ns" 2>/dev/null || true; rm -rf "/etc/netns/$ns"; }
trap cleanup EXIT

# outside TAG: a release the model does not know (Istio 1.6, as the Istio
# articles show it): its default pod's rules as iptables-save and as the
# `iptables -t nat -S` users paste, under testdata/outside/MINOR.
outside() {
  local tag=$1 minor dir
  minor=$(echo "$tag" | cut -d. -f1,2)
  dir=explain/capture/testdata/outside/$minor
  read -r -a bin <<<"$(binary_for "$tag")"
  rm -rf "$dir"
  mkdir -p "$dir"
  cleanup
  ip netns add "$ns"
  ip -n "$ns" link add eth0 type veth peer name eth1
  ip -n "$ns" addr add 10.250.0.2/24 dev eth0
  ip -n "$ns" link set eth0 up
  ip -n "$ns" link set lo up
  ip netns exec "$ns" env -i PATH="$PATH" "${bin[@]}" -p 15001 -z 15006 -u 1337 -m REDIRECT -i '*' -x '' -b '*' -d 15090,15021,15020 >/dev/null
  ip netns exec "$ns" iptables-nft-save -c >"$dir/default.v4.save"
  ip netns exec "$ns" iptables -t nat -S >"$dir/default.nat.S"
  printf '%s\n' "release: $tag" "commit: $(cat "$build/$tag/commit")" "args: -p 15001 -z 15006 -u 1337 -m REDIRECT -i '*' -x '' -b '*' -d 15090,15021,15020" \
    "made by: hack/testdata/istio-releases.sh on $(date -u +%Y-%m-%d)" >"$dir/SOURCE"
}
outside 1.6.14

for tag in "${tags[@]}"; do
  read -r -a bin <<<"$(binary_for "$tag")"
  minor=$tag
  [ "$tag" = current ] || minor=$(echo "$tag" | cut -d. -f1,2)
  dir=$out/$minor
  rm -rf "$dir"
  mkdir -p "$dir"
  native=no
  "${bin[@]}" --help 2>&1 | grep -q -- --native-nftables && native=yes
  {
    echo "release: $tag"
    if [ "$tag" = current ]; then
      echo "istio.io/istio: $ISTIO_MODULE_VERSION (hack/tools/istio/go.mod)"
    else
      echo "commit: $(cat "$build/$tag/commit")"
    fi
    echo "iptables: $(iptables --version)"
    echo "iptables-legacy: $(iptables-legacy --version)"
    echo "nft: $(nft --version)"
    echo "made by: hack/testdata/istio-releases.sh on $(date -u +%Y-%m-%d)"
  } >"$dir/SOURCE"
  n=0
  while IFS=$'\t' read -r name addrs servers args; do
    case $name in '' | '#'*) continue ;; esac
    [[ $name == native-* && $native == no ]] && continue
    cleanup
    ip netns add "$ns"
    ip -n "$ns" link add eth0 type veth peer name eth1
    for a in ${addrs//,/ }; do
      if [[ $a == *:* ]]; then ip -n "$ns" addr add "$a/64" dev eth0 nodad; else ip -n "$ns" addr add "$a/24" dev eth0; fi
    done
    ip -n "$ns" link set eth0 up
    ip -n "$ns" link set lo up
    mkdir -p "/etc/netns/$ns"
    : >"/etc/netns/$ns/resolv.conf"
    if [ "$servers" != - ]; then
      for s in ${servers//,/ }; do echo "nameserver $s" >>"/etc/netns/$ns/resolv.conf"; done
    fi
    path=$PATH
    if [[ $name == legacy-* ]]; then
      path=$legacy_path:$PATH
      ip netns exec "$ns" iptables-legacy -t filter -L -n >/dev/null
      ip netns exec "$ns" ip6tables-legacy -t filter -L -n >/dev/null
    fi
    eval "set -- $args"
    # No environment but PATH: istio-iptables reads settings from it too.
    if ! log=$(ip netns exec "$ns" env -i PATH="$path" "${bin[@]}" "$@" 2>&1); then
      printf '%s\n' "$log" | tail -5 >"$dir/$name.refused"
      echo "$minor $name: refused" >&2
      continue
    fi
    if [[ $name == native-* ]]; then
      ip netns exec "$ns" nft list ruleset >"$dir/$name.nft"
    else
      b=nft
      [[ $name == legacy-* ]] && b=legacy
      ip netns exec "$ns" "iptables-$b-save" -c >"$dir/$name.v4.save"
      ip netns exec "$ns" "ip6tables-$b-save" -c >"$dir/$name.v6.save"
    fi
    n=$((n + 1))
  done <"$sets"
  echo "$minor: $n sets dumped" >&2
done
