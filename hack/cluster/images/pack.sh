#!/usr/bin/env bash
# pack.sh ROOTFS OUT.tar ENTRYPOINT_JSON CMD_JSON REF [REF…]
# Packs a directory as a one-layer image in `docker save` format, which
# `ctr images import` reads. Timestamps and owners are fixed, so the same
# rootfs always gives the same image digest.
set -euo pipefail
rootfs=$1 out=$2 entrypoint=$3 cmd=$4; shift 4
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
tar --numeric-owner --owner=0 --group=0 --sort=name --mtime=@0 -C "$rootfs" -cf "$work/layer.tar" .
layer=$(sha256sum "$work/layer.tar" | cut -d' ' -f1)
mkdir "$work/$layer" && mv "$work/layer.tar" "$work/$layer/layer.tar"
jq -n --argjson ep "$entrypoint" --argjson cmd "$cmd" --arg diff "sha256:$layer" '{
  architecture: "amd64", os: "linux", created: "1970-01-01T00:00:00Z",
  config: {Env: ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"], Entrypoint: $ep, Cmd: $cmd, WorkingDir: "/"},
  rootfs: {type: "layers", diff_ids: [$diff]},
  history: [{created: "1970-01-01T00:00:00Z", created_by: "kubectl-mesh hack/cluster/images/pack.sh"}]}' > "$work/config.json"
config=$(sha256sum "$work/config.json" | cut -d' ' -f1)
mv "$work/config.json" "$work/$config.json"
jq -n --arg c "$config.json" --arg l "$layer/layer.tar" '[{Config: $c, RepoTags: $ARGS.positional, Layers: [$l]}]' --args "$@" > "$work/manifest.json"
tar -C "$work" -cf "$out" manifest.json "$config.json" "$layer"
