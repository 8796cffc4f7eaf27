#!/usr/bin/env bash
# The scale benchmarks of issue 28, one command: N jobs (default 100,000) created and
# deployed through the service (the store's own inserts), converged by the synchronizer
# onto the real apiserver of a fresh `datajobs dev --env-only --fast` environment, then
#   memory    the informer cache's heap, whole objects and kube.Trim, and a term's heap/RSS;
#   noop      a fresh RunOnce, a term's cold start and warm full passes: time, writes, CPU
#             profiles (noop-*.pprof in the output folder);
#   sustained N changes/s (-rates, -sustain each) through the service with the synchronizer
#             live, next to plain client-go patches at the same rate (the floor);
#   leader    a real `datajobs serve` leader and follower (GOMEMLIMIT as the chart sets it)
#             over the N jobs, caught up and with 1,000 executions running (-running): RSS,
#             peak RSS, Go heap, the leader's heap profile (leader.heap in the output folder);
#   failover  1,000 pending deployments, two `datajobs serve` processes, leader killed.
# It is bench/sync (bench/sync/run.sh) with these scenarios; arguments after the defaults
# override them (the last -n-style flag wins), e.g.
#
#   bash bench/scale/run.sh                                  # 100,000 jobs, 5 min per rate
#   bash bench/scale/run.sh -noop-n 5000 -sustain 30s -rates 10,50
set -euo pipefail
cd "$(dirname "$0")/../.."
exec bash bench/sync/run.sh -scenarios memory,noop,leader,sustained,failover -noop-n 100000 -rates 10,50,200 -sustain 5m \
	-timeout 3h "$@"
