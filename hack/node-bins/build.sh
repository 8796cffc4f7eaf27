#!/usr/bin/env bash
# Builds the real node's runtime (docs/test-environment.md) into an ignored cache folder,
# one line per component with its time: containerd and containerd-shim-runc-v2 (module
# hack/containerd), the CNI plugins bridge, host-local and loopback (module hack/cni), the
# pause binary (hack/pause), and Debian's runc, unpacked from its .deb (never installed).
# The kubelet is built with the control plane (hack/k8s-bins). Skips all work when the
# stamp (the go.sum files, the pause source, this script, the Go version and the runc
# package version) matches. Cold: about 2.5 minutes of CPU on 2 cores.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
. "$here/lib.sh"
out=${NODE_BIN_DIR:-$here/../.cache/node-bin}
mkdir -p "$out"
out=$(cd "$out" && pwd)
runc_version() { apt-cache policy runc 2>/dev/null | awk '/Candidate:/ {print $2}'; }
if [ -z "$(runc_version)" ] || [ "$(runc_version)" = "(none)" ]; then
  sudo=""; [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null && sudo=sudo
  $sudo apt-get update -qq
fi
runc=$(runc_version)
stamp=$( { stamp_of "$here/containerd/go.sum" "$here/cni/go.sum" "$here/pause/main.go" "$here/node-bins/build.sh"; echo "runc=$runc"; } | sha256sum | cut -d' ' -f1)
if up_to_date "$out" "$stamp" containerd containerd-shim-runc-v2 runc pause cni/bridge cni/host-local cni/loopback; then
  exit 0
fi
echo "building the real node's runtime into $out (cold: about 2 minutes, warm: instant)" >&2
tmp=$(mktemp -d "$out/.build.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
export CGO_ENABLED=0
cd "$here/containerd"
ctrd=github.com/containerd/containerd/v2
for bin in containerd containerd-shim-runc-v2; do
  step "$bin" go build -tags "no_btrfs no_devmapper no_zfs" \
    -ldflags "-s -w -X $ctrd/version.Version=v2.4.2" -o "$tmp/$bin" "$ctrd/cmd/$bin"
done
cd "$here/cni"
plugins=github.com/containernetworking/plugins/plugins
step "cni (bridge host-local loopback)" go build -ldflags "-s -w" -o "$tmp/cni/" \
  "$plugins/main/bridge" "$plugins/ipam/host-local" "$plugins/main/loopback"
cd "$here/.."
step pause go build -trimpath -ldflags "-s -w" -o "$tmp/pause" ./hack/pause
fetch_runc() {
  (cd "$tmp" && apt-get download -qq -o APT::Sandbox::User=root "runc=$runc" && dpkg -x runc_*.deb deb && mv deb/usr/sbin/runc runc && rm -rf deb runc_*.deb)
}
step "runc $runc (Debian)" fetch_runc
rm -rf "$out/cni"
mv -f "$tmp"/* "$out/"
echo "$stamp" > "$out/.stamp"
