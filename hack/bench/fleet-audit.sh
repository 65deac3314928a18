#!/usr/bin/env bash
# Benchmark of the fleet audit, `kubectl mesh iptables audit -n NS`, over PODS pods
# real istiod injected (default 50, their proxies asking for 10m CPU and 32Mi
# through Istio's sidecar.istio.io/proxyCPU and proxyMemory annotations, so
# that the local 2-core node holds them), beside
# reading the same pods one by one with `kubectl mesh iptables POD --via node`
# (one node pod each) for the first FEW of them, in the same run: median of
# RUNS each, time per pod, node pods created (must be 1 per node) and
# ephemeral containers added (must be 0). The cluster is brought up if
# needed; the benchmark's namespace is deleted at the end. A failed run
# stops the benchmark.
#   SYNTH=N (default 1000) then measures the node side at a scale the node
#   cannot hold as pods: N network namespaces made on the node (each a
#   process in a cgroup named by a made-up container ID, with the rules of
#   an Istio pod loaded), read by the real node pod (hack/bench/fleetsynth),
#   then removed. SYNTH=0 skips it.
#   BASELINE=BIN also times the audit with another build of kubectl-mesh
#   in the same runs (median, and the fastest and slowest run).
#   CHECK=1 exits 1 when a goal of issue #30 is missed.
# The runs start once the machine is quiet after the rollout (CPU use over
# 5 s below 50 %, waited for at most 5 minutes).
set -euo pipefail
. "$(dirname "$0")/../cluster/lib.sh"
PODS=${PODS:-100} RUNS=${RUNS:-3} FEW=${FEW:-5} SYNTH=${SYNTH:-1000} CHECK=${CHECK:-0}
bench_cluster
NS=bench-fleet
# A previous run's namespace may still be going away.
"$KUBECTL" wait --for=delete "namespace/$NS" --timeout=300s >/dev/null 2>&1 || true
"$KUBECTL" create namespace "$NS" >/dev/null
trap '"$KUBECTL" delete namespace "$NS" --wait=false >/dev/null' EXIT
"$KUBECTL" label namespace "$NS" istio-injection=enabled >/dev/null
"$KUBECTL" -n "$NS" create deployment web --image="$TEST_IMAGE" --replicas=0 -- sleep 36000 >/dev/null
"$KUBECTL" -n "$NS" patch deployment web -p '{"spec": {"template": {"metadata": {"annotations": {"sidecar.istio.io/proxyCPU": "5m", "sidecar.istio.io/proxyMemory": "16Mi"}}, "spec": {"containers": [{"name": "mesh-test", "imagePullPolicy": "Never", "resources": {"requests": {"cpu": "1m", "memory": "4Mi"}}}]}}}}' >/dev/null
"$KUBECTL" -n "$NS" scale deployment web --replicas="$PODS" >/dev/null
"$KUBECTL" -n "$NS" rollout status deployment/web --timeout=600s >/dev/null
log "$PODS pods running"
# Measure the steady state, not the pods' start: their proxies fetch
# certificates and istiod pushes every new endpoint to every proxy, which
# keeps the 2 cores busy for a minute or more after the rollout. Wait until
# the machine's CPU use over 5 s falls below 50 % (at most 5 minutes).
busy() { local a b; a=($(head -1 /proc/stat)); sleep 5; b=($(head -1 /proc/stat))
  awk -v i1="${a[4]}" -v i2="${b[4]}" -v t1="$(IFS=+; echo "$(( ${a[*]:1} ))")" -v t2="$(IFS=+; echo "$(( ${b[*]:1} ))")" 'BEGIN { printf "%.0f", 100 * (1 - (i2 - i1) / (t2 - t1)) }'; }
for _ in $(seq 60); do b=$(busy); [ "$b" -lt 50 ] && break; done
log "the node is quiet enough to measure: CPU ${b}% busy over 5 s"

median() { sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
time_it() { local s e; s=$(date +%s.%N); "$@" >/dev/null 2>/tmp/kmesh-bench.err || die "failed: $(tail -3 /tmp/kmesh-bench.err)"; e=$(date +%s.%N); awk -v s="$s" -v e="$e" 'BEGIN { printf "%.3f\n", e - s }'; }
audit=(); single=(); base=()
# A baseline built before the audit was its own command (iptables audit)
# ran it as `iptables -n NS`.
baseline_audit=(iptables audit)
if [ -n "${BASELINE:-}" ] && ! "$BASELINE" iptables --help 2>/dev/null | grep -q 'iptables audit'; then baseline_audit=(iptables); fi
all=$("$KUBECTL" -n "$NS" get pods -o name) # whole, then cut: head would end kubectl early (pipefail)
pods=$(printf '%s\n' "$all" | sed -n "1,${FEW}p" | cut -d/ -f2)
for _ in $(seq "$RUNS"); do
  audit+=("$(time_it "$MESH" iptables audit -n "$NS" -o json)")
  [ -z "${BASELINE:-}" ] || base+=("$(time_it "$BASELINE" "${baseline_audit[@]}" -n "$NS" -o json)")
  for p in $pods; do single+=("$(time_it "$MESH" iptables -n "$NS" "$p" --via node)"); done
done
a=$(printf '%s\n' "${audit[@]}" | median); s=$(printf '%s\n' "${single[@]}" | median)
lines=$("$MESH" iptables audit -n "$NS" -o json | jq '.items | length')
drift=$("$MESH" iptables audit -n "$NS" -o json | jq '[.items[] | select(.drift == true or .error != null)] | length')
eph=$("$KUBECTL" -n "$NS" get pods -o json | jq '[.items[].spec.ephemeralContainers // [] | length] | add')
left=$("$KUBECTL" get pods -A -l kubectl-mesh.io/nsexec --no-headers 2>/dev/null | wc -l)
echo "== $PODS injected pods on 1 node; median of $RUNS runs"
printf '%-52s %8.2f s  (%.0f ms per pod)\n' "kubectl mesh iptables audit -n $NS (fleet audit)" "$a" "$(awk -v a="$a" -v n="$lines" 'BEGIN { print a * 1000 / n }')"
printf '%-52s %8.2f s  (one node pod per pod)\n' "kubectl mesh iptables POD --via node (each of $FEW)" "$s"
if [ -n "${BASELINE:-}" ]; then
  b=$(printf '%s\n' "${base[@]}" | median)
  printf '%-52s %8.2f s  (%.0f ms per pod; runs %s)\n' "$(basename "$BASELINE") ${baseline_audit[*]} -n $NS (baseline)" "$b" \
    "$(awk -v a="$b" -v n="$lines" 'BEGIN { print a * 1000 / n }')" "$(printf '%s\n' "${base[@]}" | sort -n | tr '\n' ' ' | sed 's/ $//')"
fi
awk -v a="$a" -v s="$s" -v n="$lines" 'BEGIN { printf "one by one, %d pods would take %.1f s: %.1fx the audit\n", n, s * n, s * n / a }'
echo "lines: $lines; with drift or unreadable: $drift; ephemeral containers added: $eph; node pods left: $left"
ratio=$(awk -v a="$a" -v s="$s" -v n="$lines" 'BEGIN { printf "%.1f", s * n / a }')
per=$(awk -v a="$a" -v n="$lines" 'BEGIN { printf "%.0f", a * 1000 / n }')
missed=()
[ "$per" -le 30 ] || missed+=("$per ms per pod (goal ≤ 30)")
awk -v r="$ratio" 'BEGIN { exit !(r >= 25) }' || missed+=("one node pod per pod ÷ audit $ratio (goal ≥ 25)")
[ "$left" -eq 0 ] && [ "$eph" -eq 0 ] || missed+=("left behind: $left node pods, $eph ephemeral containers")

if [ "$SYNTH" -gt 0 ]; then
  # N network namespaces on the node, each a process in a cgroup named by a
  # made-up 64-hex container ID, with an Istio pod's rules loaded.
  node=$("$KUBECTL" get nodes -o jsonpath='{.items[0].metadata.name}')
  # cgroup v2's hierarchy, or v1's pids controller.
  cg=/sys/fs/cgroup/pids/kmesh-synth
  [ ! -f /sys/fs/cgroup/cgroup.controllers ] || cg=/sys/fs/cgroup/kmesh-synth
  work=$(mktemp -d)
  synth_clean() {
    [ -f "$work/pids" ] && xargs -r kill < "$work/pids" 2>/dev/null || true
    sleep 0.5
    for d in "$cg"/*/; do [ -d "$d" ] && rmdir "$d" 2>/dev/null || true; done
    rmdir "$cg" 2>/dev/null || true
    rm -rf "$work"
  }
  trap 'synth_clean; "$KUBECTL" delete namespace "$NS" --wait=false >/dev/null' EXIT
  mkdir -p "$cg"
  rules=$REPO_ROOT/explain/capture/testdata/istio-default.nft.save
  log "making $SYNTH network namespaces on $node"
  host_net=$(readlink /proc/self/ns/net)
  for i in $(seq "$SYNTH"); do
    id=$(od -An -N32 -tx1 /dev/urandom | tr -d ' \n')
    unshare -n sleep 36000 &
    pid=$!
    echo "$pid" >> "$work/pids"
    # unshare enters its new namespace a moment after it starts: never
    # load the rules before it has (they would land in the host's).
    for _ in $(seq 1000); do
      ns=$(readlink "/proc/$pid/ns/net" 2>/dev/null || true)
      [ -z "$ns" ] || [ "$ns" = "$host_net" ] || break
      sleep 0.01
    done
    [ -n "$ns" ] && [ "$ns" != "$host_net" ] || die "process $pid never left the host's network namespace"
    mkdir "$cg/$id"
    echo "$pid" > "$cg/$id/cgroup.procs"
    grep -v '^#' "$rules" | nsenter -t "$pid" -n iptables-nft-restore
    echo "$id" >> "$work/ids"
  done
  go build -o "$OUT_BIN/fleetsynth" ./hack/bench/fleetsynth
  synth=()
  for _ in $(seq "$RUNS"); do
    synth+=("$("$OUT_BIN/fleetsynth" -kubeconfig "$KUBECONFIG" -node "$node" -ids "$work/ids" -image "$TEST_IMAGE")")
  done
  sec=$(printf '%s\n' "${synth[@]}" | jq -r .seconds | median)
  echo "== $SYNTH network namespaces on one node, read by one node pod; median of $RUNS runs"
  printf '%s\n' "${synth[@]}" | jq -c '{namespaces, seconds: (.seconds * 100 | round / 100), msPerNamespace: (.msPerNamespace | round), unreadable, withRules}'
  printf '%-52s %8.2f s\n' "$SYNTH namespaces (goal ≤ 15 s)" "$sec"
  awk -v s="$sec" 'BEGIN { exit !(s <= 15) }' || missed+=("$SYNTH namespaces in $sec s (goal ≤ 15)")
  bad=$(printf '%s\n' "${synth[@]}" | jq -s '[.[] | .unreadable + (.namespaces - .withRules)] | max')
  [ "$bad" -eq 0 ] || missed+=("$bad synthetic namespaces unreadable or without their rules")
  left=$("$KUBECTL" get pods -A -l kubectl-mesh.io/nsexec --no-headers 2>/dev/null | wc -l)
  [ "$left" -eq 0 ] || missed+=("$left node pods left")
fi
if [ "${#missed[@]}" -gt 0 ]; then
  printf 'goal missed: %s\n' "${missed[@]}"
  [ "$CHECK" != 1 ] || exit 1
else
  echo "every goal met"
fi
