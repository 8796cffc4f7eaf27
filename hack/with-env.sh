#!/usr/bin/env bash
# Usage: hack/with-env.sh DATAJOBS_BINARY COMMAND [ARGS...]
# Starts one local environment (PostgreSQL and etcd with fsync off, kube-apiserver,
# kube-controller-manager, kube-scheduler and a kwok node, all on 127.0.0.1, and as root a
# real node beside it for the namespaces that ask for it: docs/test-environment.md) with the
# given datajobs binary, runs COMMAND with DATAJOBS_TEST_DATABASE_URL and
# DATAJOBS_TEST_KUBECONFIG exported (and DATAJOBS_ENV_FILE naming the file that holds
# them), and stops the environment afterwards, whatever the outcome.
set -euo pipefail
bin=$1
shift
state=$(mktemp -d "${TMPDIR:-/tmp}/datajobs-env.XXXXXX")
envfile="$state/env"
"$bin" dev --env-only --fast --state-dir "$state/env-state" --env-file "$envfile" --log-format text >"$state/dev.log" 2>&1 &
dev=$!
cleanup() {
  kill -TERM "$dev" 2>/dev/null || true
  wait "$dev" 2>/dev/null || true
  rm -rf "$state"
}
trap cleanup EXIT
for _ in $(seq 1 1500); do
  [ -s "$envfile" ] && break
  if ! kill -0 "$dev" 2>/dev/null; then
    echo "with-env: the environment failed to start:" >&2
    cat "$state/dev.log" >&2
    exit 1
  fi
  sleep 0.2
done
[ -s "$envfile" ] || { echo "with-env: the environment did not start in 300s" >&2; cat "$state/dev.log" >&2; exit 1; }
set -a; . "$envfile"; set +a
export DATAJOBS_ENV_FILE=$envfile
echo "with-env: environment ready ($DATAJOBS_TEST_DATABASE_URL, $DATAJOBS_TEST_KUBECONFIG)" >&2
"$@"
