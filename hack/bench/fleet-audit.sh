#!/usr/bin/env bash
# Benchmark of the fleet audit, `kubectl mesh iptables -n NS`, over PODS pods
# real istiod injected (default 50, their proxies asking for 10m CPU and 32Mi
# through Istio's sidecar.istio.io/proxyCPU and proxyMemory annotations, so
# that the local 2-core node holds them), beside
# reading the same pods one by one with `kubectl mesh iptables POD --via node`
# (one node pod each) for the first FEW of them, in the same run: median of
# RUNS each, time per pod, node pods created (must be 1 per node) and
# ephemeral containers added (must be 0). The cluster is brought up if
# needed; the benchmark's namespace is deleted at the end. A failed run
# stops the benchmark.
set -euo pipefail
. "$(dirname "$0")/../cluster/lib.sh"
PODS=${PODS:-50} RUNS=${RUNS:-3} FEW=${FEW:-5}
bench_cluster
NS=bench-fleet
"$KUBECTL" create namespace "$NS" >/dev/null
trap '"$KUBECTL" delete namespace "$NS" --wait=false >/dev/null' EXIT
"$KUBECTL" label namespace "$NS" istio-injection=enabled >/dev/null
"$KUBECTL" -n "$NS" create deployment web --image="$TEST_IMAGE" --replicas=0 -- sleep 36000 >/dev/null
"$KUBECTL" -n "$NS" patch deployment web -p '{"spec": {"template": {"metadata": {"annotations": {"sidecar.istio.io/proxyCPU": "10m", "sidecar.istio.io/proxyMemory": "32Mi"}}, "spec": {"containers": [{"name": "mesh-test", "imagePullPolicy": "Never"}]}}}}' >/dev/null
"$KUBECTL" -n "$NS" scale deployment web --replicas="$PODS" >/dev/null
"$KUBECTL" -n "$NS" rollout status deployment/web --timeout=600s >/dev/null
log "$PODS pods running"

median() { sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
time_it() { local s e; s=$(date +%s.%N); "$@" >/dev/null 2>/tmp/kmesh-bench.err || die "failed: $(tail -3 /tmp/kmesh-bench.err)"; e=$(date +%s.%N); awk -v s="$s" -v e="$e" 'BEGIN { printf "%.3f\n", e - s }'; }
audit=(); single=()
all=$("$KUBECTL" -n "$NS" get pods -o name) # whole, then cut: head would end kubectl early (pipefail)
pods=$(printf '%s\n' "$all" | sed -n "1,${FEW}p" | cut -d/ -f2)
for _ in $(seq "$RUNS"); do
  audit+=("$(time_it "$MESH" iptables -n "$NS" -o json)")
  for p in $pods; do single+=("$(time_it "$MESH" iptables -n "$NS" "$p" --via node)"); done
done
a=$(printf '%s\n' "${audit[@]}" | median); s=$(printf '%s\n' "${single[@]}" | median)
lines=$("$MESH" iptables -n "$NS" -o json | jq '.items | length')
drift=$("$MESH" iptables -n "$NS" -o json | jq '[.items[] | select(.drift == true or .error != null)] | length')
eph=$("$KUBECTL" -n "$NS" get pods -o json | jq '[.items[].spec.ephemeralContainers // [] | length] | add')
left=$("$KUBECTL" get pods -A -l kubectl-mesh.io/nsexec --no-headers 2>/dev/null | wc -l)
echo "== $PODS injected pods on 1 node; median of $RUNS runs"
printf '%-52s %8.2f s  (%.0f ms per pod)\n' "kubectl mesh iptables -n $NS (fleet audit)" "$a" "$(awk -v a="$a" -v n="$lines" 'BEGIN { print a * 1000 / n }')"
printf '%-52s %8.2f s  (one node pod per pod)\n' "kubectl mesh iptables POD --via node (each of $FEW)" "$s"
awk -v a="$a" -v s="$s" -v n="$lines" 'BEGIN { printf "one by one, %d pods would take %.1f s: %.1fx the audit\n", n, s * n, s * n / a }'
echo "lines: $lines; with drift or unreadable: $drift; ephemeral containers added: $eph; node pods left: $left"
