#!/usr/bin/env bash
# Benchmark of `kubectl mesh why-injected -A` on the local cluster with
# 10,000 pods in 500 namespaces (hack/bench/mkpods; each app's pods owned by a
# ReplicaSet), with --verify too, beside the floor (only
# reading the pods: kubectl get --raw /api/v1/pods) and kubectl get pods -A
# -o json, in the same run. Prints wall time (median of RUNS) and peak RSS
# of each, and the API requests why-injected makes. BASELINE=path/to/an/older
# kubectl-mesh measures that build too, in the same run (A/B). The cluster is
# brought up if needed; the benchmark's namespaces are deleted at the end.
set -euo pipefail
. "$(dirname "$0")/../cluster/lib.sh"
NAMESPACES=${NAMESPACES:-500} PODS=${PODS:-20} RUNS=${RUNS:-5}
bench_cluster
go run ./hack/bench/mkpods -namespaces "$NAMESPACES" -pods "$PODS" >&2
trap 'go run ./hack/bench/mkpods -delete >&2' EXIT
total=$("$KUBECTL" get --raw '/api/v1/pods?limit=1' | jq -r '.metadata.remainingItemCount + 1')
log "cluster holds $total pods"

declare -A WALL
measure() { # KEY NAME COMMAND… : median wall seconds and max peak RSS (MiB) over RUNS
  local key=$1 name=$2; shift 2
  local walls=() peak=0
  for _ in $(seq "$RUNS"); do
    # A failed run is not a time: the benchmark stops.
    /usr/bin/time -f '%e %M' -o /tmp/kmesh-bench.time "$@" > /dev/null 2>/tmp/kmesh-bench.err ||
      die "$name failed: $(tail -3 /tmp/kmesh-bench.err)"
    read -r wall rss < /tmp/kmesh-bench.time
    walls+=("$wall"); [ "$rss" -gt "$peak" ] && peak=$rss
  done
  median=$(printf '%s\n' "${walls[@]}" | sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }')
  printf '%-44s %8.2f s %8.0f MiB\n' "$name" "$median" "$((peak / 1024))"
  WALL[$key]=$median
}
echo "== $total pods in $NAMESPACES namespaces; median of $RUNS runs"
measure floor "kubectl get --raw /api/v1/pods (floor)" "$KUBECTL" get --raw /api/v1/pods
measure kubectl "kubectl get pods -A -o json" "$KUBECTL" get pods -A -o json
measure json "kubectl mesh why-injected -A -o json" "$MESH" why-injected -A -o json
measure table "kubectl mesh why-injected -A (table)" "$MESH" why-injected -A
if [ -n "${BASELINE:-}" ]; then
  measure base-json "baseline why-injected -A -o json" "$BASELINE" why-injected -A -o json
  measure base-table "baseline why-injected -A (table)" "$BASELINE" why-injected -A
fi
requests=$("$MESH" why-injected -A -o json -v=6 2>&1 >/dev/null | grep -c '"Response"' || true)
echo "API requests of why-injected -A -o json: $requests"
measure verify "kubectl mesh why-injected -A --verify -o json" "$MESH" why-injected -A --verify -o json
v6=$("$MESH" why-injected -A --verify -o json -v=6 2>&1 >/dev/null)
# Requests made (their "Response" lines; -v=6 also logs client-side throttling waits).
v6=$(grep '"Response"' <<<"$v6")
echo "why-injected -A --verify: $(grep -c 'dryRun=All' <<<"$v6") dry-run creates, $(grep -c '/replicasets/' <<<"$v6") controller reads, $(grep -c 'selfsubjectaccessreviews' <<<"$v6") access checks, for $total pods"
keys="json table kubectl"; [ -z "${BASELINE:-}" ] || keys+=" base-json base-table"
for k in $keys; do
  awk -v f="${WALL[floor]}" -v x="${WALL[$k]}" -v k="$k" 'BEGIN { printf "%s / floor: %.2fx\n", k, x / f }'
done
