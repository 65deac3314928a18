#!/usr/bin/env bash
# The project's whole test run (`make test`; CI runs exactly this):
#  1. static checks: gofmt, go vet
#  2. the local cluster from a clean slate (dependencies installed and
#     binaries built as needed), every Go test against it: unit,
#     integration and end-to-end
#  3. recovery: every process of the cluster killed at once, as a crash
#     would, then up.sh must clear the leftovers and come up again
#  4. down.sh, then a check that the host is exactly as before the run
#  5. the release archives of every platform, the krew manifest checked by
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

phase "local cluster"
"$HACK_DIR/down.sh" >/dev/null 2>&1 || true
before=$(mktemp); after=$(mktemp)
trap '"$HACK_DIR/down.sh" >/dev/null 2>&1; rm -f "$before" "$after"' EXIT
trap 'exit 130' INT TERM
"$HACK_DIR/hoststate.sh" > "$before"
"$HACK_DIR/up.sh"
again=$("$HACK_DIR/up.sh" 2>&1)
[[ $again == *"cluster already up"* ]] || die "a second up.sh did not recognise the running cluster: $again"

phase "go test (unit, integration, end-to-end)"
CI=${CI:-true} go test -count=1 -timeout 20m ./...

phase "recovery after a crash"
kill_all() { # everything of the cluster dies at once; its state stays behind
  "$HACK_DIR/hoststate.sh" --ours | awk '$1 == "process" { print $4 }' | xargs -r kill -KILL 2>/dev/null
  for procs in $(find /sys/fs/cgroup/pids/kubepods -name cgroup.procs 2>/dev/null); do xargs -r kill -KILL < "$procs" 2>/dev/null; done
  sleep 1
}
kill_all
left=$("$HACK_DIR/hoststate.sh" --ours | grep -c -v '^process' || true)
[ "$left" -gt 0 ] || die "the simulated crash left nothing behind to recover from"
log "crash left $left items behind (netns, mounts, bridge, chains, state)"
"$HACK_DIR/up.sh"
CI=${CI:-true} go test -count=1 -run 'TestInitContainerRulesReadByEphemeralContainer' ./test/e2e/

phase "cluster down and host check"
"$HACK_DIR/down.sh"
"$HACK_DIR/hoststate.sh" > "$after"
ours=$("$HACK_DIR/hoststate.sh" --ours)
if [ -n "$ours" ] || ! diff -u "$before" "$after" >&2; then
  [ -z "$ours" ] || printf 'left behind by the cluster:\n%s\n' "$ours" >&2
  die "down.sh left the host different from before the run (diff above)"
fi
phase "release archives, krew manifest, krew install"
make -s krew-validate krew-install-test

phase "all tests passed"
