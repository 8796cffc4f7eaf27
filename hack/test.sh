#!/usr/bin/env bash
# Runs the whole test suite against one shared environment (hack/with-env.sh): the Go
# tests with the race detector, then the compatibility suite that drives the real VDK
# client against the service (docs/compatibility.md; DATAJOBS_COMPAT=0 skips it).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" != --in-env ]; then
  exec bash hack/with-env.sh .cache/bin/datajobs bash hack/test.sh --in-env
fi
# hack/setup.sh built Ory Hydra: the authentication tests must run, never skip.
export DATAJOBS_TEST_REQUIRE_OIDC=1
# As root the environment has a real node beside kwok (hack/with-env.sh): the real-node
# suite (e2e/realnode) must run, never skip.
if [ "$(id -u)" -eq 0 ]; then
  export DATAJOBS_TEST_REQUIRE_REAL_NODE=1
fi
go test -race -count=1 -timeout 30m ${GOTEST_FLAGS:-} ./...
if [ "${DATAJOBS_COMPAT:-1}" != 0 ]; then
  .cache/compat-venv/bin/python -m pytest -q compat
fi
