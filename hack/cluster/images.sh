#!/usr/bin/env bash
# Builds the cluster's images locally, with no registry, as `docker save`
# archives in $IMAGE_DIR that up.sh imports into containerd:
#   pause.tar     registry.k8s.io/pause:3.10 (the sandbox image)
#   mesh-test.tar kmesh.local/mesh-test:v1, entrypoint /bin/sh: busybox, iptables
#                 and ip6tables with both backends (nft, legacy), nft, pilot-agent
#   proxyv2.tar   kmesh.local/istio/proxyv2:<the built Istio's version>, the same files with
#                 pilot-agent as entrypoint, as Istio's proxyv2 image has
# pilot-agent is Istio's own (build-istio.sh), as /usr/local/bin/pilot-agent-istio,
# behind test/standin/pilot-agent, which hands it every subcommand but `proxy`
# (Envoy's stand-in: see its package comment).
# Inputs unchanged since the last build: nothing to do.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

mkdir -p "$IMAGE_DIR"
build=$IMAGE_DIR/build; mkdir -p "$build"
(cd "$REPO_ROOT" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$build/pilot-agent" ./test/standin/pilot-agent)
release=$(istio_release)
stamp=$( { cat "$HACK_DIR/images.sh" "$HACK_DIR/images/pack.sh" "$HACK_DIR/images/pause.c" "$build/pilot-agent" "$ISTIO_BIN/pilot-agent" /bin/busybox /usr/sbin/xtables-nft-multi /usr/sbin/nft; echo "$release"; } | sha256sum | cut -c1-16)
if [ "$(cat "$IMAGE_DIR/.stamp" 2>/dev/null)" = "$stamp" ] && [ -f "$IMAGE_DIR/pause.tar" ] && [ -f "$IMAGE_DIR/mesh-test.tar" ] && [ -f "$IMAGE_DIR/proxyv2.tar" ]; then
  exit 0
fi
log "building images in $IMAGE_DIR"

# pause
gcc -Os -static -o "$build/pause" "$HACK_DIR/images/pause.c" && strip "$build/pause"
rm -rf "$build/pause-root" && mkdir -p "$build/pause-root" && cp "$build/pause" "$build/pause-root/pause"
"$HACK_DIR/images/pack.sh" "$build/pause-root" "$IMAGE_DIR/pause.tar" '["/pause"]' null "$PAUSE_IMAGE"

# mesh-test / proxyv2 root filesystem
R=$build/mesh-root; rm -rf "$R"
mkdir -p "$R"/{bin,sbin,usr/sbin,usr/bin,usr/local/bin,etc,tmp,run,proc,sys,dev,var/run,root}
chmod 1777 "$R/tmp"
cp /bin/busybox "$R/bin/busybox"
for applet in $(/bin/busybox --list); do [ -e "$R/bin/$applet" ] || ln -s busybox "$R/bin/$applet"; done
for multi in xtables-nft-multi xtables-legacy-multi nft; do cp -a "/usr/sbin/$multi" "$R/usr/sbin/"; done
for fam in iptables ip6tables; do
  for tool in "" -save -restore; do
    ln -sf xtables-nft-multi "$R/usr/sbin/$fam$tool"
    ln -sf xtables-nft-multi "$R/usr/sbin/$fam-nft$tool"
    ln -sf xtables-legacy-multi "$R/usr/sbin/$fam-legacy$tool"
  done
done
xt=$(dirname "$(find /usr/lib -name libxt_tcp.so -path '*xtables*' | head -1)")
mkdir -p "$R$xt" && cp -a "$xt/." "$R$xt/"
# shared libraries of the iptables binaries and of every extension they dlopen
for f in /usr/sbin/xtables-nft-multi /usr/sbin/xtables-legacy-multi /usr/sbin/nft "$xt"/*.so; do ldd "$f" 2>/dev/null | grep -o '/[^ ]*'; done |
  sort -u | while read -r lib; do [ -e "$lib" ] && mkdir -p "$R$(dirname "$lib")" && cp -L "$lib" "$R$lib"; done
cp /etc/protocols /etc/services "$R/etc/" 2>/dev/null || true
cp /etc/ethertypes "$R/etc/" 2>/dev/null || true
printf 'root:x:0:0:root:/root:/bin/sh\nistio-proxy:x:1337:1337::/tmp:/bin/sh\n' > "$R/etc/passwd"
printf 'root:x:0:\nistio-proxy:x:1337:\n' > "$R/etc/group"
cp "$build/pilot-agent" "$R/usr/local/bin/pilot-agent"
cp "$ISTIO_BIN/pilot-agent" "$R/usr/local/bin/pilot-agent-istio"
chroot "$R" /usr/sbin/iptables-save --version >/dev/null
chroot "$R" /usr/sbin/iptables-legacy-save --version >/dev/null
chroot "$R" /usr/sbin/nft --version >/dev/null
"$HACK_DIR/images/pack.sh" "$R" "$IMAGE_DIR/mesh-test.tar" '["/bin/sh"]' null "$TEST_IMAGE"
"$HACK_DIR/images/pack.sh" "$R" "$IMAGE_DIR/proxyv2.tar" '["/usr/local/bin/pilot-agent"]' null "$PROXY_IMAGE_REPO:$release"
echo "$stamp" > "$IMAGE_DIR/.stamp"
log "images: $(cd "$IMAGE_DIR" && du -h pause.tar mesh-test.tar proxyv2.tar | tr '\t\n' ': ')"
