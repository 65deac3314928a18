#!/usr/bin/env bash
# Creates the cluster's PKI with openssl and the kubeconfigs of the admin and
# of every component, in $STATE_DIR. Existing, still valid files are kept.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

mkdir -p "$PKI_DIR"; cd "$PKI_DIR"
stamp="$NODE_NAME $NODE_IP $APISERVER_PORT istiod"
if [ "$(cat .stamp 2>/dev/null)" = "$stamp" ] && [ -f "$KUBECONFIG_ADMIN" ]; then exit 0; fi
rm -f ./*.crt ./*.key ./*.csr ./*.ext ./*.srl
openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -subj "/CN=kubectl-mesh-test-ca" -days 3650 2>/dev/null

# cert NAME SUBJECT [SANS]: a key and a certificate signed by the CA; with
# SANS a serving certificate, else a client certificate.
cert() {
  local name=$1 subj=$2 sans=${3:-}
  openssl req -newkey rsa:2048 -nodes -keyout "$name.key" -out "$name.csr" -subj "$subj" 2>/dev/null
  if [ -n "$sans" ]; then
    printf 'subjectAltName=%s\nextendedKeyUsage=serverAuth,clientAuth\n' "$sans" > "$name.ext"
  else
    printf 'extendedKeyUsage=clientAuth\n' > "$name.ext"
  fi
  openssl x509 -req -in "$name.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days 3650 -extfile "$name.ext" -out "$name.crt" 2>/dev/null
  rm -f "$name.csr" "$name.ext"
}
cert apiserver "/CN=kube-apiserver" "DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,IP:127.0.0.1,IP:$NODE_IP,IP:${SERVICE_CIDR%.*}.1"
cert apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client"
cert kubelet "/O=system:nodes/CN=system:node:$NODE_NAME"
cert kubelet-serving "/CN=$NODE_NAME" "DNS:$NODE_NAME,DNS:localhost,IP:127.0.0.1,IP:$NODE_IP"
cert controller-manager "/CN=system:kube-controller-manager"
cert scheduler "/CN=system:kube-scheduler"
cert admin "/O=system:masters/CN=kubectl-mesh-admin"
# istiod's serving certificate (webhook, XDS), given to it as custom certificates.
cert istiod "/CN=istiod.istio-system.svc" "DNS:istiod.istio-system.svc,DNS:localhost,IP:127.0.0.1"
openssl genrsa -out sa.key 2048 2>/dev/null && openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null

# kubeconfig FILE CERT: a kubeconfig for the local apiserver with that client cert.
kubeconfig() {
  cat > "$1" <<YAML
apiVersion: v1
kind: Config
clusters:
- name: kubectl-mesh-test
  cluster:
    server: https://127.0.0.1:$APISERVER_PORT
    certificate-authority-data: $(base64 -w0 < ca.crt)
users:
- name: $2
  user:
    client-certificate-data: $(base64 -w0 < "$2.crt")
    client-key-data: $(base64 -w0 < "$2.key")
contexts:
- name: kubectl-mesh-test
  context: {cluster: kubectl-mesh-test, user: $2, namespace: default}
current-context: kubectl-mesh-test
YAML
  chmod 600 "$1"
}
kubeconfig "$KUBECONFIG_ADMIN" admin
for c in kubelet controller-manager scheduler; do kubeconfig "$STATE_DIR/$c.kubeconfig" "$c"; done
echo "$stamp" > .stamp
log "PKI in $PKI_DIR"
