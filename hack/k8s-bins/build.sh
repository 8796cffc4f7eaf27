#!/usr/bin/env bash
# Builds the pinned Kubernetes binaries (etcd, kube-apiserver, kube-controller-manager,
# kube-scheduler, kubectl, kubelet, kwok) from the Go module proxy into an ignored cache
# folder, one line per binary with its time. Skips all work when the stamp (the pins'
# go.sum, this script, the Go version) matches, so a warm run takes well under a second;
# a cold one takes about eight minutes on 2 idle cores (the kubelet adds about 40 s).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib.sh"
out=${K8S_BIN_DIR:-$here/../../.cache/k8s-bin}
mkdir -p "$out"
out=$(cd "$out" && pwd)
bins=(etcd kube-apiserver kube-controller-manager kube-scheduler kubectl kubelet kwok kwok-stages.yaml)
stamp=$(stamp_of "$here/go.sum" "$here/kwok/go.sum" "$here/build.sh")
if up_to_date "$out" "$stamp" "${bins[@]}"; then
  exit 0
fi
echo "building Kubernetes binaries into $out (cold: about 8 minutes, warm: seconds)" >&2
k8s_version=v1.37.2
ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$k8s_version -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=37 -X k8s.io/component-base/version.gitTreeState=clean"
tmp=$(mktemp -d "$out/.build.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
cd "$here"
step etcd go build -ldflags "-s -w" -o "$tmp/etcd" go.etcd.io/etcd/server/v3
for bin in kube-apiserver kube-controller-manager kube-scheduler kubectl kubelet; do
  step "$bin" go build -ldflags "$ldflags" -o "$tmp/$bin" "k8s.io/kubernetes/cmd/$bin"
done
cd "$here/kwok"
step kwok go build -ldflags "-s -w" -o "$tmp/kwok" sigs.k8s.io/kwok/cmd/kwok
# The stock kwok binary has no stages built in: assemble the fast node and pod lifecycles.
stages=$(go list -m -f '{{.Dir}}' sigs.k8s.io/kwok)/kustomize/stage
{
  for f in node/fast/node-initialize.yaml node/heartbeat/node-heartbeat.yaml \
           pod/fast/pod-ready.yaml pod/fast/pod-complete.yaml pod/fast/pod-delete.yaml; do
    cat "$stages/$f"; echo "---"
  done
} > "$tmp/kwok-stages.yaml"
mv -f "$tmp"/* "$out/"
echo "$stamp" > "$out/.stamp"
