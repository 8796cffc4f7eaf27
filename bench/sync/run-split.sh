#!/usr/bin/env bash
# Runs the synchronizer benchmarks as bench/sync/run.sh does, with the Kubernetes control
# plane (kube-apiserver, etcd, the controller manager, the scheduler) on CPU 0 and
# PostgreSQL with the benchmark (the service and the synchronizer) on CPU 1, as a cluster
# keeps its apiserver off the service's nodes: on 2 shared cores the apiserver's garbage
# collector takes CPU from PostgreSQL and the service (docs/benchmarks-history.md, issue 28,
# seventh part). Needs taskset (util-linux) and 2 CPUs. Arguments go to the benchmark.
#
#   bash bench/sync/run-split.sh -scenarios sustained -noop-n 20000 -rates 50 -sustain 60s
set -euo pipefail
cd "$(dirname "$0")/../.."
build=$(mktemp -d "${TMPDIR:-/tmp}/bench-sync-split.XXXXXX")
go build -o "$build/datajobs" ./cmd/datajobs
go build -o "$build/bench-sync" ./bench/sync
"$build/datajobs" dev --env-only --fast --state-dir "$build/env-state" --env-file "$build/env" --log-format text >"$build/dev.log" 2>&1 &
dev=$!
trap 'kill -TERM "$dev" 2>/dev/null || true; wait "$dev" 2>/dev/null || true; rm -rf "$build"' EXIT
for _ in $(seq 300); do [ -s "$build/env" ] && break; sleep 1; done
[ -s "$build/env" ] || { echo "run-split: the environment did not start in 300s" >&2; cat "$build/dev.log" >&2; exit 1; }
for pid in $(pgrep -f "k8s-bin/(kube-apiserver|etcd|kube-controller-manager|kube-scheduler) .*$build/env-state"); do taskset -a -pc 0 "$pid" >/dev/null; done
postmaster=$(pgrep -f -- "postgres -D $build/env-state/postgres")
for pid in $postmaster $(pgrep -P "$postmaster"); do taskset -a -pc 1 "$pid" >/dev/null; done # new backends inherit it
taskset -c 1 "$build/bench-sync" -env-file "$build/env" -datajobs "$build/datajobs" "$@"
