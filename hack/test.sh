#!/usr/bin/env bash
# The project's whole test run (`make test`; CI runs exactly this):
#  1. static checks: gofmt, go vet, golangci-lint (.golangci.yml), no
#     tracked file over 1 MiB nor binary
#  2. the newest Kubernetes lane ($K8S_NEWEST): the local cluster from a
#     clean slate (dependencies installed and binaries built as needed),
#     every Go test against it: unit, integration and end-to-end
#  3. recovery: every process of the cluster killed at once, as a crash
#     would, then up.sh must clear the leftovers and come up again
#  4. down.sh, then a check that the host is exactly as before the run
#  5. the oldest Kubernetes lane ($K8S_OLDEST): a cluster of that version,
#     the tests whose answers depend on the version (TestLane*), down and
#     the host check again; each lane's count of checks is printed
#  6. the release archives of every platform, the krew manifest checked by
#     krew's validator, and an offline krew install run through kubectl
# The cluster is stopped on any exit, Ctrl-C included.
set -euo pipefail
. "$(dirname "$0")/cluster/lib.sh"
cd "$REPO_ROOT"
export KMESH_KUBECONFIG=$KUBECONFIG_ADMIN
T0=$(date +%s)
phase() { log "== $* ($(( $(date +%s) - T0 ))s)"; }

phase "static checks"
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './_output/*'))
[ -z "$unformatted" ] || die "gofmt would change: $unformatted"
go vet ./...
"$REPO_ROOT/hack/tracked-files.sh" || die "build outputs are tracked by git (above): remove them (git rm --cached) and ignore them"
"$REPO_ROOT/hack/lint.sh"

# Both lanes' binaries and Istio's own first: a missing build fails here, not half way.
for v in "$K8S_NEWEST" "$K8S_OLDEST"; do K8S_VERSION=$v "$HACK_DIR/build-kube.sh"; done
"$HACK_DIR/build-etcd.sh"
"$HACK_DIR/build-istio.sh"

export K8S_VERSION=$K8S_NEWEST
phase "lane $K8S_VERSION: local cluster"
"$HACK_DIR/down.sh" >/dev/null 2>&1 || true
before=$(mktemp); after=$(mktemp)
export KMESH_LANE_REPORT KMESH_TEST_REPORT; KMESH_LANE_REPORT=$(mktemp) KMESH_TEST_REPORT=$(mktemp)
# Each passing TestLane* test appends "<version> <checks> <test>" to the lane
# report, and tests that count what they checked append to the test report.
print_counts() {
  if [ -s "$KMESH_TEST_REPORT" ]; then
    log "what the tests counted:"
    sed 's/^/  /' "$KMESH_TEST_REPORT" >&2
  fi
  [ -s "$KMESH_LANE_REPORT" ] || return 0
  log "checks per Kubernetes lane (version-dependent tests):"
  awk '{ n[$1] += $2; t[$1]++ } END { for (v in n) printf "  lane %s: %d checks in %d tests\n", v, n[v], t[v] }' "$KMESH_LANE_REPORT" | sort -V >&2
}
trap 'print_counts; "$HACK_DIR/down.sh" >/dev/null 2>&1; rm -f "$before" "$after" "$KMESH_LANE_REPORT" "$KMESH_TEST_REPORT"' EXIT
trap 'exit 130' INT TERM
"$HACK_DIR/hoststate.sh" > "$before"
"$HACK_DIR/up.sh"
again=$("$HACK_DIR/up.sh" 2>&1)
[[ $again == *"cluster already up"* ]] || die "a second up.sh did not recognise the running cluster: $again"

phase "lane $K8S_VERSION: go test (unit, integration, end-to-end)"
CI=${CI:-true} go test -count=1 -timeout 35m ./...

phase "recovery after a crash"
kill_all() { # everything of the cluster dies at once; its state stays behind
  # A process may be gone before its kill (a pod's, once the kubelet is
  # killed): kill then fails, and xargs with it; that is not an error here.
  "$HACK_DIR/hoststate.sh" --ours | awk '$1 == "process" { print $4 }' | xargs -r kill -KILL 2>/dev/null || true
  for procs in $(find /sys/fs/cgroup/pids/kubepods -name cgroup.procs 2>/dev/null); do xargs -r kill -KILL < "$procs" 2>/dev/null || true; done
  sleep 1
}
kill_all
left=$("$HACK_DIR/hoststate.sh" --ours | grep -c -v '^process' || true)
[ "$left" -gt 0 ] || die "the simulated crash left nothing behind to recover from"
log "crash left $left items behind (netns, mounts, bridge, chains, state)"
"$HACK_DIR/up.sh"
CI=${CI:-true} go test -count=1 -run 'TestInitContainerRulesReadByEphemeralContainer' ./test/e2e/

host_check() {
  "$HACK_DIR/down.sh"
  "$HACK_DIR/hoststate.sh" > "$after"
  ours=$("$HACK_DIR/hoststate.sh" --ours)
  if [ -n "$ours" ] || ! diff -u "$before" "$after" >&2; then
    [ -z "$ours" ] || printf 'left behind by the cluster:\n%s\n' "$ours" >&2
    die "down.sh left the host different from before the run (diff above)"
  fi
}
phase "lane $K8S_VERSION: cluster down and host check"
host_check

export K8S_VERSION=$K8S_OLDEST
phase "lane $K8S_VERSION: local cluster, version-dependent tests"
"$HACK_DIR/up.sh"
CI=${CI:-true} go test -count=1 -timeout 10m -run '^TestLane' ./test/e2e/
phase "lane $K8S_VERSION: cluster down and host check"
host_check
# Every TestLane* test must have passed on both lanes.
want=$(grep -c '^func TestLane' test/e2e/*_test.go | awk -F: '{ n += $2 } END { print n }')
for v in "$K8S_NEWEST" "$K8S_OLDEST"; do
  got=$(awk -v v="$v" '$1 == v' "$KMESH_LANE_REPORT" | wc -l)
  [ "$got" -eq "$want" ] || die "lane $v: $got of the $want version-dependent tests reported passing"
done
phase "release archives, krew manifest, krew install"
K8S_VERSION=$K8S_NEWEST make -s krew-validate krew-install-test

phase "all tests passed"
