#!/usr/bin/env bash
# Builds krew and validate-krew-manifest at the version pinned in
# hack/tools/krew/go.mod into $CACHE_DIR/krew/; skipped when up to date.
set -euo pipefail
. "$(dirname "$0")/../cluster/lib.sh"
TOOLS=$REPO_ROOT/hack/tools/krew
OUT=$CACHE_DIR/krew
stamp=$(cat "$TOOLS/go.mod" "$TOOLS/go.sum" | sha256sum | cut -c1-16)
if [ -x "$OUT/krew" ] && [ -x "$OUT/validate-krew-manifest" ] && [ "$(cat "$OUT/.stamp" 2>/dev/null)" = "$stamp" ]; then exit 0; fi
mkdir -p "$OUT"
log "building krew and validate-krew-manifest"
(cd "$TOOLS" && CGO_ENABLED=0 go build -trimpath -o "$OUT/" sigs.k8s.io/krew/cmd/krew sigs.k8s.io/krew/cmd/validate-krew-manifest)
echo "$stamp" > "$OUT/.stamp"
