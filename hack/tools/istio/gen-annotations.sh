#!/usr/bin/env bash
# Regenerates internal/istio/annotations_gen.go, the table of Istio's known
# annotations, from istio.io/api at the version hack/tools/istio/go.mod pins
# (run it after changing that pin). internal/istio's tests fail while the
# file is stale.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=$here/../../../internal/istio/annotations_gen.go
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
(cd "$here" && GOFLAGS=-buildvcs=false GOWORK=off go run ./annotations) > "$tmp"
cat "$tmp" > "$out"
gofmt -w "$out"
echo "wrote $(cd "$(dirname "$out")" && pwd)/$(basename "$out")"
