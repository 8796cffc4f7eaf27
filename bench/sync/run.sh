#!/usr/bin/env bash
# Runs the synchronizer benchmarks (bench/sync) against a fresh environment of
# `datajobs dev --env-only --fast` (PostgreSQL and etcd with fsync off, kube-apiserver,
# controllers, all on 127.0.0.1), which it starts first and stops at the end, whatever
# the outcome. It builds datajobs (for the environment and the failover benchmark's serve
# processes) and the benchmark from this checkout first. Arguments go to the benchmark
# program (see `go run ./bench/sync -h`); results are printed and kept, with logs and CPU
# profiles, in the folder it names. The Kubernetes binaries come from .cache/k8s-bin
# (built on first use, see hack/k8s-bins).
#
#   bash bench/sync/run.sh                          # everything, QPS/burst 2000/4000
#   bash bench/sync/run.sh -kube-limits 50/100 -scenarios converge,failover -n 1000 -repeat 1
set -euo pipefail
cd "$(dirname "$0")/../.."
state=$(mktemp -d "${TMPDIR:-/tmp}/bench-sync-env.XXXXXX")
envfile="$state/env"
go build -o "$state/datajobs" ./cmd/datajobs
go build -o "$state/bench-sync" ./bench/sync
"$state/datajobs" dev --env-only --fast --state-dir "$state/env-state" --env-file "$envfile" --log-format text >"$state/dev.log" 2>&1 &
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
    echo "bench: the environment failed to start:" >&2
    cat "$state/dev.log" >&2
    exit 1
  fi
  sleep 0.2
done
[ -s "$envfile" ] || { echo "bench: the environment did not start in 120s" >&2; exit 1; }
"$state/bench-sync" -env-file "$envfile" -datajobs "$state/datajobs" "$@"
