#!/usr/bin/env bash
# Runs the whole test suite against one shared environment (hack/with-env.sh): the Go
# tests of every module (hack/modules.sh) with the race detector, and the compatibility
# suite that drives the real VDK client against the service (docs/compatibility.md;
# DATAJOBS_COMPAT=0 skips it).
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
bash hack/check-k8s-versions.sh
# The nested modules (hack/modules.sh: deploy, e2e/console, which hold the test-only
# dependencies) are tested with the same flags and environment, and then the compatibility
# suite runs (its own database and namespace), in the background beside the main module:
# their tests mostly wait on the apiserver, the browser and vdkcli, and together take less
# than half the main module's time, which they added to the suite's when they ran after it
# (the compatibility suite: about 2 minutes). Their output follows the main one's.
beside_log=$(mktemp)
trap 'rm -f "$beside_log"' EXIT
(
  rc=0
  for m in $(bash hack/modules.sh | tail -n +2); do
    go -C "$m" test -race -count=1 -timeout 30m ${GOTEST_FLAGS:-} ./... || rc=1
  done
  if [ "${DATAJOBS_COMPAT:-1}" != 0 ]; then
    .cache/compat-venv/bin/python -m pytest -q compat || rc=1
  fi
  exit $rc
) >"$beside_log" 2>&1 &
beside=$!
main_rc=0
go test -race -count=1 -timeout 30m ${GOTEST_FLAGS:-} ./... || main_rc=$?
beside_rc=0
wait "$beside" || beside_rc=$?
cat "$beside_log"
if [ "$main_rc" -ne 0 ] || [ "$beside_rc" -ne 0 ]; then
  echo "test: FAILED (main module exit $main_rc, nested modules and compatibility suite exit $beside_rc)" >&2
  exit 1
fi
