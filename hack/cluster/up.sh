#!/usr/bin/env bash
# Starts the local single-node cluster: etcd, kube-apiserver, containerd,
# kubelet, kube-controller-manager, kube-scheduler, and the mesh: Istio's
# charts rendered and applied (mesh.sh) and one real istiod (pilot-discovery)
# per revision serving the injection webhook on loopback.
# Installs, builds and imports what is missing first. Every process is started
# in its own session, its PID recorded in $PID_DIR/<name>.pid and its output in
# $LOG_DIR/<name>.log; down.sh stops exactly those.
#
# A cluster that is already up and healthy is left as it is. Leftovers of one
# that died or was killed half way (stale PID files, bridge, netns, mounts)
# are cleared by down.sh first.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
[ "$(id -u)" = 0 ] || die "the local cluster needs root (network namespaces, mounts, iptables)"

t0=$(date +%s.%N)
elapsed() { awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1fs", b - a }'; }
step() { log "[$(elapsed)] $*"; }
export KUBECONFIG=$KUBECONFIG_ADMIN
KUBECTL=$KUBE_BIN/kubectl

"$HACK_DIR/deps.sh"
"$HACK_DIR/build-kube.sh"
"$HACK_DIR/build-etcd.sh"
"$HACK_DIR/build-istio.sh"
"$HACK_DIR/images.sh"
names=(etcd kube-apiserver containerd kubelet kube-controller-manager kube-scheduler)
for rev in "${ISTIO_REVISIONS[@]}"; do names+=("istiod-$rev"); done
alive() { [ -f "$PID_DIR/$1.pid" ] && kill -0 "$(cat "$PID_DIR/$1.pid")" 2>/dev/null; }
all_alive=1; any_state=0
for n in "${names[@]}"; do alive "$n" || all_alive=0; done
if [ -d "$RUN_DIR" ] || ip link show "$BRIDGE" >/dev/null 2>&1; then
  any_state=1
fi
running_version=$(cat "$RUN_DIR/k8s-version" 2>/dev/null || true)
if [ $all_alive = 1 ] && [ "$running_version" = "$K8S_VERSION" ] && "$KUBECTL" get --raw /readyz >/dev/null 2>&1; then
  step "cluster already up: Kubernetes $K8S_VERSION (kubeconfig: $KUBECONFIG_ADMIN)"
  # Images rebuilt since they were imported (a changed stand-in) go in now:
  # new pods use them.
  if ! cmp -s "$IMAGE_DIR/.stamp" "$RUN_DIR/images.imported" 2>/dev/null; then
    for img in pause mesh-test proxyv2; do
      ctr --address "$CONTAINERD_SOCK" -n k8s.io images import --snapshotter overlayfs "$IMAGE_DIR/$img.tar" >/dev/null
    done
    cp "$IMAGE_DIR/.stamp" "$RUN_DIR/images.imported"
    step "images rebuilt since the cluster started: imported"
  fi
  exit 0
fi
if [ $all_alive = 1 ] && [ "$running_version" != "$K8S_VERSION" ]; then
  step "the running cluster is Kubernetes ${running_version:-of unknown version}, $K8S_VERSION is asked for: restarting it"
fi
if [ $any_state = 1 ]; then
  step "clearing what an earlier cluster left behind"
  "$HACK_DIR/down.sh" >&2
fi

# Everything this cluster listens on, and its networks, must be free.
istiod_ports=()
for rev in "${ISTIO_REVISIONS[@]}"; do
  for l in https grpc sgrpc monitoring http ctrlz; do istiod_ports+=("$(istiod_port "$rev" "$l")"); done
done
for port in "$ETCD_CLIENT_PORT" "$ETCD_PEER_PORT" "$APISERVER_PORT" 10248 10250 10257 10259 "${istiod_ports[@]}"; do
  if ss -Hltn "sport = :$port" | grep -q .; then
    die "port $port is in use: $(ss -Hltnp "sport = :$port" | head -1)"
  fi
done
for net in "$POD_CIDR" "$SERVICE_CIDR"; do
  used=$( { ip -4 route show table all root "$net" | grep -vE '^(local|broadcast) '; ip -4 -o addr show to "$net"; } | head -1)
  [ -z "$used" ] || die "$net is already in use on this machine ($used); pick another with KMESH_POD_CIDR or KMESH_SERVICE_CIDR (each a /24)"
done

mkdir -p "$PID_DIR" "$LOG_DIR" "$ETC_DIR/cni" "$RUN_DIR"/{etcd,containerd/root,containerd/state,kubelet,pod-logs,cni-ipam}
# Pods' network namespaces there before this cluster: down.sh leaves these.
{ ls -d /run/netns/cni-* 2>/dev/null || true; } > "$RUN_DIR/netns.before"
# /run/netns is made a shared mount point of its own before any pod's netns
# is mounted there (down.sh undoes it). Otherwise the first `ip netns add`
# on this machine (test/netns, or anyone's) binds /run/netns over itself
# while pods run, hiding their netns mounts: containerd can then neither
# unmount nor remove them ("remove netns: device or resource busy"), and
# every pod made before it stays Terminating.
if ! mountpoint -q /run/netns; then
  touch "$RUN_DIR/netns.unmounted"
  mkdir -p /run/netns
  mount --bind /run/netns /run/netns
  mount --make-shared /run/netns
fi
"$HACK_DIR/pki.sh"
echo "$K8S_VERSION" > "$RUN_DIR/k8s-version"
cat /proc/sys/net/ipv4/ip_forward > "$RUN_DIR/ip_forward.orig"
# Host chains that exist before the kubelet adds its own: down.sh leaves these.
for ipt in iptables ip6tables; do
  for table in filter nat mangle; do
    $ipt -w -t "$table" -S 2>/dev/null | awk -v p="$ipt $table" '$1 == "-N" { print p " " $2 }'
  done
done > "$RUN_DIR/host-chains.before"

start() { # NAME COMMAND…
  local name=$1; shift
  setsid "$@" > "$LOG_DIR/$name.log" 2>&1 < /dev/null &
  echo $! > "$PID_DIR/$name.pid"
}
wait_for() { # WHAT SECONDS COMMAND…
  local what=$1 secs=$2; shift 2
  local deadline=$(( $(date +%s) + secs ))
  until "$@" >/dev/null 2>&1; do
    if [ "$(date +%s)" -ge "$deadline" ]; then
      log "timed out after ${secs}s waiting for $what; last lines of its log:"
      tail -n 20 "$LOG_DIR/${what%% *}.log" >&2 2>/dev/null || true
      return 1
    fi
    sleep 0.2
  done
  step "$what ready"
}

ip link add "$BRIDGE" type bridge
ip addr add "$NODE_IP/${POD_CIDR#*/}" dev "$BRIDGE"
ip link set "$BRIDGE" up

start etcd "$ETCD_BIN/etcd" --name kmesh --data-dir "$RUN_DIR/etcd" \
  --listen-client-urls "http://127.0.0.1:$ETCD_CLIENT_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_CLIENT_PORT" \
  --listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
  --initial-cluster "kmesh=http://127.0.0.1:$ETCD_PEER_PORT" --listen-metrics-urls "http://127.0.0.1:$((ETCD_CLIENT_PORT + 2))"
wait_for etcd 30 curl -sf "http://127.0.0.1:$ETCD_CLIENT_PORT/health"

start kube-apiserver "$KUBE_BIN/kube-apiserver" --etcd-servers="http://127.0.0.1:$ETCD_CLIENT_PORT" \
  --bind-address=127.0.0.1 --advertise-address="$NODE_IP" --secure-port="$APISERVER_PORT" \
  --tls-cert-file="$PKI_DIR/apiserver.crt" --tls-private-key-file="$PKI_DIR/apiserver.key" --client-ca-file="$PKI_DIR/ca.crt" \
  --authorization-mode=Node,RBAC --allow-privileged=true --enable-admission-plugins=NodeRestriction,PodSecurity \
  --service-cluster-ip-range="$SERVICE_CIDR" --service-account-issuer=https://kubernetes.default.svc \
  --service-account-key-file="$PKI_DIR/sa.pub" --service-account-signing-key-file="$PKI_DIR/sa.key" \
  --kubelet-client-certificate="$PKI_DIR/apiserver-kubelet-client.crt" --kubelet-client-key="$PKI_DIR/apiserver-kubelet-client.key" \
  --kubelet-certificate-authority="$PKI_DIR/ca.crt" --kubelet-preferred-address-types=InternalIP \
  --profiling=false --v=1

cat > "$ETC_DIR/containerd.toml" <<TOML
version = 2
root = "$RUN_DIR/containerd/root"
state = "$RUN_DIR/containerd/state"
[grpc]
  address = "$CONTAINERD_SOCK"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMAGE"
  # Processes here lack CAP_SYS_RESOURCE, so not even root may lower
  # oom_score_adj (runc fails with "failed to update /proc/self/oom_score_adj:
  # Permission denied" for the sandbox's -998). Clamp to containerd's own score.
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        BinaryName = "$(command -v runc)"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$ETC_DIR/cni"
TOML
cat > "$ETC_DIR/cni/10-$CNI_NETWORK.conflist" <<JSON
{
  "cniVersion": "1.0.0",
  "name": "$CNI_NETWORK",
  "plugins": [
    {"type": "bridge", "bridge": "$BRIDGE", "isGateway": true, "ipMasq": false, "hairpinMode": true,
     "ipam": {"type": "host-local", "dataDir": "$RUN_DIR/cni-ipam",
              "ranges": [[{"subnet": "$POD_CIDR"}]], "routes": [{"dst": "$POD_CIDR"}]}}
  ]
}
JSON
start containerd containerd --config "$ETC_DIR/containerd.toml"
CTR=(ctr --address "$CONTAINERD_SOCK" -n k8s.io)
wait_for containerd 30 "${CTR[@]}" version
for img in pause mesh-test proxyv2; do
  "${CTR[@]}" images import --snapshotter overlayfs "$IMAGE_DIR/$img.tar" >/dev/null
done
cp "$IMAGE_DIR/.stamp" "$RUN_DIR/images.imported"
step "images imported"
wait_for kube-apiserver 120 "$KUBECTL" get --raw /readyz

cat > "$ETC_DIR/kubelet.yaml" <<YAML
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
  x509: {clientCAFile: $PKI_DIR/ca.crt}
authorization: {mode: AlwaysAllow}
cgroupDriver: cgroupfs
failCgroupV1: false
failSwapOn: false
containerRuntimeEndpoint: unix://$CONTAINERD_SOCK
tlsCertFile: $PKI_DIR/kubelet-serving.crt
tlsPrivateKeyFile: $PKI_DIR/kubelet-serving.key
podLogsDir: $RUN_DIR/pod-logs
podCIDR: $POD_CIDR
resolvConf: /etc/resolv.conf
clusterDNS: [$CLUSTER_DNS]
clusterDomain: cluster.local
registerNode: true
evictionHard: {memory.available: "100Mi", nodefs.available: "2%", imagefs.available: "2%", nodefs.inodesFree: "2%"}
imageGCHighThresholdPercent: 99
imageGCLowThresholdPercent: 98
YAML
start kubelet "$KUBE_BIN/kubelet" --config="$ETC_DIR/kubelet.yaml" --kubeconfig="$STATE_DIR/kubelet.kubeconfig" \
  --root-dir="$RUN_DIR/kubelet" --node-ip="$NODE_IP" --hostname-override="$NODE_NAME" \
  --oom-score-adj=0 --volume-plugin-dir="$RUN_DIR/kubelet-plugins" --v=2
# The cloud-facing controllers (and node IPAM: the pod CIDR is the kubelet's)
# are off; 1.37 dropped some of them from kube-controller-manager, so only the
# ones this build still knows are named.
kcm_known=$("$KUBE_BIN/kube-controller-manager" --help 2>&1 | sed -n 's/.*All controllers: //p' | tr -d ' ' | tr ',' '\n')
[ -n "$kcm_known" ] || die "kube-controller-manager $K8S_VERSION --help lists no controllers (\"All controllers:\"): cannot tell which to disable"
kcm_controllers='*'
for c in node-ipam-controller service-lb-controller node-route-controller cloud-node-lifecycle-controller; do
  if grep -qx "$c" <<<"$kcm_known"; then kcm_controllers+=",-$c"; fi
done
start kube-controller-manager "$KUBE_BIN/kube-controller-manager" --kubeconfig="$STATE_DIR/controller-manager.kubeconfig" \
  --authentication-kubeconfig="$STATE_DIR/controller-manager.kubeconfig" --authorization-kubeconfig="$STATE_DIR/controller-manager.kubeconfig" \
  --bind-address=127.0.0.1 --service-account-private-key-file="$PKI_DIR/sa.key" --root-ca-file="$PKI_DIR/ca.crt" \
  --use-service-account-credentials=true --controllers="$kcm_controllers" --leader-elect=false --v=1
# One of each, so no leader election: under load (two cores busy) a lease
# renewal that times out made the elected scheduler exit, and no pod was
# scheduled again (seen here).
start kube-scheduler "$KUBE_BIN/kube-scheduler" --kubeconfig="$STATE_DIR/scheduler.kubeconfig" \
  --authentication-kubeconfig="$STATE_DIR/scheduler.kubeconfig" --authorization-kubeconfig="$STATE_DIR/scheduler.kubeconfig" \
  --bind-address=127.0.0.1 --leader-elect=false --v=1

# Ready only counts when the kubelet reported it after this start: a node
# object left in etcd by an earlier run can still say Ready.
since=$(date -u -d "@${t0%.*}" +%Y-%m-%dT%H:%M:%SZ)
node_ready() {
  "$KUBECTL" get node "$NODE_NAME" -o jsonpath='{range .status.conditions[?(@.type=="Ready")]}{.status} {.lastHeartbeatTime}{end}' |
    awk -v since="$since" '$1 == "True" && $2 >= since { ok = 1 } END { exit !ok }'
}
wait_for "kubelet (node $NODE_NAME Ready)" 120 node_ready
wait_for "kube-controller-manager (default service account)" 120 "$KUBECTL" get serviceaccount default -n default

# The mesh. istiod reads its injector ConfigMap at start (without it, it serves
# no webhook), so the rendered mesh is applied first. Each istiod runs in an
# empty working directory: it finds no ./etc/istio/config/mesh nor
# ./var/lib/istio/inject there and reads the mesh and injection config from
# the revision's ConfigMaps, and follows their changes, as in a cluster. The
# environment is the rendered Deployment's; the pod-derived variables and the
# kubeconfig are this machine's.
"$HACK_DIR/mesh.sh"
for rev in "${ISTIO_REVISIONS[@]}"; do
  dir=$RUN_DIR/istiod-$rev; mkdir -p "$dir"
  mapfile -t env < <(grep -v '^KUBECONFIG=' "$MESH_DIR/istiod-$rev.env")
  (cd "$dir" && start "istiod-$rev" env "${env[@]}" KUBECONFIG="$KUBECONFIG_ADMIN" POD_NAME="istiod-$rev-$NODE_NAME" \
    POD_NAMESPACE=istio-system SERVICE_ACCOUNT="istiod$([ "$rev" = default ] || echo "-$rev")" GOMAXPROCS=2 \
    "$ISTIO_BIN/pilot-discovery" discovery --kubeconfig "$KUBECONFIG_ADMIN" \
    --httpsAddr "127.0.0.1:$(istiod_port "$rev" https)" --httpAddr "127.0.0.1:$(istiod_port "$rev" http)" \
    --grpcAddr "127.0.0.1:$(istiod_port "$rev" grpc)" --secureGRPCAddr "127.0.0.1:$(istiod_port "$rev" sgrpc)" \
    --monitoringAddr "127.0.0.1:$(istiod_port "$rev" monitoring)" --ctrlz_port "$(istiod_port "$rev" ctrlz)" \
    --tlsCertFile "$PKI_DIR/istiod.crt" --tlsKeyFile "$PKI_DIR/istiod.key" --caCertFile "$PKI_DIR/ca.crt" \
    --domain cluster.local --log_output_level=default:info)
done
# webhook_ready REVISION: istiod is ready, serves /inject, and has patched its
# CA into every webhook of its revision (tags included).
webhook_ready() {
  local code hooks
  curl -sf "http://127.0.0.1:$(istiod_port "$1" http)/ready" >/dev/null || return 1
  code=$(curl -s -o /dev/null -w '%{http_code}' --cacert "$PKI_DIR/ca.crt" -X POST "https://127.0.0.1:$(istiod_port "$1" https)/inject") || true
  [ "$code" != 000 ] && [ "$code" != 404 ] || return 1
  hooks=$("$KUBECTL" get mutatingwebhookconfigurations -l "istio.io/rev=$1" -o jsonpath='{range .items[*].webhooks[*]}{.name}={.clientConfig.caBundle}{"\n"}{end}') || return 1
  [ -n "$hooks" ] && ! grep -q '=$' <<<"$hooks"
}
for rev in "${ISTIO_REVISIONS[@]}"; do
  wait_for "istiod-$rev (revision $rev, webhook on 127.0.0.1:$(istiod_port "$rev" https))" 120 webhook_ready "$rev"
done
for n in "${names[@]}"; do alive "$n" || die "$n exited; see $LOG_DIR/$n.log"; done
step "cluster up, Kubernetes $K8S_VERSION: export KUBECONFIG=$KUBECONFIG_ADMIN"
