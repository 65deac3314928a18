#!/usr/bin/env bash
# Writes the tools module that builds one Kubernetes version:
#   hack/tools/kube/sync.sh v1.37.2
# creates or refreshes hack/tools/kube/v1.37/go.mod and go.sum.
#
# k8s.io/kubernetes points every staging module (k8s.io/api, client-go, ...,
# and whatever a release adds, such as k8s.io/cri-streaming in 1.37) at a
# ./staging path inside its own tree, which a module that requires it cannot
# use. The replace list here is read from k8s.io/kubernetes's own go.mod at the
# requested version, each staging path mapped to its published twin v0.Y.Z, so
# a new release needs no hand-kept list. Run it when changing a lane's patch
# version, then commit the result; the build (hack/cluster/build-kube.sh)
# only reads the committed files.
set -euo pipefail
version=${1:?usage: sync.sh vMAJOR.MINOR.PATCH}
[[ $version =~ ^v1\.([0-9]+)\.([0-9]+)$ ]] || { echo "not a Kubernetes release: $version" >&2; exit 2; }
minor=${BASH_REMATCH[1]} patch=${BASH_REMATCH[2]}
staging=v0.$minor.$patch
here=$(cd "$(dirname "$0")" && pwd)
dir=$here/v1.$minor
mkdir -p "$dir"

upstream=$(go mod download -json "k8s.io/kubernetes@$version" | sed -n 's/^\s*"GoMod": "\(.*\)",$/\1/p')
[ -f "$upstream" ] || { echo "k8s.io/kubernetes@$version: go.mod not downloaded" >&2; exit 1; }
godir=$(sed -n 's/^go \([0-9.]*\)$/\1/p' "$upstream")
# godebug lines (one or several, or a block) are copied as they are.
godebug=$(awk '/^godebug \($/ { b = 1 } b || /^godebug / { print } b && /^\)$/ { b = 0 }' "$upstream")
mapfile -t mods < <(sed -n 's#^\s*\(k8s\.io/[^ ]*\) => \./staging/src/.*#\1#p' "$upstream")
[ "${#mods[@]}" -gt 20 ] || { echo "found only ${#mods[@]} staging replaces in $upstream" >&2; exit 1; }

{
  cat <<EOF
// Tools module (written by hack/tools/kube/sync.sh $version; do not edit by
// hand): builds the Kubernetes $version binaries the local test cluster runs
// (kube-apiserver, kubelet, kube-controller-manager, kube-scheduler, kubectl).
// A module of its own so that nothing of k8s.io/kubernetes enters the
// project's go.mod. The replaces are k8s.io/kubernetes's own staging
// replaces, each pointed at its published $staging.
module github.com/kubectl-mesh/kubectl-mesh/hack/tools/kube/v1.$minor

go $godir
EOF
  [ -z "$godebug" ] || printf '\n%s\n' "$godebug"
  printf '\nrequire k8s.io/kubernetes %s\n\nreplace (\n' "$version"
  for m in "${mods[@]}"; do printf '\t%s => %s %s\n' "$m" "$m" "$staging"; done
  printf ')\n\ntool (\n'
  for c in kube-apiserver kube-controller-manager kube-scheduler kubectl kubelet; do printf '\tk8s.io/kubernetes/cmd/%s\n' "$c"; done
  printf ')\n'
} > "$dir/go.mod"
rm -f "$dir/go.sum"
(cd "$dir" && GOFLAGS=-mod=mod go mod tidy)
echo "wrote $dir/go.mod (${#mods[@]} staging replaces at $staging)"
