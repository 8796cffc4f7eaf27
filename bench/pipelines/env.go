package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/jackc/pgx/v5" //nolint:depguard // the benchmark polls execution rows for their commit
	"github.com/prometheus/client_golang/prometheus"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	"github.com/datajobs/datajobs/bench/internal/benchenv"
	"github.com/datajobs/datajobs/internal/controller"
	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/kube"
	"github.com/datajobs/datajobs/internal/service"
	"github.com/datajobs/datajobs/internal/stepper"
	"github.com/datajobs/datajobs/internal/tracker"
)

type env struct {
	*benchenv.Env
	// seen is when the watch saw each Job (by name: the execution's id) added; created
	// when the poll first saw each execution's row, final its final status committed.
	seen, created, final *moments
	// reg holds the tracker's and the stepper's metrics.
	reg *prometheus.Registry
}

// jobs creates n data jobs, deployed with concurrency policy Allow, their CronJobs
// rendered and applied as the synchronizer would (suspended: only the leader starts their
// runs), and their applied deployments recorded, so that the stepper may start them.
func (e *env) jobs(ctx context.Context, n int) ([]string, error) {
	render := kube.RenderConfig{Namespace: e.NS}.WithDefaults()
	names := make([]string, n)
	applied := make([]job.ActualDeployment, n)
	v, allow, suspend := "v1", "Allow", true
	for i := range names {
		names[i] = fmt.Sprintf("bench-node-%02d", i)
		if _, err := e.Svc.CreateJob(ctx, team, job.Job{Name: names[i], Team: team, Schedule: "0 3 1 1 *"}); err != nil {
			return nil, fmt.Errorf("create job %s: %w", names[i], err)
		}
		d, err := e.Svc.Deploy(ctx, team, names[i], job.DeploymentChange{JobVersion: &v, Policy: job.PolicyChange{ConcurrencyPolicy: &allow}}, "bench")
		if err != nil {
			return nil, fmt.Errorf("deploy %s: %w", names[i], err)
		}
		j, err := e.Svc.GetJob(ctx, team, names[i]) // the deploy moved its generation on
		if err != nil {
			return nil, fmt.Errorf("read job %s: %w", names[i], err)
		}
		cj, hash := kube.Render(j, d, render)
		if i == 0 {
			// The pods run as their team's ServiceAccount (issue 43's profiles), which the
			// synchronizer makes and this benchmark runs without: without it the
			// apiserver admitted no pod and no run ever ended.
			sa := cj.Spec.JobTemplate.Spec.Template.Spec.ServiceAccountName
			if _, err := kube.NewWriter(e.Client, e.NS).EnsureJobServiceAccount(ctx, sa, "bench"); err != nil {
				return nil, fmt.Errorf("job service account %s: %w", sa, err)
			}
		}
		cj.Spec.Suspend = &suspend
		cj, err = e.Client.BatchV1().CronJobs(e.NS).Create(ctx, cj, metav1.CreateOptions{})
		if err != nil {
			return nil, fmt.Errorf("create cronjob %s: %w", names[i], err)
		}
		applied[i] = job.ActualDeployment{
			JobName: j.Name, JobUID: j.UID, Generation: j.Generation, Team: j.Team, DeploymentVersionSHA: hash,
			JobVersion: d.JobVersion, VDKVersion: d.VDKVersion, PythonVersion: d.PythonVersion, Schedule: d.Schedule,
			Resources: render.Resources.Effective(d.Resources), Enabled: d.Enabled, DeployedBy: d.DeployedBy,
			DeployedDate: time.Now(), CronJobGeneration: cj.Generation, CronJobUID: string(cj.UID),
		}
	}
	wrote, err := e.DB.RecordAppliedAll(ctx, job.Fence{Epoch: e.Epoch}, applied)
	if err != nil {
		return nil, fmt.Errorf("record applied deployments: %w", err)
	}
	for i, w := range wrote {
		if !w {
			return nil, fmt.Errorf("the applied deployment of %s was not recorded", names[i])
		}
	}
	return names, nil
}

// leader runs the execution tracker (its defaults) and the stepper of step until the
// returned stop is called, as a leader's term runs them.
func (e *env) leader(step stepper.Config) (stop func()) {
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	step.Logger, step.Registerer = log, e.reg
	x := tracker.New(tracker.Config{Namespace: e.NS, Settings: controller.Settings{Interval: time.Hour, Logger: log}, Metrics: tracker.NewMetrics(e.reg)}, e.DB, e.Client)
	st := stepper.New(step, e.DB)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = x.Run(ctx, e.Epoch) })
	wg.Go(func() { _ = st.Run(ctx, e.Epoch) })
	return func() {
		cancel()
		wg.Wait()
	}
}

// observe watches the namespace's Jobs (each added one is seen) and polls, every period,
// the executions under way and those seen before (created, then final), until the
// returned stop is called.
func (e *env) observe(ctx context.Context, period time.Duration) (stop func(), err error) {
	conn, err := pgx.Connect(ctx, e.URL)
	if err != nil {
		return nil, fmt.Errorf("connect the poll: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	w, err := e.watchJobs(ctx)
	if err != nil {
		cancel()
		_ = conn.Close(ctx)
		return nil, err
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		for ev := range w.ResultChan() {
			if j, ok := ev.Object.(*batchv1.Job); ok && ev.Type == watch.Added {
				e.seen.set(j.Name, time.Now())
			}
		}
	})
	wg.Go(func() {
		defer conn.Close(context.Background())
		for {
			select {
			case <-ctx.Done():
				return
			case <-time.After(period):
			}
			if err := e.poll(ctx, conn); err != nil && ctx.Err() == nil {
				fmt.Fprintln(os.Stderr, "bench/pipelines: poll:", err)
			}
		}
	})
	return func() {
		cancel()
		w.Stop()
		wg.Wait()
	}, nil
}

// watchJobs watches the namespace's Jobs from now on, watching again from the last
// version seen when the apiserver ends a watch (under load it did, and Jobs went unseen).
func (e *env) watchJobs(ctx context.Context) (watch.Interface, error) {
	jobs := e.Client.BatchV1().Jobs(e.NS)
	l, err := jobs.List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list jobs: %w", err)
	}
	w, err := watchtools.NewRetryWatcherWithContext(ctx, l.ResourceVersion, &cache.ListWatch{
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) { return jobs.Watch(ctx, o) },
	})
	if err != nil {
		return nil, fmt.Errorf("watch jobs: %w", err)
	}
	return w, nil
}

// poll notes the executions under way now committed, and those of them whose final
// status is now committed.
func (e *env) poll(ctx context.Context, conn *pgx.Conn) error {
	type row struct {
		ID    string
		Final bool
	}
	rows, _ := conn.Query(ctx, `SELECT id, status NOT IN ('submitted', 'running') FROM data_job_execution
WHERE status IN ('submitted', 'running') OR id = ANY($1)`, append(e.created.except(e.final), e.seen.except(e.final)...))
	got, err := pgx.CollectRows(rows, pgx.RowToStructByPos[row])
	if err != nil {
		return err
	}
	now := time.Now()
	for _, r := range got {
		if !r.Final {
			e.created.set(r.ID, now) // one that ended between two polls has no moment of commit
		}
		if r.Final {
			e.final.set(r.ID, now)
		}
	}
	return nil
}

// floorSequential starts n manual executions of name one after the other, each once the
// last one's Job was seen, and returns the times from each request, and from its answer,
// to its Job seen.
func (e *env) floorSequential(ctx context.Context, name string, n int) (fromCall, fromCommit []time.Duration, err error) {
	for range n {
		t0 := time.Now()
		ex, err := e.Svc.StartExecution(ctx, team, name, service.ExecutionRequest{}, "bench", "op")
		if err != nil {
			return nil, nil, fmt.Errorf("start %s: %w", name, err)
		}
		t1 := time.Now()
		seen, err := e.seen.wait(ctx, ex.ID)
		if err != nil {
			return nil, nil, err
		}
		fromCall, fromCommit = append(fromCall, seen.Sub(t0)), append(fromCommit, seen.Sub(t1))
	}
	return fromCall, fromCommit, nil
}

// floorBurst starts n manual executions of name at once and returns the times from each
// start's answer to its Job seen.
func (e *env) floorBurst(ctx context.Context, name string, n int) ([]time.Duration, error) {
	out := make([]time.Duration, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			ex, err := e.Svc.StartExecution(ctx, team, name, service.ExecutionRequest{}, "bench", "op")
			if err != nil {
				errs[i] = fmt.Errorf("start %s: %w", name, err)
				return
			}
			t1 := time.Now()
			seen, err := e.seen.wait(ctx, ex.ID)
			out[i], errs[i] = seen.Sub(t1), err
		})
	}
	wg.Wait()
	return out, errors.Join(errs...)
}

// runsEnded waits until n runs have ended, and fails unless all succeeded.
func (e *env) runsEnded(ctx context.Context, n int) error {
	for {
		var ended, succeeded int
		err := e.Conn.QueryRow(ctx, `SELECT count(*) FILTER (WHERE status <> 'running'), count(*) FILTER (WHERE status = 'succeeded') FROM pipeline_run`).
			Scan(&ended, &succeeded)
		if err != nil {
			return fmt.Errorf("read runs: %w", err)
		}
		if ended >= n {
			if succeeded < n {
				return fmt.Errorf("%d of %d runs succeeded", succeeded, n)
			}
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d of %d runs ended: %w", ended, n, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// latencies are, for every node of every run that has an upstream node (a node of the
// chain has one: the node before it), the time from its upstream's final status committed
// to its Job seen (total), and its two parts: to its own execution committed (the
// stepper's), and from there to the Job seen (the tracker's, as a manual start's). The
// parts leave out a node whose execution was never seen under way (unsplit).
type latencies struct {
	total, step, create []time.Duration
	unsplit             int
}

func (e *env) edgeLatencies(ctx context.Context) (latencies, error) {
	rows, _ := e.Conn.Query(ctx, `SELECT n.execution_id, up.execution_id
FROM pipeline_node_run n JOIN pipeline_node_run up ON up.run_id = n.run_id
	AND up.node = 'node-' || lpad((substr(n.node, 6)::int - 1)::text, 2, '0')
WHERE n.node <> 'node-00'`)
	type edge struct{ Down, Up string }
	var out latencies
	edges, err := pgx.CollectRows(rows, pgx.RowToStructByPos[edge])
	if err != nil {
		return out, fmt.Errorf("read node runs: %w", err)
	}
	for _, ed := range edges {
		seen, ok := e.seen.get(ed.Down)
		final, okUp := e.final.get(ed.Up)
		if !ok || !okUp {
			return out, fmt.Errorf("execution %s (Job seen: %v) after %s (final seen: %v)", ed.Down, ok, ed.Up, okUp)
		}
		out.total = append(out.total, seen.Sub(final))
		created, ok := e.created.get(ed.Down)
		if !ok {
			out.unsplit++
			continue
		}
		out.step = append(out.step, created.Sub(final))
		out.create = append(out.create, seen.Sub(created))
	}
	return out, nil
}

// moments are when each of a set of names was first observed.
type moments struct {
	mu      sync.Mutex
	at      map[string]time.Time
	waiters map[string]chan struct{}
}

func newMoments() *moments {
	return &moments{at: map[string]time.Time{}, waiters: map[string]chan struct{}{}}
}

// set notes name at t unless it was noted before, and wakes its waiter.
func (m *moments) set(name string, t time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.at[name]; ok {
		return
	}
	m.at[name] = t
	if c, ok := m.waiters[name]; ok {
		close(c)
		delete(m.waiters, name)
	}
}

func (m *moments) get(name string) (time.Time, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	t, ok := m.at[name]
	return t, ok
}

// wait returns when name was noted, waiting for it.
func (m *moments) wait(ctx context.Context, name string) (time.Time, error) {
	m.mu.Lock()
	t, ok := m.at[name]
	c, waiting := m.waiters[name]
	if !ok && !waiting {
		c = make(chan struct{})
		m.waiters[name] = c
	}
	m.mu.Unlock()
	if ok {
		return t, nil
	}
	select {
	case <-c:
		t, _ := m.get(name)
		return t, nil
	case <-ctx.Done():
		return time.Time{}, fmt.Errorf("job %s never seen: %w", name, ctx.Err())
	}
}

// except returns the names noted in m and not in other.
func (m *moments) except(other *moments) []string {
	m.mu.Lock()
	names := make([]string, 0, len(m.at))
	for n := range m.at {
		names = append(names, n)
	}
	m.mu.Unlock()
	other.mu.Lock()
	defer other.mu.Unlock()
	out := names[:0]
	for _, n := range names {
		if _, ok := other.at[n]; !ok {
			out = append(out, n)
		}
	}
	return out
}
