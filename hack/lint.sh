#!/usr/bin/env bash
# golangci-lint over the project with .golangci.yml's linters (make lint;
# make test runs it among its static checks).
set -euo pipefail
. "$(dirname "$0")/cluster/lib.sh"
"$REPO_ROOT/hack/tools/build-lint.sh"
cd "$REPO_ROOT"
"$CACHE_DIR/lint/golangci-lint" run ./...
