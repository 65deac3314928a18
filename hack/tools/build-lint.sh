#!/usr/bin/env bash
# Builds golangci-lint at the version pinned in hack/tools/lint/go.mod into
# $CACHE_DIR/lint/; skipped when up to date.
set -euo pipefail
. "$(dirname "$0")/../cluster/lib.sh"
TOOLS=$REPO_ROOT/hack/tools/lint
OUT=$CACHE_DIR/lint
stamp=$(cat "$TOOLS/go.mod" "$TOOLS/go.sum" | sha256sum | cut -c1-16)
if [ -x "$OUT/golangci-lint" ] && [ "$(cat "$OUT/.stamp" 2>/dev/null)" = "$stamp" ]; then exit 0; fi
mkdir -p "$OUT"
log "building golangci-lint (once; cached in $OUT)"
(cd "$TOOLS" && CGO_ENABLED=0 go build -trimpath -o "$OUT/golangci-lint" github.com/golangci/golangci-lint/v2/cmd/golangci-lint)
echo "$stamp" > "$OUT/.stamp"
