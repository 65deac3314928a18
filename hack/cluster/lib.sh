# Shared settings for the local test cluster scripts. Sourced, never run.
# Every path the harness writes to is derived here, so that down.sh can find
# and remove exactly what up.sh created.

# shellcheck shell=bash
HACK_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_ROOT=$(cd "$HACK_DIR/../.." && pwd)

# The Kubernetes lanes the project is tested on: the newest release, and the
# oldest minor whose kubelet builds from the Go module proxy (1.32's needs
# k8s.io/cri-client v0.32.x, which it does not serve). K8S_VERSION picks the
# lane a cluster runs; the newest is the default (make demo, make cluster-up).
K8S_NEWEST=v1.37.2
K8S_OLDEST=v1.33.13
K8S_VERSION=${K8S_VERSION:-$K8S_NEWEST}
# Build outputs that survive between runs (Kubernetes binaries, images).
CACHE_DIR=${KMESH_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/kubectl-mesh}
# Runtime state of the running cluster (etcd data, containerd root, PKI,
# kubeconfigs, PID files, logs). Removed by `down.sh --purge`.
STATE_DIR=${KMESH_STATE_DIR:-/var/tmp/kubectl-mesh-cluster}
RUN_DIR=$STATE_DIR/run
PID_DIR=$RUN_DIR/pids
LOG_DIR=$RUN_DIR/logs
PKI_DIR=$STATE_DIR/pki
ETC_DIR=$STATE_DIR/etc
KUBE_BIN=$CACHE_DIR/kube/$K8S_VERSION
IMAGE_DIR=$CACHE_DIR/images
# Istio's own binaries (hack/cluster/build-istio.sh), from the istio.io/istio
# version that hack/tools/istio/go.mod pins.
ISTIO_MODULE_VERSION=$(sed -n 's/^\s*istio\.io\/istio \(v[^ ]*\).*/\1/p' "$REPO_ROOT/hack/tools/istio/go.mod" 2>/dev/null | head -1)
ISTIO_BIN=$CACHE_DIR/istio/${ISTIO_MODULE_VERSION:-unpinned}
KUBECONFIG_ADMIN=$STATE_DIR/admin.kubeconfig
# etcd, built from etcd's own module (hack/cluster/build-etcd.sh) at the
# version hack/tools/etcd/go.mod pins.
ETCD_MODULE_VERSION=$(sed -n 's/^\s*go\.etcd\.io\/etcd\/server\/v3 \(v[^ ]*\).*/\1/p' "$REPO_ROOT/hack/tools/etcd/go.mod" 2>/dev/null | head -1)
ETCD_BIN=$CACHE_DIR/etcd/${ETCD_MODULE_VERSION:-unpinned}

NODE_NAME=${KMESH_NODE_NAME:-kmesh-node}
# The pod network. up.sh refuses a range that anything else on this machine
# already routes.
POD_CIDR=${KMESH_POD_CIDR:-10.213.77.0/24}
SERVICE_CIDR=${KMESH_SERVICE_CIDR:-10.213.78.0/24}
BRIDGE=kmeshcni0
CNI_NETWORK=kmeshnet
APISERVER_PORT=${KMESH_APISERVER_PORT:-6443}
ETCD_CLIENT_PORT=${KMESH_ETCD_PORT:-2379}
ETCD_PEER_PORT=$((ETCD_CLIENT_PORT + 1))
# The mesh's control plane: one real istiod (pilot-discovery) per revision,
# each a local process on loopback, the webhook of revision N on 15017+100*N
# (hack/cluster/mesh.sh renders the revisions, up.sh starts them). A revision
# tag (prod) is a webhook on its revision's istiod, not a process.
ISTIO_REVISIONS=(default canary cni)
MESH_DIR=$STATE_DIR/mesh
MESH_MANIFEST=$MESH_DIR/mesh.yaml
# istiod_port REVISION LISTENER: the loopback port of one of that revision's
# listeners (https: the webhook, grpc, sgrpc, monitoring, http, ctrlz).
istiod_port() {
  local i off=0
  for i in "${!ISTIO_REVISIONS[@]}"; do [ "${ISTIO_REVISIONS[$i]}" = "$1" ] && off=$i; done
  case $2 in
    https) echo $((15017 + 100 * off)) ;; grpc) echo $((15010 + 100 * off)) ;;
    sgrpc) echo $((15012 + 100 * off)) ;; monitoring) echo $((15014 + 100 * off)) ;;
    http) echo $((15080 + 100 * off)) ;; ctrlz) echo $((9876 + off)) ;;
    *) die "istiod_port: no listener $2" ;;
  esac
}

PAUSE_IMAGE=registry.k8s.io/pause:3.10
# The test image: busybox, iptables (nft and legacy backends) and the
# mesh stand-in binary (istio-iptables, proxy, pilot-agent).
TEST_IMAGE=kmesh.local/mesh-test:v1

CONTAINERD_SOCK=$RUN_DIR/containerd/containerd.sock

log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

# The proxyv2 image, tagged with the version of the Istio that is built
# (build-istio.sh writes it: 1.31-dev for a master snapshot), as istiod's
# injection template names it. The tag is what kubectl-mesh reads a version from.
PROXY_IMAGE_REPO=kmesh.local/istio/proxyv2
istio_release() {
  [ -s "$ISTIO_BIN/release" ] || die "no $ISTIO_BIN/release: run hack/cluster/build-istio.sh first"
  cat "$ISTIO_BIN/release"
}

# The node's address is the pod network's gateway, on the pod bridge that
# up.sh creates, so the cluster does not depend on this machine's own
# addresses or routes.
NODE_IP=${POD_CIDR%.*}.1
# Pods get this cluster DNS address in their resolv.conf; nothing serves it
# (no DNS add-on), but it is what DNS capture rules are written for.
CLUSTER_DNS=${SERVICE_CIDR%.*}.10
# Binaries of this repository the harness builds (kubectl-mesh).
OUT_BIN=$REPO_ROOT/_output/bin

# running_kubectl prints the kubectl of the Kubernetes version the running
# cluster was started with (up.sh records it), else the one of K8S_VERSION:
# kubectl supports one minor of skew, and the lanes are four apart.
running_kubectl() {
  local v
  v=$(cat "$RUN_DIR/k8s-version" 2>/dev/null || true)
  if [ -n "$v" ] && [ -x "$CACHE_DIR/kube/$v/kubectl" ]; then
    echo "$CACHE_DIR/kube/$v/kubectl"
  else
    echo "$KUBE_BIN/kubectl"
  fi
}

# install_mesh applies the mesh that up.sh rendered from Istio's charts
# ($MESH_MANIFEST: Istio's CRDs, the injector ConfigMaps and webhooks) again,
# restoring whatever a test or a user changed in it.
install_mesh() {
  [ -s "$MESH_MANIFEST" ] || die "no $MESH_MANIFEST: start the cluster with hack/cluster/up.sh"
  "$(running_kubectl)" --kubeconfig "$KUBECONFIG_ADMIN" apply --server-side --force-conflicts -f "$MESH_MANIFEST" >/dev/null
}

# bench_cluster is the benchmark scripts' start: the cluster up (if needed),
# kubectl-mesh built, the mesh applied; sets KUBECTL and MESH, and cds to
# the repository.
bench_cluster() {
  export KUBECONFIG=$KUBECONFIG_ADMIN
  KUBECTL=$(running_kubectl)
  "$HACK_DIR/up.sh" >&2
  cd "$REPO_ROOT"
  make build >/dev/null
  MESH=$REPO_ROOT/_output/bin/kubectl-mesh
  install_mesh
}
