#!/usr/bin/env bash
# Builds the pinned Mailpit, the SMTP server of the tests and dev mode (module in this folder),
# into .cache/mailpit-bin or $MAILPIT_BIN_DIR; hack/gobin.sh says how it is built and stamped.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../gobin.sh"
build_pinned_go_binary "$here" mailpit "${MAILPIT_BIN_DIR:-$here/../../.cache/mailpit-bin}" github.com/axllent/mailpit "Mailpit"
