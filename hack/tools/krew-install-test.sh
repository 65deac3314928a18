#!/usr/bin/env bash
# Installs this version's linux/amd64 archive with krew, offline
# (--manifest, --archive), into a temporary KREW_ROOT, then runs
# `kubectl mesh version --client` through kubectl's plugin discovery.
set -euo pipefail
. "$(dirname "$0")/../cluster/lib.sh"
VERSION=$1
cd "$REPO_ROOT"
"$HACK_DIR/../tools/build-krew.sh"
"$HACK_DIR/build-kube.sh" >/dev/null
root=$(mktemp -d); trap 'rm -rf "$root"' EXIT
archive=dist/kubectl-mesh_${VERSION}_linux_amd64.tar.gz
KREW_ROOT=$root KREW_OS=linux KREW_ARCH=amd64 "$CACHE_DIR/krew/krew" install --manifest=dist/krew/mesh.yaml --archive="$archive" </dev/null
for f in kubectl-mesh LICENSE README.md kubectl_complete-mesh; do
  [ -e "$root/store/mesh/$VERSION/$f" ] || die "krew did not install $f"
done
out=$(PATH="$root/bin:$KUBE_BIN:/usr/bin:/bin" kubectl mesh version --client -o json)
echo "$out" | grep -q "\"version\": \"$VERSION\"" || die "kubectl mesh version through krew printed: $out"
log "krew installed kubectl-mesh $VERSION; kubectl mesh version runs through kubectl's plugin discovery"
