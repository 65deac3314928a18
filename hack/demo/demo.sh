#!/usr/bin/env bash
# `make demo`: brings the local cluster up if needed, with its mesh: Istio's
# charts rendered by istioctl (a default revision, a canary revision and a
# revision tag prod) and real istiod injecting, restores that mesh, deploys workloads in labelled and unlabelled namespaces, sends
# traffic through the injected ones, and runs the built kubectl-mesh against it.
set -euo pipefail
. "$(dirname "$0")/../cluster/lib.sh"
DEMO=$REPO_ROOT/hack/demo
export KUBECONFIG=$KUBECONFIG_ADMIN
export PATH=$REPO_ROOT/_output/bin:$KUBE_BIN:$PATH
say() { printf '\n\033[1m$ %s\033[0m\n' "$*" >&2; }
[ -t 2 ] && [ -z "${NO_COLOR:-}" ] || say() { printf '\n$ %s\n' "$*" >&2; }

"$HACK_DIR/up.sh"
[ -x "$REPO_ROOT/_output/bin/kubectl-mesh" ] || make -C "$REPO_ROOT" build >/dev/null

log "installing the demo mesh and workloads"
namespaces=(shop legacy payments ledger plain ambient istio-cni batch)
kubectl delete namespace "${namespaces[@]}" --ignore-not-found --wait=true --timeout=120s >/dev/null
install_mesh
kubectl apply --server-side -f "$DEMO/workloads.yaml" >/dev/null
# Ambient mode: istio-cni's ConfigMap as Istio's ambient profile renders it, in
# a namespace of its own. Its node agent cannot run here (it hands pods to
# ztunnel, which is Rust): its own rule writer does (hack/tools/istio/inpod,
# from Istio's module) in an init container of ambient-app, with the
# ConfigMap's settings; a stand-in carries the agent's labels on the node
# (its image, the proxy image, has the iptables tools); and the pod is
# annotated as the agent annotates a pod no ztunnel has taken: pending.
release=$(istio_release)
kubectl create namespace istio-cni --dry-run=client -o yaml | kubectl apply -f - >/dev/null
"$ISTIO_BIN/istioctl" manifest generate --set profile=ambient 2>/dev/null |
  awk '/^---/ { if (doc ~ /\nkind: ConfigMap\n/ && doc ~ /\n  name: istio-cni-config\n/) print "---\n" doc; doc = ""; next } { doc = doc $0 "\n" }
       END { if (doc ~ /\nkind: ConfigMap\n/ && doc ~ /\n  name: istio-cni-config\n/) print "---\n" doc }' |
  sed 's/^  namespace: istio-system$/  namespace: istio-cni/' | kubectl apply --server-side -f - >/dev/null
dns=$(kubectl -n istio-cni get configmap istio-cni-config -o jsonpath='{.data.AMBIENT_DNS_CAPTURE}')
ipv6=$(kubectl -n istio-cni get configmap istio-cni-config -o jsonpath='{.data.AMBIENT_IPV6}')
kubectl -n istio-cni run istio-cni-node-standin --image="$PROXY_IMAGE_REPO:$release" --image-pull-policy=Never \
  --labels=k8s-app=istio-cni-node,istio.io/dataplane-mode=none,sidecar.istio.io/inject=false --command -- sleep infinity >/dev/null
kubectl -n ambient patch deploy ambient-app --type=json -p "$(cat <<JSON
[{"op": "add", "path": "/spec/template/spec/volumes", "value": [{"name": "istio-bin", "hostPath": {"path": "$ISTIO_BIN", "type": "Directory"}}]},
 {"op": "add", "path": "/spec/template/spec/initContainers", "value": [{"name": "inpod", "image": "$PROXY_IMAGE_REPO:$release",
  "imagePullPolicy": "Never", "command": ["/istio-bin/inpod", "-dns=$dns", "-ipv6=$ipv6"],
  "volumeMounts": [{"name": "istio-bin", "mountPath": "/istio-bin", "readOnly": true}],
  "securityContext": {"runAsUser": 0, "capabilities": {"add": ["NET_ADMIN", "NET_RAW"]}}}]}]
JSON
)" >/dev/null
# billing's pod exists before its namespace is labelled: it stays without a sidecar.
kubectl -n legacy rollout status deploy/billing --timeout=120s >/dev/null
kubectl label namespace legacy istio-injection=enabled --overwrite >/dev/null
for d in shop/backend shop/frontend shop/debug-tools payments/payments-api ledger/ledger plain/reports plain/metrics ambient/ambient-app batch/importer; do
  kubectl -n "${d%/*}" rollout status "deploy/${d#*/}" --timeout=120s >/dev/null
done
# The pod of the patched template (the first one may still be terminating).
ambient=$(kubectl -n ambient get pod -l app=ambient-app --field-selector=status.phase=Running \
  -o jsonpath='{range .items[?(@.spec.initContainers[0].name=="inpod")]}{.metadata.name}{"\n"}{end}' | head -1)
kubectl -n ambient patch pod "$ambient" --subresource=status --type=merge -p '{"metadata":{"annotations":{"ambient.istio.io/redirection":"pending"}}}' >/dev/null
backend=$(kubectl -n shop get pod -l app=backend -o jsonpath='{.items[0].status.podIP}')
kubectl -n shop set env deploy/frontend BACKEND="$backend" >/dev/null
kubectl -n shop rollout status deploy/frontend --timeout=120s >/dev/null
log "frontend calls backend ($backend:8080) every 2s through both sidecars"

say "kubectl get pods -A -o custom-columns=…  # init containers, containers, istio.io/rev"
kubectl get pods -A -o custom-columns='NAMESPACE:.metadata.namespace,POD:.metadata.name,STATUS:.status.phase,INIT:.spec.initContainers[*].name,CONTAINERS:.spec.containers[*].name,REVISION:.metadata.annotations.istio\.io/rev' |
  grep -v '^istio-system'
say "kubectl mesh diagnose --list-checks   # the catalogue: every check, its code, stage and istioctl analyze code"
kubectl mesh diagnose --list-checks
say "kubectl mesh diagnose -A   # every pod, worst first: what is wrong, and which check found it"
kubectl mesh diagnose -A || true # exits 4: a problem was found
broken=$(kubectl -n shop get pod -l app=broken-init -o jsonpath='{.items[0].metadata.name}')
say "kubectl mesh diagnose -n shop $broken"
kubectl mesh diagnose -n shop "$broken" || true
say "kubectl mesh diagnose -n shop deploy/no-account   # a workload with no pod: its controller's own account"
kubectl mesh diagnose -n shop deploy/no-account || true
typo=$(kubectl -n shop get pod -l app=image-typo -o jsonpath='{.items[0].metadata.name}')
say "kubectl mesh diagnose -n shop $typo   # a container the kubelet cannot start"
kubectl mesh diagnose -n shop "$typo" || true
say "kubectl mesh why-injected -A"
kubectl mesh why-injected -A || true
reports=$(kubectl -n plain get pod -l app=reports -o jsonpath='{.items[0].metadata.name}')
say "kubectl mesh why-injected -n plain $reports"
kubectl mesh why-injected -n plain "$reports" || true
say "kubectl mesh why-injected -n payments deploy/payments-api -o json | jq '.items[0] | {injected, expected, revision, webhook, sidecar, verdict}'"
kubectl mesh why-injected -n payments deploy/payments-api -o json | jq '.items[0] | {injected, expected, revision, webhook, sidecar, verdict}'
frontend=$(kubectl -n shop get pod -l app=frontend --field-selector=status.phase=Running -o jsonpath='{.items[0].metadata.name}')
say "kubectl mesh diagnose -n shop $frontend --connections   # its live rules and flows too"
kubectl mesh diagnose -n shop "$frontend" --connections || true
say "kubectl mesh iptables -n shop $frontend --via node --interval 6s --trace out:$backend:8080"
kubectl mesh iptables -n shop "$frontend" --via node --interval 6s --trace "out:$backend:8080" || true
say "kubectl mesh diagnose -n ambient $ambient"
kubectl mesh diagnose -n ambient "$ambient" || true
say "kubectl mesh why-injected -n ambient $ambient"
kubectl mesh why-injected -n ambient "$ambient" || true
say "kubectl mesh iptables -n ambient $ambient --trace out:$backend:8080"
kubectl mesh iptables -n ambient "$ambient" --trace "out:$backend:8080" || true
say "kubectl mesh startup -A"
kubectl mesh startup -A || true
say "kubectl mesh startup -n shop deploy/broken-init"
kubectl mesh startup -n shop deploy/broken-init || true
say "kubectl mesh why-injected -n shop deploy/refused-at-admission"
kubectl mesh why-injected -n shop deploy/refused-at-admission || true
say "kubectl mesh upgrade-plan --to canary -n batch   # before a canary move: what each workload becomes, and whether it starts"
kubectl mesh upgrade-plan --to canary -n batch || true
say "kubectl mesh upgrade-plan --to canary -n shop"
kubectl mesh upgrade-plan --to canary -n shop || true
cat >&2 <<TXT

The demo mesh is running. To use it from this shell:
  export KUBECONFIG=$KUBECONFIG_ADMIN PATH=$REPO_ROOT/_output/bin:$KUBE_BIN:\$PATH
  kubectl mesh --help
Stop the cluster with: make cluster-down
TXT
