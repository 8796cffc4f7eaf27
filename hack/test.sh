#!/usr/bin/env bash
# Runs the whole test suite against one shared environment (PostgreSQL, etcd,
# kube-apiserver, kube-controller-manager, kube-scheduler and a kwok node) that it starts
# first and stops at the end, whatever the outcome.
set -euo pipefail
cd "$(dirname "$0")/.."
state=$(mktemp -d "${TMPDIR:-/tmp}/datajobs-test.XXXXXX")
envfile="$state/env"
.cache/bin/datajobs dev --env-only --fast --state-dir "$state/env-state" --env-file "$envfile" --log-format text >"$state/dev.log" 2>&1 &
dev=$!
cleanup() {
  kill -TERM "$dev" 2>/dev/null || true
  wait "$dev" 2>/dev/null || true
  rm -rf "$state"
}
trap cleanup EXIT
for _ in $(seq 1 600); do
  [ -s "$envfile" ] && break
  if ! kill -0 "$dev" 2>/dev/null; then
    echo "test: the test environment failed to start:" >&2
    cat "$state/dev.log" >&2
    exit 1
  fi
  sleep 0.2
done
[ -s "$envfile" ] || { echo "test: the test environment did not start in 120s" >&2; cat "$state/dev.log" >&2; exit 1; }
set -a; . "$envfile"; set +a
echo "test: environment ready ($DATAJOBS_TEST_DATABASE_URL, $DATAJOBS_TEST_KUBECONFIG)" >&2
go test -race -count=1 -timeout 30m ${GOTEST_FLAGS:-} ./...
# The compatibility suite: the real VDK client against the service (docs/compatibility.md).
# DATAJOBS_COMPAT=0 skips it.
if [ "${DATAJOBS_COMPAT:-1}" != 0 ]; then
  .cache/compat-venv/bin/python -m pytest -q compat
fi
