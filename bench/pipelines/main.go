// Command pipelines benchmarks the leader's pipeline stepper (issue 40) on kwok, against a
// real PostgreSQL, kube-apiserver and kube-controller-manager (the environment of
// `datajobs dev --env-only`), with the execution tracker and the stepper running in
// process as the leader runs them (their default settings):
//
//   - floor: -starts manual starts one after the other, then -starts at once: the time from
//     the start request (and from its answer, the row committed) to the Job seen by a watch;
//   - pipeline: -runs runs at once of one pipeline of -nodes nodes in a chain (each node
//     after the one before): for each node but the first, the time from its upstream's
//     final status committed to its own Job seen by a watch (p50, p99, max), split at the
//     downstream execution's row committed (the stepper's part, then the tracker's), with
//     the stepper's and the tracker's queues (waits, work) and the store's statements that
//     took the most time meanwhile (lock waits included), to say where the time goes.
//
// Both ends are what a user observes, not log lines: a watch on the namespace's Jobs, and
// the execution rows polled every -poll for a final status (an execution's end_time and a
// Job's creationTimestamp are whole seconds, too coarse for a second's target). The poll
// sees a commit up to -poll late, so a latency is under-read by at most that much.
//
// Every node runs a job of its own, concurrency policy Allow (one job's runs in the -runs
// runs do not wait for each other: the stepper is measured, not the policy). kwok's stages
// run and complete the pods. It reads DATAJOBS_TEST_DATABASE_URL and
// DATAJOBS_TEST_KUBECONFIG:
//
//	bash hack/with-env.sh .cache/bin/datajobs go run ./bench/pipelines
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/datajobs/datajobs/bench/internal/benchenv"
	"github.com/datajobs/datajobs/bench/internal/stats"
	"github.com/datajobs/datajobs/internal/controller"
	"github.com/datajobs/datajobs/internal/service"
	"github.com/datajobs/datajobs/internal/stepper"
)

const (
	team     = "bench"
	pipeName = "bench-chain"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench/pipelines:", err)
		os.Exit(1)
	}
}

func run() error {
	runs := flag.Int("runs", 100, "pipeline runs at once (at most 100, max_active_runs' bound)")
	nodes := flag.Int("nodes", 10, "nodes of the pipeline, in a chain")
	starts := flag.Int("starts", 100, "manual starts of the floor, one after the other, then as many at once")
	poll := flag.Duration("poll", 5*time.Millisecond, "period of the poll of execution rows for a final status")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the pipeline part to this file")
	workers := flag.Int("stepper-workers", 0, "the stepper's workers (0: its default)")
	interval := flag.Duration("stepper-interval", 0, "the period of the stepper's resync (0: its default)")
	topSQL := flag.Int("top-sql", 12, "statements of the pipeline part printed, by time in all")
	timeout := flag.Duration("timeout", 15*time.Minute, "bound of the whole benchmark")
	flag.Parse()
	fmt.Printf("machine: %d CPUs, load average at the start %s\n", runtime.NumCPU(), stats.LoadAverage())
	defer func() { fmt.Printf("load average at the end %s\n", stats.LoadAverage()) }()
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	admin, kubeconfig := os.Getenv("DATAJOBS_TEST_DATABASE_URL"), os.Getenv("DATAJOBS_TEST_KUBECONFIG")
	if admin == "" || kubeconfig == "" {
		return errors.New("DATAJOBS_TEST_DATABASE_URL and DATAJOBS_TEST_KUBECONFIG are required (run under hack/with-env.sh)")
	}
	times := &sqlTimes{}
	be, err := benchenv.Open(ctx, benchenv.Config{Admin: admin, Kubeconfig: kubeconfig, Prefix: "bench-pipe", Tracer: times})
	if err != nil {
		return err
	}
	defer be.Close()
	e := &env{Env: be, seen: newMoments(), created: newMoments(), final: newMoments(), reg: prometheus.NewRegistry()}
	jobs, err := e.jobs(ctx, *nodes)
	if err != nil {
		return err
	}
	stopLeader := e.leader(stepper.Config{Settings: controller.Settings{Workers: *workers, Interval: *interval}})
	defer stopLeader()
	stopWatch, err := e.observe(ctx, *poll)
	if err != nil {
		return err
	}
	defer stopWatch()

	fromCall, fromCommit, err := e.floorSequential(ctx, jobs[0], *starts)
	if err != nil {
		return err
	}
	fmt.Printf("floor, %d manual starts one after the other: start request -> Job seen: %s\n", len(fromCall), summary(fromCall))
	fmt.Printf("                                              start committed -> Job seen: %s\n", summary(fromCommit))
	burst, err := e.floorBurst(ctx, jobs[0], *starts)
	if err != nil {
		return err
	}
	fmt.Printf("floor, %d manual starts at once: start committed -> Job seen: %s\n", len(burst), summary(burst))

	before := gather(e.reg)
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
	}
	times.ok.Store(true)
	lat, took, err := e.pipeline(ctx, jobs, *runs)
	times.ok.Store(false)
	pprof.StopCPUProfile()
	if err != nil {
		return err
	}
	fmt.Printf("pipeline, %d runs at once of %d nodes in a chain (%s for all), %d nodes after another:\n", *runs, *nodes, took.Round(100*time.Millisecond), len(lat.total))
	fmt.Printf("  upstream final status committed -> downstream Job seen:           %s\n", summary(lat.total))
	fmt.Printf("    of which final committed -> downstream execution committed: %s (%d nodes not seen under way)\n", summary(lat.step), lat.unsplit)
	fmt.Printf("    of which execution committed -> Job seen:                   %s\n", summary(lat.create))
	fmt.Println("  the queues meanwhile (items, mean):")
	gather(e.reg).print(before)
	fmt.Println("  the store's statements meanwhile, by time waited in all (a batch's from the one before):")
	times.print(*topSQL)
	return nil
}

// pipeline stores a chain of the jobs, starts runs runs of it at once, waits for all to
// end and returns, for every node after the first of every run, the time from its
// upstream's final status committed to its Job seen, and how long the runs took.
func (e *env) pipeline(ctx context.Context, jobs []string, runs int) (latencies, time.Duration, error) {
	spec, err := chain(jobs, runs)
	if err != nil {
		return latencies{}, 0, err
	}
	if _, _, err := e.Svc.PutPipeline(ctx, team, pipeName, spec, "bench", "op"); err != nil {
		return latencies{}, 0, fmt.Errorf("put pipeline: %w", err)
	}
	t0 := time.Now()
	var wg sync.WaitGroup
	errs := make([]error, runs)
	for i := range runs {
		wg.Go(func() {
			_, errs[i] = e.Svc.StartPipelineRun(ctx, team, pipeName, service.RunRequest{Arguments: []byte(fmt.Sprintf(`{"run":%d}`, i))}, "bench")
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return latencies{}, 0, fmt.Errorf("start runs: %w", err)
	}
	if err := e.runsEnded(ctx, runs); err != nil {
		return latencies{}, 0, err
	}
	took := time.Since(t0)
	lat, err := e.edgeLatencies(ctx)
	return lat, took, err
}

// chain is the spec of a pipeline whose node i runs jobs[i] after node i-1.
func chain(jobs []string, maxActive int) ([]byte, error) {
	type node struct {
		Name      string   `json:"name"`
		JobName   string   `json:"job_name"`
		DependsOn []string `json:"depends_on,omitempty"`
	}
	nodes := make([]node, len(jobs))
	for i, j := range jobs {
		nodes[i] = node{Name: fmt.Sprintf("node-%02d", i), JobName: j}
		if i > 0 {
			nodes[i].DependsOn = []string{nodes[i-1].Name}
		}
	}
	return json.Marshal(map[string]any{"max_active_runs": maxActive, "nodes": nodes})
}

// summary is "p50 …, p99 …, max …" of ds, to 0.1 ms.
func summary(ds []time.Duration) string {
	p := stats.Percentiles(ds, 50, 99, 100)
	r := func(d time.Duration) time.Duration { return d.Round(100 * time.Microsecond) }
	return fmt.Sprintf("p50 %s, p99 %s, max %s", r(p[0]), r(p[1]), r(p[2]))
}
