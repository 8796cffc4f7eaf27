#!/usr/bin/env bash
# Builds the pinned Mailpit SMTP server (github.com/axllent/mailpit v1.33.1, module in this folder) from
# the Go module proxy into an ignored cache folder, in one line with its time. Skips all
# work when the stamp (go.sum, this script and the Go version) matches, so a warm run
# takes well under a second.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib.sh"
out=${MAILPIT_BIN_DIR:-$here/../../.cache/mailpit-bin}
mkdir -p "$out"
out=$(cd "$out" && pwd)
stamp=$(stamp_of "$here/go.sum" "$here/build.sh")
if up_to_date "$out" "$stamp" mailpit; then
  exit 0
fi
echo "building Mailpit into $out (cold: a few minutes, warm: instant)" >&2
tmp=$(mktemp -d "$out/.build.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
cd "$here"
step mailpit go build -ldflags "-s -w" -o "$tmp/mailpit" github.com/axllent/mailpit
mv -f "$tmp/mailpit" "$out/mailpit"
echo "$stamp" > "$out/.stamp"
