package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5" //nolint:depguard // the benchmark polls execution rows and reads events
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/datajobs/datajobs/bench/internal/benchenv"
	"github.com/datajobs/datajobs/internal/controller"
	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/kube"
	"github.com/datajobs/datajobs/internal/maintenance"
	"github.com/datajobs/datajobs/internal/tracker"
)

type env struct {
	*benchenv.Env
	kubeconfig string
	// created, running and recorded are when each run (by its Job's name, its execution's
	// id) was first seen: its Job added, its pod Running (or past it), its row running (or
	// past it).
	created, running, recorded moments
}

// burst deploys n jobs due at one minute (or spread by H over o.spread minutes), runs the
// leader's tracker and services, and prints what each run waited for.
func burst(ctx context.Context, e *env, n int, hashed bool, o options) error {
	lead := o.lead
	if lead == 0 {
		lead = 45*time.Second + time.Duration(n)*15*time.Millisecond
	}
	due := dueMinute(time.Now().Add(lead), o.spread)
	schedule := fmt.Sprintf("%d * * * *", due.Minute())
	if hashed {
		schedule = fmt.Sprintf("H(%d-%d) * * * *", due.Minute(), due.Minute()+o.spread-1)
	}
	fmt.Printf("\n## %d jobs, %s, due from %s (setup began %s before)\n\n", n, schedule, due.Format("15:04"), time.Until(due).Round(time.Second))
	stopLeader := e.leader()
	defer stopLeader()
	stopObserve, err := e.observe(ctx, o.poll)
	if err != nil {
		return err
	}
	defer stopObserve()
	t0 := time.Now()
	names, err := e.deploy(ctx, n, schedule, o.deadline)
	if err != nil {
		return err
	}
	fmt.Printf("setup: %d jobs deployed and their CronJobs created in %s; %s left before the due minute\n",
		n, time.Since(t0).Round(time.Second), time.Until(due).Round(time.Second))
	if time.Now().After(due.Add(-5 * time.Second)) {
		return fmt.Errorf("the setup ended %s before the due minute: raise -lead", time.Until(due))
	}
	skewBefore, err := skewBuckets(ctx, e.kubeconfig)
	if err != nil {
		fmt.Printf("CronJob controller skew: not read (%v)\n", err)
	}
	writes := newWriteSampler(e.Client)
	stopWrites := writes.start(ctx, 2*time.Second)
	last := due
	if hashed {
		last = due.Add(time.Duration(o.spread-1) * time.Minute)
	}
	end := last.Add(o.deadline + o.settle)
	if err := waitRuns(ctx, e, n, end); err != nil {
		return err
	}
	stopWrites()
	return e.report(ctx, names, writes, skewBefore, o.deadline)
}

// dueMinute is the first whole minute at or after t from which spread minutes stay within
// its hour (an hourly schedule H(a-b) cannot wrap).
func dueMinute(t time.Time, spread int) time.Time {
	m := t.Truncate(time.Minute)
	if m.Before(t) {
		m = m.Add(time.Minute)
	}
	if m.Minute()+spread > 60 {
		m = m.Truncate(time.Hour).Add(time.Hour)
	}
	return m
}

// deploy creates and deploys n jobs of schedule (execution notifications on, a delay of
// one minute: lateness is watched), 16 at a time, creates their CronJobs as the
// synchronizer renders them and records them applied.
func (e *env) deploy(ctx context.Context, n int, schedule string, deadline time.Duration) ([]string, error) {
	render := kube.RenderConfig{Namespace: e.NS}.WithDefaults()
	// The pods run as their team's ServiceAccount (issue 43's profiles), which the
	// synchronizer makes and this benchmark runs without: without it the apiserver admits
	// no pod (bench/pipelines found it, 5467b6c).
	sa := job.Profile{}.ServiceAccountOf(team, render.JobServiceAccountTemplate)
	if _, err := kube.NewWriter(e.Client, e.NS).EnsureJobServiceAccount(ctx, sa, "bench"); err != nil {
		return nil, fmt.Errorf("job service account %s: %w", sa, err)
	}
	names := make([]string, n)
	applied := make([]job.ActualDeployment, n)
	errs := make([]error, n)
	v, secs := "v1", int64(deadline.Seconds())
	work := make(chan int)
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for i := range work {
				names[i] = fmt.Sprintf("sched-%05d", i)
				applied[i], errs[i] = e.deployOne(ctx, render, names[i], schedule, job.DeploymentChange{
					JobVersion: &v, Policy: job.PolicyChange{StartingDeadlineSeconds: &secs},
				})
			}
		})
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	for i := 0; i < n; i += 1000 {
		if _, err := e.DB.RecordAppliedAll(ctx, job.Fence{Epoch: e.Epoch}, applied[i:min(i+1000, n)]); err != nil {
			return nil, fmt.Errorf("record applied deployments: %w", err)
		}
	}
	return names, nil
}

func (e *env) deployOne(ctx context.Context, render kube.RenderConfig, name, schedule string, c job.DeploymentChange) (job.ActualDeployment, error) {
	if _, err := e.Svc.CreateJob(ctx, team, job.Job{
		Name: name, Team: team, Schedule: schedule, EnableExecutionNotifications: true, NotificationDelayPeriodMinutes: 1,
	}); err != nil {
		return job.ActualDeployment{}, fmt.Errorf("create job %s: %w", name, err)
	}
	d, err := e.Svc.Deploy(ctx, team, name, c, "bench")
	if err != nil {
		return job.ActualDeployment{}, fmt.Errorf("deploy %s: %w", name, err)
	}
	j, err := e.Svc.GetJob(ctx, team, name)
	if err != nil {
		return job.ActualDeployment{}, fmt.Errorf("read job %s: %w", name, err)
	}
	cj, hash := kube.Render(j, d, render)
	if cj, err = e.Client.BatchV1().CronJobs(e.NS).Create(ctx, cj, metav1.CreateOptions{}); err != nil {
		return job.ActualDeployment{}, fmt.Errorf("create cronjob %s: %w", name, err)
	}
	return job.ActualDeployment{
		JobName: j.Name, JobUID: j.UID, Generation: j.Generation, Team: j.Team, DeploymentVersionSHA: hash,
		JobVersion: d.JobVersion, VDKVersion: d.VDKVersion, PythonVersion: d.PythonVersion, Schedule: d.Schedule,
		Resources: render.Resources.Effective(d.Resources), Enabled: d.Enabled, DeployedBy: d.DeployedBy,
		DeployedDate: time.Now(), CronJobGeneration: cj.Generation, CronJobUID: string(cj.UID),
	}, nil
}

// leader runs the execution tracker and the missed-runs and lateness services (their
// defaults) until the returned stop is called, as a leader's term runs them.
func (e *env) leader() (stop func()) {
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	x := tracker.New(tracker.Config{Namespace: e.NS, Settings: controller.Settings{Logger: log}}, e.DB, e.Client)
	m := maintenance.New(maintenance.Config{Listener: e.DB, Logger: log},
		maintenance.NewMissedRuns(maintenance.MissedRunsConfig{Jobs: x, Settings: maintenance.Settings{Logger: log}}, e.DB).Service(),
		maintenance.NewLateness(maintenance.LatenessConfig{Jobs: x}, e.DB).Service())
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = x.Run(ctx, e.Epoch) })
	wg.Go(func() { _ = m.Run(ctx, e.Epoch) })
	return func() {
		cancel()
		wg.Wait()
	}
}

// observe watches the namespace's Jobs and Pods and polls the execution rows every period,
// noting when each run was first seen created, running and recorded running.
func (e *env) observe(ctx context.Context, period time.Duration) (stop func(), err error) {
	conn, err := pgx.Connect(ctx, e.URL)
	if err != nil {
		return nil, fmt.Errorf("connect the poll: %w", err)
	}
	jw, err := e.Client.BatchV1().Jobs(e.NS).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		_ = conn.Close(ctx)
		return nil, fmt.Errorf("watch jobs: %w", err)
	}
	pw, err := e.Client.CoreV1().Pods(e.NS).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		jw.Stop()
		_ = conn.Close(ctx)
		return nil, fmt.Errorf("watch pods: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		for ev := range jw.ResultChan() {
			if j, ok := ev.Object.(*batchv1.Job); ok && ev.Type == watch.Added {
				e.created.set(j.Name, time.Now())
			}
		}
	})
	wg.Go(func() {
		for ev := range pw.ResultChan() {
			if p, ok := ev.Object.(*corev1.Pod); ok && (p.Status.Phase == corev1.PodRunning || p.Status.Phase == corev1.PodSucceeded) {
				e.running.set(p.Labels["job-name"], time.Now())
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
			rows, _ := conn.Query(ctx, `SELECT id FROM data_job_execution WHERE status NOT IN ('submitted', 'skipped')`)
			ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
			if err != nil && ctx.Err() == nil {
				fmt.Fprintln(os.Stderr, "bench/schedule: poll:", err)
			}
			now := time.Now()
			for _, id := range ids {
				e.recorded.set(id, now)
			}
		}
	})
	return func() {
		cancel()
		jw.Stop()
		pw.Stop()
		wg.Wait()
	}, nil
}

// waitRuns returns once n runs are recorded running, or at end.
func waitRuns(ctx context.Context, e *env, n int, end time.Time) error {
	for e.recorded.len() < n && time.Now().Before(end) {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
	return nil
}

// scheduled is the schedule time of the run whose Job is named name (job.ScheduledRunID:
// the CronJob's name and the time in minutes since the epoch).
func scheduled(name string) (time.Time, bool) {
	i := strings.LastIndexByte(name, '-')
	m, err := strconv.ParseInt(name[i+1:], 10, 64)
	return time.Unix(m*60, 0), err == nil && i > 0
}

// moments are when each of a set of names was first observed.
type moments struct {
	mu sync.Mutex
	at map[string]time.Time
}

func (m *moments) set(name string, t time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.at == nil {
		m.at = map[string]time.Time{}
	}
	if _, ok := m.at[name]; !ok {
		m.at[name] = t
	}
}

func (m *moments) len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.at)
}

// since returns, for every name noted, the time from its schedule time to its moment.
func (m *moments) since() []time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]time.Duration, 0, len(m.at))
	for name, t := range m.at {
		if at, ok := scheduled(name); ok {
			out = append(out, t.Sub(at))
		}
	}
	return out
}
