#!/usr/bin/env bash
# Builds the pinned Ory Hydra, the OIDC server of the tests and dev mode (module in this folder),
# into .cache/hydra-bin or $HYDRA_BIN_DIR; hack/gobin.sh says how it is built and stamped.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../gobin.sh"
build_pinned_go_binary "$here" hydra "${HYDRA_BIN_DIR:-$here/../../.cache/hydra-bin}" github.com/ory/hydra/v2 "Ory Hydra"
