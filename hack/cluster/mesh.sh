#!/usr/bin/env bash
# Renders the local cluster's mesh from Istio's own charts and applies it:
# for each revision in hack/demo/istio/<revision>.yaml (an IstioOperator
# overlay), `istioctl manifest generate` with the proxy image of the Istio that
# was built and the webhook's clientConfig a URL on loopback, where up.sh runs
# that revision's istiod (the chart's istiodRemote.injectionURL, as for an
# istiod outside the cluster). Of what it renders, the cluster gets what
# injection needs and istiod reads at start: Istio's CRDs, the mesh, injector
# and values ConfigMaps, and the MutatingWebhookConfigurations (revision tags
# included); not the Deployment, Services or RBAC of an in-cluster istiod.
# From the rendered Deployment it keeps the istiod container's environment
# ($MESH_DIR/istiod-<revision>.env), which up.sh starts istiod with.
# Writes $MESH_MANIFEST; istiod patches the webhooks' caBundle itself.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
export KUBECONFIG=$KUBECONFIG_ADMIN
KUBECTL=$(running_kubectl)
ISTIOCTL=$ISTIO_BIN/istioctl
[ -x "$ISTIOCTL" ] || die "no $ISTIOCTL: run hack/cluster/build-istio.sh first"
release=$(istio_release)

# keep KIND,KIND… < multi-document YAML: the documents of those kinds.
keep() {
  awk -v kinds="$1" '
    BEGIN { n = split(kinds, k, ","); for (i = 1; i <= n; i++) want[k[i]] = 1 }
    function flush() { if (doc != "" && want[kind]) printf "---\n%s", doc; doc = ""; kind = "" }
    /^---/ { flush(); next }
    /^kind: / { kind = $2 }
    { doc = doc $0 "\n" }
    END { flush() }'
}

mkdir -p "$MESH_DIR"
tmp=$MESH_DIR/mesh.yaml.tmp
printf 'apiVersion: v1\nkind: Namespace\nmetadata:\n  name: istio-system\n' > "$tmp"
first=1
for rev in "${ISTIO_REVISIONS[@]}"; do
  overlay=$REPO_ROOT/hack/demo/istio/$rev.yaml
  [ -f "$overlay" ] || die "no overlay $overlay for revision $rev"
  out=$MESH_DIR/render-$rev.yaml
  "$ISTIOCTL" manifest generate -f "$overlay" --set hub="${PROXY_IMAGE_REPO%/*}" --set tag="$release" \
    --set values.istiodRemote.injectionURL="https://127.0.0.1:$(istiod_port "$rev" https)/inject" > "$out" 2> "$MESH_DIR/render-$rev.log" ||
    die "istioctl manifest generate for revision $rev failed: $(tail -3 "$MESH_DIR/render-$rev.log")"
  # Istio's CRDs are the same in every revision's render: once.
  if [ $first = 1 ]; then keep CustomResourceDefinition < "$out" >> "$tmp"; first=0; fi
  keep ConfigMap,MutatingWebhookConfiguration < "$out" >> "$tmp"
  grep -q '^kind: MutatingWebhookConfiguration' "$out" || die "revision $rev rendered no MutatingWebhookConfiguration"
  # The environment the chart gives istiod: every variable with a literal value.
  keep Deployment < "$out" > "$MESH_DIR/deployment-$rev.yaml"
  "$KUBECTL" create --dry-run=client -f "$MESH_DIR/deployment-$rev.yaml" \
    -o jsonpath='{range .spec.template.spec.containers[?(@.name=="discovery")].env[?(@.value)]}{.name}={.value}{"\n"}{end}' > "$MESH_DIR/istiod-$rev.env"
  grep -q "^REVISION=$rev$" "$MESH_DIR/istiod-$rev.env" || die "the rendered istiod Deployment of revision $rev sets no REVISION=$rev"
done
mv "$tmp" "$MESH_MANIFEST"
"$KUBECTL" apply --server-side --force-conflicts -f "$MESH_MANIFEST" >/dev/null
# The CRDs must be served before istiod starts its informers.
"$KUBECTL" wait --for condition=established --timeout=60s -f <(keep CustomResourceDefinition < "$MESH_MANIFEST") >/dev/null
log "mesh rendered by istioctl $release (revisions ${ISTIO_REVISIONS[*]}) and applied: $MESH_MANIFEST"
