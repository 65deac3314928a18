#!/usr/bin/env bash
# Builds the etcd server the local cluster runs, from the version that the
# tools module hack/tools/etcd/go.mod pins, into $CACHE_DIR/etcd/<version>/.
# Skipped when the module, the Go toolchain and the flags are unchanged.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

TOOLS=$REPO_ROOT/hack/tools/etcd
[ -n "$ETCD_MODULE_VERSION" ] || die "$TOOLS/go.mod pins no go.etcd.io/etcd/server/v3"
ldflags="-s -w"
stamp=$( { cat "$TOOLS/go.mod" "$TOOLS/go.sum"; go env GOVERSION; echo "$ldflags"; } | sha256sum | cut -c1-16)
if [ -x "$ETCD_BIN/etcd" ] && [ "$(cat "$ETCD_BIN/.stamp" 2>/dev/null)" = "$stamp" ]; then
  log "etcd $ETCD_MODULE_VERSION up to date in $ETCD_BIN"; exit 0
fi
mkdir -p "$ETCD_BIN"
log "building etcd $ETCD_MODULE_VERSION (about 1 minute on 2 cores, module download included)"
t0=$(date +%s)
(cd "$TOOLS" && CGO_ENABLED=0 GOFLAGS=-buildvcs=false go build -trimpath -ldflags "$ldflags" -o "$ETCD_BIN/etcd" go.etcd.io/etcd/server/v3)
echo "$stamp" > "$ETCD_BIN/.stamp"
log "built in $(( $(date +%s) - t0 ))s: $("$ETCD_BIN/etcd" --version | head -1)"
