#!/usr/bin/env bash
# Builds the pinned CNCF Distribution, the OCI registry of the tests and dev mode (module in this folder),
# into .cache/registry-bin or $REGISTRY_BIN_DIR; hack/gobin.sh says how it is built and stamped.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../gobin.sh"
build_pinned_go_binary "$here" registry "${REGISTRY_BIN_DIR:-$here/../../.cache/registry-bin}" github.com/distribution/distribution/v3/cmd/registry "CNCF Distribution registry"
