#!/usr/bin/env bash
# Builds the pinned CNCF Distribution registry (cmd/registry, module in this folder) from
# the Go module proxy into an ignored cache folder, in one line with its time. Skips all
# work when the stamp (go.sum, this script and the Go version) matches, so a warm run
# takes well under a second.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib.sh"
out=${REGISTRY_BIN_DIR:-$here/../../.cache/registry-bin}
mkdir -p "$out"
out=$(cd "$out" && pwd)
stamp=$(stamp_of "$here/go.sum" "$here/build.sh")
if up_to_date "$out" "$stamp" registry; then
  exit 0
fi
echo "building the OCI registry into $out (cold: a few minutes, warm: instant)" >&2
tmp=$(mktemp -d "$out/.build.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
cd "$here"
step registry go build -ldflags "-s -w" -o "$tmp/registry" github.com/distribution/distribution/v3/cmd/registry
mv -f "$tmp/registry" "$out/registry"
echo "$stamp" > "$out/.stamp"
