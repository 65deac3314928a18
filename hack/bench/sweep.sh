#!/usr/bin/env bash
# Benchmark of the cluster sweeps, `kubectl mesh why-injected -A` (JSON and
# table), `kubectl mesh startup -A -o json` and `kubectl mesh diagnose -A -o
# json`, on the local cluster filled by
# hack/bench/mkpods (10,000 pods in 500 namespaces; pods owned by ReplicaSets,
# unscheduled, half shaped as Istio leaves an injected pod), beside the
# floors, all in the same run:
#   raw          kubectl get --raw /api/v1/pods: what a user can run to read
#                every pod (JSON, one response, not decoded) — the goals'
#                reference;
#   like-for-like  hack/bench/listfloor reading the pods exactly as
#                kubectl-mesh does (protobuf, streamed where the apiserver
#                allows, else in 1,000-pod pages), decoded, then dropped;
#   protobuf     listfloor: protobuf, one response, decoded (the physical floor).
# Each round runs every command once, in turn, so that a slow moment of the
# machine hits them alike; RUNS rounds (default 7). Prints, per command, the
# median wall time, min–max, the largest peak RSS, and the median's ratio to
# raw and to like-for-like. A failed run stops the benchmark.
#
#   SCALE=100k    then adds 90,000 pods (1,500 more namespaces; 100,000 in
#                 2,000) and measures again: the time per 10k pods, and RSS.
#   BASELINE=bin  also measures an older kubectl-mesh build (A/B).
#   VERIFY=1      also why-injected -A --verify -o json (long: dry runs).
#   CHECK=1       exit 1 when a goal (issues #14, #18, #42) is missed (make bench).
#   KEEP=1        leaves the pods there (the next run uses the 10k state again).
# The cluster is brought up if needed; the benchmark's namespaces are deleted
# at the end.
set -euo pipefail
. "$(dirname "$0")/../cluster/lib.sh"
RUNS=${RUNS:-7} SCALE=${SCALE:-10k} CHECK=${CHECK:-0}
bench_cluster
# The commit the measured binary was built from (bench_cluster built it now).
built=$(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . ':!README.md' || echo -dirty)
go build -o "$OUT_BIN/listfloor" ./hack/bench/listfloor
FLOOR=$OUT_BIN/listfloor
minor=$("$KUBECTL" version -o json | jq -r '.serverVersion.minor' | tr -dc 0-9)
# kubectl-mesh streams the pods where the apiserver allows it (1.34 on).
if [ "$minor" -ge 34 ]; then like=(-proto -watch); like_what="protobuf stream"; else like=(-proto -limit 1000); like_what="protobuf, 1,000-pod pages"; fi

pods_now() { "$KUBECTL" get --raw '/api/v1/pods?limit=1' | jq -r '(.metadata.remainingItemCount // 0) + (.items | length)'; }
# bench_state PREFIX: the pods in the benchmark's namespaces named PREFIX…
# and how many of those namespaces are terminating ("PODS TERMINATING").
bench_state() {
  local pods terminating
  pods=$("$KUBECTL" get pods -A --no-headers -o custom-columns=NS:.metadata.namespace | grep -c "^$1" || true)
  terminating=$("$KUBECTL" get namespaces --no-headers -o custom-columns=NAME:.metadata.name,PHASE:.status.phase | grep "^$1" | grep -c Terminating || true)
  echo "$pods $terminating"
}
# want_state PREFIX PODS: stop unless exactly PODS pods are there, in
# namespaces none of which is terminating: a benchmark of another state
# (an earlier run's cleanup still under way) measures nothing it claims.
want_state() {
  local pods terminating
  read -r pods terminating < <(bench_state "$1")
  [ "$pods" = "$2" ] && [ "$terminating" = 0 ] ||
    die "the benchmark's state is not there: $pods pods in $1* namespaces ($terminating terminating), want $2"
}
# A state left by KEEP=1 is used again, when it is whole.
if [ "$(bench_state 'bench-[0-9]')" = "10000 0" ] && ! "$KUBECTL" get namespace bench-x000 >/dev/null 2>&1; then
  log "using the 10k state already there"
else
  go run ./hack/bench/mkpods -delete >&2
  # Namespaces an earlier cleanup left terminating go first.
  for _ in $(seq 120); do [ "$(bench_state bench-)" = "0 0" ] && break; sleep 5; done
  go run ./hack/bench/mkpods -namespaces 500 -pods 20 >&2
fi
want_state 'bench-[0-9]' 10000
[ "${KEEP:-0}" = 1 ] || trap 'go run ./hack/bench/mkpods -delete >&2' EXIT

declare -A WALLS RSS MED
# one KEY COMMAND…: run once, record wall seconds and peak RSS (KiB).
# diagnose exits 4 when it finds a problem and 3 when an answer is unknown:
# both are answers.
one() {
  local key=$1 rc=0; shift
  /usr/bin/time -f '%e %M' -o /tmp/kmesh-bench.time "$@" > /dev/null 2>/tmp/kmesh-bench.err || rc=$?
  case "$key:$rc" in
    *:0 | *diagnose:3 | *diagnose:4) ;;
    *) die "$key failed (exit $rc): $(tail -3 /tmp/kmesh-bench.err)" ;;
  esac
  # (GNU time writes "Command exited with non-zero status N" first then.)
  read -r wall rss < <(tail -n 1 /tmp/kmesh-bench.time)
  WALLS[$key]+="$wall "
  [ "${RSS[$key]:-0}" -ge "$rss" ] || RSS[$key]=$rss
}
# report STATE KEY LABEL: median, min–max, peak RSS, ratios.
report() {
  local state=$1 key=$2 label=$3 med min max
  read -r med min max < <(printf '%s\n' ${WALLS[$key]} | sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)], a[1], a[NR] }')
  MED[$state.$key]=$med
  awk -v l="$label" -v m="$med" -v lo="$min" -v hi="$max" -v r="$(( RSS[$key] / 1024 ))" -v raw="${MED[$state.raw]:-$med}" -v like="${MED[$state.like]:-$med}" \
    'BEGIN { printf "| %s | %.2f s | %.2f–%.2f | %d MiB | %.2f | %.2f |\n", l, m, lo, hi, r, m / raw, m / like }'
}
failed=0
goal() { # WHAT OK
  if [ "$2" = 1 ]; then echo "  goal met: $1"; else echo "  GOAL MISSED: $1"; failed=1; fi
}

measure_state() { # STATE
  local state=$1 total; total=$(pods_now)
  WALLS=(); RSS=()
  log "measuring $total pods, $RUNS rounds"
  for _ in $(seq "$RUNS"); do
    one raw "$KUBECTL" get --raw /api/v1/pods
    one like "$FLOOR" "${like[@]}"
    one proto "$FLOOR" -proto
    one json "$MESH" why-injected -A -o json
    one table "$MESH" why-injected -A
    one startup "$MESH" startup -A -o json
    one diagnose "$MESH" diagnose -A -o json
    if [ -n "${BASELINE:-}" ]; then
      one base-json "$BASELINE" why-injected -A -o json
      one base-table "$BASELINE" why-injected -A
      one base-startup "$BASELINE" startup -A -o json
      one base-diagnose "$BASELINE" diagnose -A -o json
    fi
  done
  echo
  echo "== $state: $total pods; Kubernetes 1.$minor; median of $RUNS rounds; kubectl-mesh built from $built"
  echo
  echo "| command | median | min–max | peak RSS | × raw | × like-for-like |"
  echo "|---|---|---|---|---|---|"
  report "$state" raw 'kubectl get --raw /api/v1/pods (raw)'
  report "$state" like "listfloor ${like[*]} (like-for-like: $like_what)"
  report "$state" proto 'listfloor -proto (protobuf, one response)'
  report "$state" json 'kubectl mesh why-injected -A -o json'
  report "$state" table 'kubectl mesh why-injected -A (table)'
  report "$state" startup 'kubectl mesh startup -A -o json'
  report "$state" diagnose 'kubectl mesh diagnose -A -o json'
  if [ -n "${BASELINE:-}" ]; then
    report "$state" base-json 'baseline why-injected -A -o json'
    report "$state" base-table 'baseline why-injected -A (table)'
    report "$state" base-startup 'baseline startup -A -o json'
    report "$state" base-diagnose 'baseline diagnose -A -o json'
  fi
  echo
  local raw=${MED[$state.raw]} limit=$2
  goal "why-injected -A -o json ≤ 1.3 × raw" "$(awk -v a="${MED[$state.json]}" -v b="$raw" 'BEGIN { print (a <= 1.3 * b) }')"
  goal "why-injected -A (table) ≤ 1.3 × raw" "$(awk -v a="${MED[$state.table]}" -v b="$raw" 'BEGIN { print (a <= 1.3 * b) }')"
  goal "startup -A -o json ≤ 1.2 × raw" "$(awk -v a="${MED[$state.startup]}" -v b="$raw" 'BEGIN { print (a <= 1.2 * b) }')"
  goal "diagnose -A -o json ≤ 1.15 × why-injected -A -o json ($(awk -v a="${MED[$state.diagnose]}" -v b="${MED[$state.json]}" 'BEGIN { printf "%.2f×", a / b }'))" \
    "$(awk -v a="${MED[$state.diagnose]}" -v b="${MED[$state.json]}" 'BEGIN { print (a <= 1.15 * b) }')"
  for k in json table startup diagnose; do
    goal "$k peak RSS $(( RSS[$k] / 1024 )) MiB ≤ $limit MiB" "$(( RSS[$k] / 1024 <= limit ))"
  done
}

measure_state 10k 100
requests=$("$MESH" why-injected -A -o json -v=6 2>&1 >/dev/null | grep -c '"Response"' || true)
echo "API requests of why-injected -A -o json: $requests"
# kubectl's own JSON listing, for scale (3 runs: it is slow).
WALLS=(); RSS=()
for _ in 1 2 3; do one kubectl "$KUBECTL" get pods -A -o json; done
echo "| kubectl get pods -A -o json (3 runs) | $(printf '%s\n' ${WALLS[kubectl]} | sort -n | sed -n 2p) s | | $(( RSS[kubectl] / 1024 )) MiB | | |"

if [ "${VERIFY:-0}" = 1 ]; then
  WALLS=(); RSS=()
  one verify "$MESH" why-injected -A --verify -o json
  v6=$("$MESH" why-injected -A --verify -o json -v=6 2>&1 >/dev/null | grep '"Response"')
  echo "why-injected -A --verify -o json: ${WALLS[verify]} s, $(( RSS[verify] / 1024 )) MiB; $(grep -c 'dryRun=All' <<<"$v6") dry-run creates, $(grep -c '/replicasets/' <<<"$v6") controller reads, $(grep -c 'selfsubjectaccessreviews' <<<"$v6") access checks"
fi

if [ "$SCALE" = 100k ]; then
  go run ./hack/bench/mkpods -namespaces 1500 -pods 60 -prefix bench-x >&2
  want_state bench- 100000
  measure_state 100k 150
  for k in raw json table startup; do
    goal "$k: 100k time ≤ 11 × 10k time ($(awk -v a="${MED[100k.$k]}" -v b="${MED[10k.$k]}" 'BEGIN { printf "%.1f×", a / b }'))" \
      "$(awk -v a="${MED[100k.$k]}" -v b="${MED[10k.$k]}" 'BEGIN { print (a <= 11 * b) }')"
  done
fi
if [ "$CHECK" = 1 ] && [ "$failed" = 1 ]; then die "a goal was missed"; fi
