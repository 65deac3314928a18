#!/usr/bin/env bash
# Installs the Debian packages the local cluster needs, only those missing.
# A machine that has them all returns in well under a second.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

# command -> package that provides it
declare -A NEED=(
  [containerd]=containerd
  [runc]=runc
  [/usr/lib/cni/bridge]=containernetworking-plugins
  [iptables]=iptables
  [/bin/busybox]=busybox-static
  [openssl]=openssl
  [ip]=iproute2
  [nsenter]=util-linux
  [pgrep]=procps
  [curl]=curl
  [gcc]=gcc
  [/usr/include/stdio.h]=libc6-dev   # static libc for the pause binary
  [ss]=iproute2
  [jq]=jq
  [setpriv]=util-linux
  [/usr/bin/time]=time   # peak memory in the benchmark scripts
  [nft]=nftables         # Istio's native nftables mode (tests, and the images)
)
missing=()
for c in "${!NEED[@]}"; do
  if [[ $c == /* ]]; then [ -e "$c" ] && continue; else command -v "$c" >/dev/null 2>&1 && continue; fi
  missing+=("${NEED[$c]}")
done
# busybox-static must be the static build: the test image has no libc of its own.
if [ -e /bin/busybox ] && ldd /bin/busybox >/dev/null 2>&1; then missing+=(busybox-static); fi
if [ ${#missing[@]} -eq 0 ]; then exit 0; fi
[ "$(id -u)" = 0 ] || die "missing packages (${missing[*]}); run as root or install them: apt-get install ${missing[*]}"
mapfile -t pkgs < <(printf '%s\n' "${missing[@]}" | sort -u)
log "installing Debian packages: ${pkgs[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${pkgs[@]}" >/dev/null
log "installed ${pkgs[*]}"
