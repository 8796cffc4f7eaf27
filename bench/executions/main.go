// Command executions benchmarks the leader's execution tracker against a real PostgreSQL,
// kube-apiserver and kube-controller-manager (the environment of `datajobs dev --env-only`):
//
//   - start: -starts manual starts, one after the other, each on its own job: the time from
//     the start request to the Job seen by a watch (p50, p99);
//   - transitions: -running executions made running at once, then each pod but 100 moved to
//     Succeeded as a kubelet would: the time from the pod status write to the execution's
//     row committed as succeeded (p50, p99, polled every 5 ms), the stage's own lag
//     (datajobs_execution_status_write_lag_seconds: event seen -> row committed), and the
//     execution rows written per transition and the statements that wrote them;
//   - rest: with -finished finished executions added and the last 100 still running, a new
//     term's first pass and the following seconds: the execution writes (expected: none).
//
// Pods are kept off kwok (a node selector no node has), so the benchmark plays the
// kubelet. It reads DATAJOBS_TEST_DATABASE_URL and DATAJOBS_TEST_KUBECONFIG:
//
//	bash hack/with-env.sh .cache/bin/datajobs go run ./bench/executions
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5" //nolint:depguard // the benchmark counts the tracker's statements and polls rows
	"github.com/prometheus/client_golang/prometheus"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/datajobs/datajobs/bench/internal/benchenv"
	"github.com/datajobs/datajobs/bench/internal/stats"
	"github.com/datajobs/datajobs/internal/controller"
	"github.com/datajobs/datajobs/internal/devenv"
	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/kube"
	"github.com/datajobs/datajobs/internal/service"
	"github.com/datajobs/datajobs/internal/tracker"
)

const team = "bench"

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench/executions:", err)
		os.Exit(1)
	}
}

// writeCounter counts the execution writes a pool sends: status statements
// (store.RecordExecutions) and the rows they write, Job-created marks, kept logs.
type writeCounter struct {
	writes, statements, created, logs, passes atomic.Int64
}

type statusWrite struct{}

func (c *writeCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	switch {
	case strings.Contains(d.SQL, "INSERT INTO data_job_execution AS e"):
		c.statements.Add(1)
		return context.WithValue(ctx, statusWrite{}, true)
	case strings.HasPrefix(d.SQL, "UPDATE data_job_execution SET job_created_at"):
		c.created.Add(1)
	case strings.HasPrefix(d.SQL, "INSERT INTO data_job_execution_log"):
		c.logs.Add(1)
	case strings.HasPrefix(d.SQL, "SELECT id, job_name, COALESCE(job_uid") && strings.Contains(d.SQL, "WHERE status IN"):
		c.passes.Add(1)
	}
	return ctx
}

// TraceQueryEnd adds the rows a status statement wrote (it returns one per row).
func (c *writeCounter) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryEndData) {
	if ctx.Value(statusWrite{}) != nil && d.Err == nil {
		c.writes.Add(d.CommandTag.RowsAffected())
	}
}

type env struct {
	*benchenv.Env // its DB is the tracker's, counted
	count         *writeCounter
	// workers is the stage's ExecutionConfig.Workers.
	workers int
	// lagRunning is the write lag once every execution is running, before any finishes.
	lagRunning histogram
	log        *slog.Logger
	// metrics are the stage's, registered on reg: the benchmark reads the write lag.
	metrics *tracker.Metrics
	reg     *prometheus.Registry
}

func run() error {
	starts := flag.Int("starts", 200, "manual starts timed one after the other")
	running := flag.Int("running", 1000, "executions running at once")
	finished := flag.Int("finished", 10000, "finished executions added for the pass at rest")
	workers := flag.Int("workers", 0, "the stage's workers (0: its default)")
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	admin, kubeconfig := os.Getenv("DATAJOBS_TEST_DATABASE_URL"), os.Getenv("DATAJOBS_TEST_KUBECONFIG")
	if admin == "" || kubeconfig == "" {
		return errors.New("DATAJOBS_TEST_DATABASE_URL and DATAJOBS_TEST_KUBECONFIG are required (run under hack/with-env.sh)")
	}
	e, cleanup, err := setup(ctx, admin, kubeconfig)
	if err != nil {
		return err
	}
	e.workers = *workers
	defer cleanup()

	stop := e.track()
	lat, err := e.benchStart(ctx, *starts)
	if err != nil {
		return err
	}
	fmt.Printf("start -> Job seen by a watch, %d starts: %s\n", len(lat), summary(lat))

	before, statements, created, logs := e.count.writes.Load(), e.count.statements.Load(), e.count.created.Load(), e.count.logs.Load()
	lagBefore := e.lag()
	lat, ours, err := e.benchTransitions(ctx, *running)
	if err != nil {
		return err
	}
	writes := e.count.writes.Load() - before
	lagAfter := e.lag()
	lag := lagAfter.since(lagBefore)
	fmt.Printf("pod Succeeded -> row committed, %d executions: %s\n", len(lat), summary(lat))
	fmt.Printf("Job seen Complete -> row committed, %d executions: %s\n", len(ours), summary(ours))
	moved := len(lat)
	fmt.Printf("datajobs_execution_status_write_lag_seconds (event seen -> row committed), %d writes: p50 <= %s, p99 <= %s (bucket bounds)\n",
		lag.count, lag.quantile(0.50), lag.quantile(0.99))
	for _, phase := range []struct {
		name string
		h    histogram
	}{{"made running", e.lagRunning.since(lagBefore)}, {"succeeded", lagAfter.since(e.lagRunning)}} {
		fmt.Printf("  of which %s: %d writes: p50 <= %s, p99 <= %s\n", phase.name, phase.h.count, phase.h.quantile(0.50), phase.h.quantile(0.99))
	}
	fmt.Printf("execution rows written: %d for %d executions made running and %d of them succeeded: %.3f per transition, in %d statements\n",
		writes, *running, moved, float64(writes)/float64(*running+moved), e.count.statements.Load()-statements)
	// The logs are kept after the final statuses: wait for them, so that the next term
	// starts at rest.
	for e.count.logs.Load()-logs < int64(moved) && ctx.Err() == nil {
		time.Sleep(10 * time.Millisecond)
	}
	fmt.Printf("other writes: %d Job-created marks, %d kept logs\n", e.count.created.Load()-created, e.count.logs.Load()-logs)
	stop()

	if _, err := e.Conn.Exec(ctx, `INSERT INTO data_job_execution (id, job_name, job_uid, type, status, op_id, start_time, end_time)
SELECT 'old-' || i, j.name, j.uid, 'scheduled', 'succeeded', 'o', now() - interval '1 hour', now() - interval '59 minutes'
FROM generate_series(1, $1) i JOIN data_job j ON j.name = 'bench-x-000000'`, *finished); err != nil {
		return fmt.Errorf("insert finished executions: %w", err)
	}
	var final, active int
	if err := e.Conn.QueryRow(ctx, `SELECT count(*) FILTER (WHERE status NOT IN ('submitted', 'running')), count(*) FILTER (WHERE status IN ('submitted', 'running')) FROM data_job_execution`).Scan(&final, &active); err != nil {
		return err
	}
	before, passes := e.count.writes.Load()+e.count.created.Load()+e.count.logs.Load(), e.count.passes.Load()
	stop = e.track()
	for e.count.passes.Load() == passes {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(5 * time.Second) // the Jobs the pass queued are reconciled meanwhile
	stop()
	fmt.Printf("pass at rest over %d finished and %d running executions (%d Jobs): %d execution writes\n",
		final, active, *starts+*running, e.count.writes.Load()+e.count.created.Load()+e.count.logs.Load()-before)
	return nil
}

func setup(ctx context.Context, admin, kubeconfig string) (*env, func(), error) {
	count := &writeCounter{}
	be, err := benchenv.Open(ctx, benchenv.Config{Admin: admin, Kubeconfig: kubeconfig, Prefix: "bench-exec", Tracer: count})
	if err != nil {
		return nil, nil, err
	}
	e := &env{
		Env: be, count: count,
		log: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		reg: prometheus.NewRegistry(),
	}
	e.metrics = tracker.NewMetrics(e.reg)
	return e, be.Close, nil
}

// track runs the execution tracker until the returned stop is called.
func (e *env) track() func() {
	x := tracker.New(tracker.Config{
		Namespace: e.NS, Settings: controller.Settings{Interval: time.Hour, Logger: e.log, Workers: e.workers}, Metrics: e.metrics,
	}, e.DB, e.Client)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = x.Run(ctx, e.Epoch)
	}()
	return func() {
		cancel()
		<-done
	}
}

// jobs creates n data jobs, deployed, with their CronJobs rendered as the synchronizer
// does but with pods that no node takes.
func (e *env) jobs(ctx context.Context, prefix string, n int) ([]string, error) {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("bench-%s-%06d", prefix, i)
	}
	v := "v1"
	err := parallel(names, 16, func(name string) error {
		j, err := e.Svc.CreateJob(ctx, team, job.Job{Name: name, Team: team, Schedule: "0 3 1 1 *"})
		if err != nil {
			return err
		}
		d, err := e.Svc.Deploy(ctx, team, name, job.DeploymentChange{JobVersion: &v}, "bench")
		if err != nil {
			return err
		}
		cj, _ := kube.Render(j, d, kube.RenderConfig{Namespace: e.NS})
		cj.Spec.JobTemplate.Spec.Template.Spec.NodeSelector = map[string]string{"datajobs.bench/hold": "true"}
		_, err = e.Client.BatchV1().CronJobs(e.NS).Create(ctx, cj, metav1.CreateOptions{})
		return err
	})
	return names, err
}

func (e *env) benchStart(ctx context.Context, n int) ([]time.Duration, error) {
	names, err := e.jobs(ctx, "s", n)
	if err != nil {
		return nil, err
	}
	w, err := e.Client.BatchV1().Jobs(e.NS).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	defer w.Stop()
	var out []time.Duration
	for _, name := range names {
		t0 := time.Now()
		ex, err := e.Svc.StartExecution(ctx, team, name, service.ExecutionRequest{}, "bench", "op")
		if err != nil {
			return nil, err
		}
		for ev := range w.ResultChan() {
			if j, ok := ev.Object.(*batchv1.Job); ok && ev.Type == watch.Added && j.Name == ex.ID {
				out = append(out, time.Since(t0))
				break
			}
		}
	}
	return out, nil
}

// benchTransitions returns, per execution moved to Succeeded, the time from the pod status
// write to the row committed, and from the Job seen Complete to the row committed.
func (e *env) benchTransitions(ctx context.Context, n int) ([]time.Duration, []time.Duration, error) {
	names, err := e.jobs(ctx, "x", n)
	if err != nil {
		return nil, nil, err
	}
	ids := make(map[string]string, n) // execution id -> job name
	for _, name := range names {
		ex, err := e.Svc.StartExecution(ctx, team, name, service.ExecutionRequest{}, "bench", "op")
		if err != nil {
			return nil, nil, err
		}
		ids[ex.ID] = name
	}
	pods := map[string]*corev1.Pod{}
	for len(pods) < n {
		list, err := e.Client.CoreV1().Pods(e.NS).List(ctx, metav1.ListOptions{LabelSelector: "datajobs.io/job"})
		if err != nil {
			return nil, nil, err
		}
		for i := range list.Items {
			p := &list.Items[i]
			if _, ok := ids[p.Labels[kube.LabelJobName]]; ok {
				pods[p.Labels[kube.LabelJobName]] = p
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	podList := make([]*corev1.Pod, 0, n)
	for _, p := range pods {
		podList = append(podList, p)
	}
	if err := parallel(podList, 16, func(p *corev1.Pod) error { return e.kubelet(ctx, p, corev1.PodRunning) }); err != nil {
		return nil, nil, err
	}
	if err := e.waitStatus(ctx, "running", n, nil); err != nil {
		return nil, nil, err
	}
	e.lagRunning = e.lag() // the write lag of the starts and the running pods ends here
	// The first 100 stay running, for the pass at rest.
	keep := min(100, n/10)
	var mu sync.Mutex
	written := map[string]time.Time{}
	// When each Job is seen Complete: the Job controller's part of the latency ends there.
	complete := map[string]time.Time{}
	w, err := e.Client.BatchV1().Jobs(e.NS).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, nil, err
	}
	defer w.Stop()
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for ev := range w.ResultChan() {
			j, ok := ev.Object.(*batchv1.Job)
			if !ok {
				continue
			}
			for _, c := range j.Status.Conditions {
				if c.Type == batchv1.JobComplete && c.Status == corev1.ConditionTrue {
					mu.Lock()
					if _, ok := complete[j.Name]; !ok {
						complete[j.Name] = time.Now()
					}
					mu.Unlock()
				}
			}
		}
	}()
	// Rows are polled while the pods are written, so that each is seen when committed.
	committed := map[string]time.Time{}
	polled := make(chan error, 1)
	go func() { polled <- e.waitStatus(ctx, "succeeded", n-keep, committed) }()
	if err := parallel(podList[keep:], 16, func(p *corev1.Pod) error {
		t0 := time.Now() // the pod's transition is at most this old when the write returns
		err := e.kubelet(ctx, p, corev1.PodSucceeded)
		mu.Lock()
		written[p.Labels[kube.LabelJobName]] = t0
		mu.Unlock()
		return err
	}); err != nil {
		return nil, nil, err
	}
	if err := <-polled; err != nil {
		return nil, nil, err
	}
	w.Stop()
	<-watched
	var total, ours []time.Duration
	for id, t := range committed {
		total = append(total, t.Sub(written[id]))
		if c, ok := complete[id]; ok {
			ours = append(ours, max(t.Sub(c), 0))
		}
	}
	return total, ours, nil
}

// waitStatus polls every 5 ms until n executions of the x jobs have the status, noting
// when each was first seen so.
func (e *env) waitStatus(ctx context.Context, status string, n int, seen map[string]time.Time) error {
	for {
		rows, err := e.Conn.Query(ctx, `SELECT id FROM data_job_execution WHERE status = $1 AND job_name LIKE 'bench-x-%'`, status)
		if err != nil {
			return err
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return err
		}
		now := time.Now()
		for _, id := range ids {
			if seen != nil {
				if _, ok := seen[id]; !ok {
					seen[id] = now
				}
			}
		}
		if len(ids) >= n {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d of %d executions %s: %w", len(ids), n, status, ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// kubelet writes a pod's phase and its container's state as a kubelet would.
func (e *env) kubelet(ctx context.Context, p *corev1.Pod, phase corev1.PodPhase) error {
	state := corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}}
	if phase == corev1.PodSucceeded {
		now := metav1.Now()
		state = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Completed", StartedAt: now, FinishedAt: now}}
	}
	for {
		err := devenv.SetPodStatus(ctx, e.Client, p, phase, "", state)
		if !apierrors.IsConflict(err) {
			return err
		}
	}
}

func parallel[T any](items []T, workers int, fn func(T) error) error {
	work := make(chan T)
	var wg sync.WaitGroup
	var first atomic.Pointer[error]
	for range workers {
		wg.Go(func() {
			for it := range work {
				if err := fn(it); err != nil {
					first.CompareAndSwap(nil, &err)
				}
			}
		})
	}
	for _, it := range items {
		work <- it
	}
	close(work)
	wg.Wait()
	if p := first.Load(); p != nil {
		return *p
	}
	return nil
}

// histogram is a snapshot of the write lag histogram's cumulative buckets.
type histogram struct {
	count  uint64
	bounds []float64
	counts []uint64
}

func (e *env) lag() histogram {
	var h histogram
	families, err := e.reg.Gather()
	if err != nil {
		return h
	}
	for _, f := range families {
		if f.GetName() != "datajobs_execution_status_write_lag_seconds" {
			continue
		}
		for _, m := range f.GetMetric() {
			hist := m.GetHistogram()
			h.count = hist.GetSampleCount()
			for _, b := range hist.GetBucket() {
				h.bounds = append(h.bounds, b.GetUpperBound())
				h.counts = append(h.counts, b.GetCumulativeCount())
			}
		}
	}
	return h
}

// since is the histogram of the observations made after before.
func (h histogram) since(before histogram) histogram {
	out := histogram{count: h.count - before.count, bounds: h.bounds, counts: slices.Clone(h.counts)}
	for i := range out.counts {
		if i < len(before.counts) {
			out.counts[i] -= before.counts[i]
		}
	}
	return out
}

// quantile is the upper bound of the bucket holding the q quantile ("> last" beyond).
func (h histogram) quantile(q float64) string {
	want := uint64(q * float64(h.count))
	for i, c := range h.counts {
		if c >= want && c > 0 {
			return time.Duration(h.bounds[i] * float64(time.Second)).String()
		}
	}
	if len(h.bounds) == 0 {
		return "n/a"
	}
	return "> " + time.Duration(h.bounds[len(h.bounds)-1]*float64(time.Second)).String()
}

// summary is "p50 …, p99 …, max …" of ds, to 0.1 ms.
func summary(ds []time.Duration) string {
	p := stats.Percentiles(ds, 50, 99, 100)
	r := func(d time.Duration) time.Duration { return d.Round(100 * time.Microsecond) }
	return fmt.Sprintf("p50 %s, p99 %s, max %s", r(p[0]), r(p[1]), r(p[2]))
}
