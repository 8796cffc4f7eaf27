#!/usr/bin/env bash
# Builds the pinned Ory Hydra (the OAuth2/OIDC server of the tests and of dev mode) from
# the Go module proxy into an ignored cache folder. Skips all work when the stamp (go.sum,
# this script and the Go version) matches, so a warm run takes well under a second; a cold
# one takes several minutes on 2 cores.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${HYDRA_BIN_DIR:-$here/../../.cache/hydra-bin}
mkdir -p "$out"
out=$(cd "$out" && pwd)
stamp=$( { cat "$here/go.sum" "$here/build.sh"; go version; } | sha256sum | cut -d' ' -f1)
if [ -f "$out/.stamp" ] && [ "$(cat "$out/.stamp")" = "$stamp" ] && [ -x "$out/hydra" ]; then
  exit 0
fi
echo "building Ory Hydra into $out (cold: several minutes, warm: seconds)" >&2
tmp=$(mktemp -d "$out/.build.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
cd "$here"
t=$SECONDS
GOFLAGS=-mod=mod go build -ldflags "-s -w" -o "$tmp/hydra" github.com/ory/hydra/v2
echo "  hydra built in $((SECONDS - t))s" >&2
mv -f "$tmp/hydra" "$out/hydra"
echo "$stamp" > "$out/.stamp"
