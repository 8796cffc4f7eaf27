// Command schedule benchmarks the top of the hour (issue 45) on kwok, against a real
// PostgreSQL, kube-apiserver and kube-controller-manager (the environment of
// `datajobs dev --env-only --fast`, whose CronJob controller runs with
// --kube-api-qps=500 --kube-api-burst=1000; a cluster's default is 20/30), with the
// execution tracker, the missed-runs and the lateness services in process as the leader
// runs them (their defaults):
//
//   - same: -n deployed jobs all due in one minute (M * * * *): for each run, its schedule
//     time -> its Job created (seen by a watch) -> its pod Running (seen by a watch) -> its
//     execution row running (polled every -poll), p50/p95/p99/max; the CronJob
//     controller's own skew histogram (cronjob_controller_job_creation_skew_duration_seconds
//     of kube-controller-manager's /metrics); missed runs (no Job by the end, and the rows
//     the missed-runs service recorded skipped); job_late events (and how many were false:
//     a run that started within its starting deadline); the apiserver's write rate
//     (apiserver_request_total of POST, PUT, PATCH and DELETE, sampled every 2 s);
//   - hashed: the same jobs at H(M-M+spread-1) * * * *, spread by datajobs over -spread
//     minutes, each run measured from its own resolved time;
//   - floor: a bare client-go loop creating -n Jobs of the same pod template on the same
//     apiserver, one after the other and 16 at a time.
//
// The CronJobs are rendered and created as the synchronizer would (the synchronizer's own
// converge is bench/sync's), -lead ahead of the minute they are due. It reads
// DATAJOBS_TEST_DATABASE_URL and DATAJOBS_TEST_KUBECONFIG:
//
//	bash hack/with-env.sh .cache/bin/datajobs go run ./bench/schedule -n 1000,10000
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/datajobs/datajobs/bench/internal/benchenv"
	"github.com/datajobs/datajobs/bench/internal/stats"
)

const team = "bench"

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench/schedule:", err)
		os.Exit(1)
	}
}

// options are the command's flags.
type options struct {
	spread   int
	lead     time.Duration
	deadline time.Duration
	poll     time.Duration
	settle   time.Duration
}

func run() error {
	ns := flag.String("n", "1000", "numbers of jobs, comma-separated")
	modes := flag.String("modes", "floor,same,hashed", "scenarios, comma-separated: floor, same, hashed")
	var o options
	flag.IntVar(&o.spread, "spread", 10, "minutes the hashed schedules spread over (H(M-M+spread-1))")
	flag.DurationVar(&o.lead, "lead", 0, "time from the start of the setup to the due minute (0: 45 s + 15 ms a job)")
	flag.DurationVar(&o.deadline, "deadline", 5*time.Minute, "the jobs' starting deadline (starting_deadline_seconds)")
	flag.DurationVar(&o.poll, "poll", 250*time.Millisecond, "period of the poll of execution rows")
	flag.DurationVar(&o.settle, "settle", 90*time.Second, "time after the last due minute's deadline before the counts are read")
	timeout := flag.Duration("timeout", 3*time.Hour, "bound of the whole benchmark")
	flag.Parse()
	fmt.Printf("machine: %d CPUs, load average at the start %s\n", runtime.NumCPU(), stats.LoadAverage())
	defer func() { fmt.Printf("load average at the end %s\n", stats.LoadAverage()) }()
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	admin, kubeconfig := os.Getenv("DATAJOBS_TEST_DATABASE_URL"), os.Getenv("DATAJOBS_TEST_KUBECONFIG")
	if admin == "" || kubeconfig == "" {
		return errors.New("DATAJOBS_TEST_DATABASE_URL and DATAJOBS_TEST_KUBECONFIG are required (run under hack/with-env.sh)")
	}
	for _, s := range strings.Split(*ns, ",") {
		n, err := strconv.Atoi(s)
		if err != nil {
			return fmt.Errorf("-n %q: %w", s, err)
		}
		for _, mode := range strings.Split(*modes, ",") {
			be, err := benchenv.Open(ctx, benchenv.Config{Admin: admin, Kubeconfig: kubeconfig, Prefix: "bench-sched"})
			if err != nil {
				return err
			}
			err = scenario(ctx, be, kubeconfig, mode, n, o)
			be.Close()
			if err != nil {
				return fmt.Errorf("%s, %d jobs: %w", mode, n, err)
			}
		}
	}
	return nil
}

func scenario(ctx context.Context, be *benchenv.Env, kubeconfig, mode string, n int, o options) error {
	switch mode {
	case "floor":
		return floor(ctx, be, n)
	case "same", "hashed":
		return burst(ctx, &env{Env: be, kubeconfig: kubeconfig}, n, mode == "hashed", o)
	}
	return fmt.Errorf("unknown scenario %q", mode)
}

// summary is "p50 …, p95 …, p99 …, max …" of ds, to 0.1 s, and their number.
func summary(ds []time.Duration) string {
	if len(ds) == 0 {
		return "none"
	}
	p := stats.Percentiles(ds, 50, 95, 99, 100)
	r := func(d time.Duration) string { return strconv.FormatFloat(d.Seconds(), 'f', 1, 64) + " s" }
	return fmt.Sprintf("p50 %s, p95 %s, p99 %s, max %s (%d runs)", r(p[0]), r(p[1]), r(p[2]), r(p[3]), len(ds))
}
