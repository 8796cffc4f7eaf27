#!/usr/bin/env bash
# Runs the whole test suite against one shared environment (hack/with-env.sh): the Go
# tests of every module (hack/modules.sh) with the race detector, then the compatibility
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
# dependencies) are tested with the same flags and environment, in the background beside the
# main module so that the suite takes about as long as when they were one module (their
# tests mostly wait on the apiserver and the browser); their output follows the main one's.
nested_log=$(mktemp)
trap 'rm -f "$nested_log"' EXIT
(
  rc=0
  for m in $(bash hack/modules.sh | tail -n +2); do
    go -C "$m" test -race -count=1 -timeout 30m ${GOTEST_FLAGS:-} ./... || rc=1
  done
  exit $rc
) >"$nested_log" 2>&1 &
nested=$!
main_rc=0
go test -race -count=1 -timeout 30m ${GOTEST_FLAGS:-} ./... || main_rc=$?
nested_rc=0
wait "$nested" || nested_rc=$?
cat "$nested_log"
if [ "$main_rc" -ne 0 ] || [ "$nested_rc" -ne 0 ]; then
  echo "test: FAILED (main module exit $main_rc, nested modules exit $nested_rc)" >&2
  exit 1
fi
if [ "${DATAJOBS_COMPAT:-1}" != 0 ]; then
  .cache/compat-venv/bin/python -m pytest -q compat
fi
