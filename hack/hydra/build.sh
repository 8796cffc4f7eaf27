#!/usr/bin/env bash
# Builds the pinned Ory Hydra (the OAuth2/OIDC server of the tests and of dev mode) from
# the Go module proxy into an ignored cache folder, in one line with its time. Skips all
# work when the stamp (go.sum, this script and the Go version) matches, so a warm run
# takes well under a second; a cold one takes several minutes on 2 cores.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib.sh"
out=${HYDRA_BIN_DIR:-$here/../../.cache/hydra-bin}
mkdir -p "$out"
out=$(cd "$out" && pwd)
stamp=$(stamp_of "$here/go.sum" "$here/build.sh")
if up_to_date "$out" "$stamp" hydra; then
  exit 0
fi
echo "building Ory Hydra into $out (cold: several minutes, warm: seconds)" >&2
tmp=$(mktemp -d "$out/.build.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
cd "$here"
step hydra go build -ldflags "-s -w" -o "$tmp/hydra" github.com/ory/hydra/v2
mv -f "$tmp/hydra" "$out/hydra"
echo "$stamp" > "$out/.stamp"
