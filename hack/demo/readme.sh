#!/usr/bin/env bash
# Puts one run of the demo into README.md and docs/diagnose.md: runs `make
# demo`'s script once, keeps its transcript, and replaces every console block
# marked <!-- demo: ARGS --> with what that command printed in this run
# (hack/demo/splice). The docs test (cmd/docs_test.go) then checks their
# commands against the flags and their tables against the renderers' headers.
# Run by hand: hack/demo/readme.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
transcript=$(mktemp)
trap 'rm -f "$transcript"' EXIT
make build >/dev/null
NO_COLOR=1 hack/demo/demo.sh >"$transcript" 2>&1
for doc in README.md docs/diagnose.md docs/upgrade.md; do
  go run ./hack/demo/splice "$transcript" "$doc"
done
