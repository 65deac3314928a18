#!/usr/bin/env bash
# Builds Istio's own pilot-agent (whose istio-iptables writes a sidecar pod's
# capture rules), pilot-discovery (istiod, the injector the local cluster runs),
# istioctl (renders the injector's ConfigMaps and webhooks from Istio's own
# charts), istio-cni (the CNI plugin, in sidecar mode) and inpod (istio-cni's
# node agent's in-pod rule writer for ambient mode, hack/tools/istio/inpod) at
# the istio.io/istio version pinned in hack/tools/istio/go.mod, into
# $CACHE_DIR/istio/<version>/.
# The version they report is the module's VERSION file plus "-dev" (what
# Istio's own build stamps on a master build). Skipped when up to date.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

TOOLS=$REPO_ROOT/hack/tools/istio
CMDS=(pilot-agent pilot-discovery istioctl istio-cni inpod)
[ -n "$ISTIO_MODULE_VERSION" ] || die "hack/tools/istio/go.mod pins no istio.io/istio version"
dl=$(cd "$TOOLS" && go mod download -json "istio.io/istio@$ISTIO_MODULE_VERSION") || die "go mod download istio.io/istio@$ISTIO_MODULE_VERSION: $(sed -n 's/^\s*"Error": //p' <<<"$dl")"
src=$(sed -n 's/^\s*"Dir": "\(.*\)",$/\1/p' <<<"$dl")
[ -f "$src/VERSION" ] || die "istio.io/istio@$ISTIO_MODULE_VERSION: no VERSION file in ${src:-the module cache}"
release="$(tr -d '[:space:]' < "$src/VERSION")-dev"
ldflags="-s -w -X istio.io/istio/pkg/version.buildVersion=$release -X istio.io/istio/pkg/version.buildGitRevision=$ISTIO_MODULE_VERSION"
ldflags+=" -X istio.io/istio/pkg/version.buildStatus=Clean"
stamp=$( { cat "$TOOLS/go.mod" "$TOOLS/go.sum" "$TOOLS"/inpod/*.go; (cd "$TOOLS" && go env GOVERSION); echo "$ldflags"; } | sha256sum | cut -c1-16)
have() { for c in "${CMDS[@]}"; do [ -x "$ISTIO_BIN/$c" ] || return 1; done; [ "$(cat "$ISTIO_BIN/.stamp" 2>/dev/null)" = "$stamp" ]; }
if have; then log "istio $release ($ISTIO_MODULE_VERSION) binaries up to date in $ISTIO_BIN"; exit 0; fi

mkdir -p "$ISTIO_BIN"
pkgs=(istio.io/istio/pilot/cmd/pilot-agent istio.io/istio/pilot/cmd/pilot-discovery istio.io/istio/istioctl/cmd/istioctl istio.io/istio/cni/cmd/istio-cni ./inpod)
log "building istio $release (${CMDS[*]}) from istio.io/istio@$ISTIO_MODULE_VERSION; the first build takes several minutes on 2 cores"
t0=$(date +%s)
(cd "$TOOLS" && CGO_ENABLED=0 GOFLAGS=-buildvcs=false go build -trimpath -ldflags "$ldflags" -o "$ISTIO_BIN/" "${pkgs[@]}")
echo "$release" > "$ISTIO_BIN/release"
echo "$stamp" > "$ISTIO_BIN/.stamp"
log "built in $(( $(date +%s) - t0 ))s: $(ls "$ISTIO_BIN" | tr '\n' ' ')"
