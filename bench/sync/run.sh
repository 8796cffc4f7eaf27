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
#   bash bench/sync/run.sh                          # everything, the service's default client limits (auto)
#   bash bench/sync/run.sh -kube-limits 2000/4000 -scenarios converge,failover -n 1000 -repeat 1
set -euo pipefail
cd "$(dirname "$0")/../.."
build=$(mktemp -d "${TMPDIR:-/tmp}/bench-sync-bin.XXXXXX")
trap 'rm -rf "$build"' EXIT
go build -o "$build/datajobs" ./cmd/datajobs
go build -o "$build/bench-sync" ./bench/sync
bash hack/with-env.sh "$build/datajobs" bash -c '"$0" -env-file "$DATAJOBS_ENV_FILE" -datajobs "$1" "${@:2}"' "$build/bench-sync" "$build/datajobs" "$@"
