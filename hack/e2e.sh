#!/usr/bin/env bash
# `make e2e RUN=…`: end-to-end tests on the cluster that is up (make
# cluster-up or make demo first), without starting or stopping it. RUN is go
# test's -run: RUN=TestCheckCatalogue/KM-CONN-006 plants only that check's
# fault; RUN=TestFixesRecover with KMESH_FIXES=43 only that fix's case.
set -euo pipefail
. "$(dirname "$0")/cluster/lib.sh"
[ -f "$KUBECONFIG_ADMIN" ] || die "no cluster is up: make cluster-up (or make demo) first"
export KMESH_KUBECONFIG=$KUBECONFIG_ADMIN
cd "$REPO_ROOT"
exec go test -count=1 -timeout 60m -v -run "${RUN:-.}" ./test/e2e/
