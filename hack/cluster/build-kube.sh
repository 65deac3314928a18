#!/usr/bin/env bash
# Builds kube-apiserver, kubelet, kube-controller-manager, kube-scheduler and
# kubectl at K8S_VERSION (lib.sh; a lane's version) from the tools module
# hack/tools/kube/v1.<minor>/ (written by hack/tools/kube/sync.sh), into
# $CACHE_DIR/kube/<version>/. A build whose inputs (the tools module's go.mod
# and go.sum) have not changed since the last one is skipped.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

minor=$(echo "$K8S_VERSION" | cut -d. -f2)
TOOLS=$REPO_ROOT/hack/tools/kube/v1.$minor
[ -f "$TOOLS/go.mod" ] || die "no tools module for Kubernetes 1.$minor: run hack/tools/kube/sync.sh $K8S_VERSION"
CMDS=(kube-apiserver kubelet kube-controller-manager kube-scheduler kubectl)
ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$K8S_VERSION -X k8s.io/component-base/version.gitMajor=1"
ldflags+=" -X k8s.io/component-base/version.gitMinor=$minor -X k8s.io/component-base/version.gitTreeState=clean"
# Rebuilt when the module, the Go toolchain or the flags change.
stamp=$( { cat "$TOOLS/go.mod" "$TOOLS/go.sum"; go env GOVERSION; echo "$ldflags"; } | sha256sum | cut -c1-16)
have() { for c in "${CMDS[@]}"; do [ -x "$KUBE_BIN/$c" ] || return 1; done; [ "$(cat "$KUBE_BIN/.stamp" 2>/dev/null)" = "$stamp" ]; }
if have; then log "kubernetes $K8S_VERSION binaries up to date in $KUBE_BIN"; exit 0; fi

grep -qE "^(require)?\s*k8s.io/kubernetes $K8S_VERSION( |$)" "$TOOLS/go.mod" || die "$TOOLS/go.mod does not pin k8s.io/kubernetes $K8S_VERSION (hack/tools/kube/sync.sh $K8S_VERSION writes it)"
mkdir -p "$KUBE_BIN"
pkgs=(); for c in "${CMDS[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/$c"); done
log "building kubernetes $K8S_VERSION (${CMDS[*]}); the first build takes about 5-7 minutes on 2 cores for 1.37, 4-5 for 1.33 (module download included)"
t0=$(date +%s)
(cd "$TOOLS" && CGO_ENABLED=0 GOFLAGS=-buildvcs=false go build -trimpath -ldflags "$ldflags" -o "$KUBE_BIN/" "${pkgs[@]}")
echo "$stamp" > "$KUBE_BIN/.stamp"
log "built in $(( $(date +%s) - t0 ))s: $(ls "$KUBE_BIN" | tr '\n' ' ')"
