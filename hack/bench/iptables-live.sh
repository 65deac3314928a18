#!/usr/bin/env bash
# Benchmark: end-to-end time of `kubectl mesh iptables POD` (ephemeral
# container, dump, explanation) beside what a user does by hand on the same
# pod in the same run: `kubectl debug … -- iptables-save -c`, then waiting
# for it and `kubectl logs`. Median of RUNS each. The cluster is brought up
# if needed; the benchmark's namespace is deleted at the end.
set -euo pipefail
. "$(dirname "$0")/../cluster/lib.sh"
RUNS=${RUNS:-5}
bench_cluster
NS=bench-iptables
"$KUBECTL" create namespace "$NS" >/dev/null
trap '"$KUBECTL" delete namespace "$NS" --wait=false >/dev/null' EXIT
"$KUBECTL" label namespace "$NS" istio-injection=enabled >/dev/null
"$KUBECTL" -n "$NS" run web --image="$TEST_IMAGE" --image-pull-policy=Never --restart=Never --command -- sleep 36000 >/dev/null
"$KUBECTL" -n "$NS" wait --for=condition=Ready pod/web --timeout=120s >/dev/null
IMAGE=$("$KUBECTL" -n "$NS" get pod web -o jsonpath='{.spec.initContainers[?(@.name=="istio-proxy")].image}')

by_hand() {
  local name=dbg-$RANDOM$RANDOM
  "$KUBECTL" -n "$NS" debug web --stdin=false --tty=false --image="$IMAGE" --image-pull-policy=IfNotPresent --profile=netadmin \
    --container="$name" -- iptables-save -c >/dev/null 2>&1
  until [ -n "$("$KUBECTL" -n "$NS" get pod web -o jsonpath="{.status.ephemeralContainerStatuses[?(@.name==\"$name\")].state.terminated.reason}")" ]; do sleep 0.2; done
  "$KUBECTL" -n "$NS" logs web -c "$name" >/dev/null
}
ours() { "$MESH" -n "$NS" iptables web >/dev/null; }

median() { sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
time_it() { local s e; s=$(date +%s.%N); "$@"; e=$(date +%s.%N); awk -v s="$s" -v e="$e" 'BEGIN { printf "%.3f\n", e - s }'; }
hand=(); mesh=()
for _ in $(seq "$RUNS"); do
  hand+=("$(time_it by_hand)")
  mesh+=("$(time_it ours)")
done
h=$(printf '%s\n' "${hand[@]}" | median); m=$(printf '%s\n' "${mesh[@]}" | median)
printf 'kubectl debug … iptables-save -c + wait + kubectl logs   %6.2f s (median of %d)\n' "$h" "$RUNS"
printf 'kubectl mesh iptables POD                                %6.2f s (median of %d)\n' "$m" "$RUNS"
awk -v h="$h" -v m="$m" 'BEGIN { printf "ratio: %.2fx\n", m / h }'
