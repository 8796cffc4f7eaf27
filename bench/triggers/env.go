package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/jackc/pgx/v5" //nolint:depguard // the benchmark listens for the executions' NOTIFY
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/datajobs/datajobs/bench/internal/benchenv"
	"github.com/datajobs/datajobs/bench/internal/moments"
	"github.com/datajobs/datajobs/bench/internal/stats"
	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/kube"
	"github.com/datajobs/datajobs/internal/store"
)

type env struct {
	*benchenv.Env
	// seen is when the watch saw each Job (by name: the execution's id) added.
	seen *moments.Moments
	// committed is when each execution's NOTIFY (sent by the transaction that inserted
	// it: the firing's) was received, by the execution's id.
	committed *moments.Moments
	// firings is the store as the firer sees it, each firing measured.
	firings *firings
	// probe splits the tracker's part (probe.go).
	probe *probe
}

// open opens the benchmark's environment (benchenv, under hack/with-env.sh) with a database
// pool of maxConns connections whose acquires a new probe times.
func open(ctx context.Context, maxConns int) (*env, error) {
	admin, kubeconfig := os.Getenv("DATAJOBS_TEST_DATABASE_URL"), os.Getenv("DATAJOBS_TEST_KUBECONFIG")
	if admin == "" || kubeconfig == "" {
		return nil, errors.New("DATAJOBS_TEST_DATABASE_URL and DATAJOBS_TEST_KUBECONFIG are required (run under hack/with-env.sh)")
	}
	p := newProbe()
	be, err := benchenv.Open(ctx, benchenv.Config{Admin: admin, Kubeconfig: kubeconfig, Prefix: "bench-trig", MaxConns: int32(maxConns), Tracer: p.pool})
	if err != nil {
		return nil, err
	}
	e := &env{Env: be, seen: moments.New(), committed: moments.New(), probe: p}
	e.firings = &firings{Store: be.DB}
	return e, nil
}

// firings is the store with each FireTrigger's duration and runs started noted: what a
// firing costs, apart from the tracker's part.
type firings struct {
	*store.Store
	mu      sync.Mutex
	took    []time.Duration
	started []time.Duration // runs started per firing, as a "duration" of that many ns to use stats
}

// FireTrigger is the store's, measured.
func (f *firings) FireTrigger(ctx context.Context, fence job.Fence, id string, now time.Time) (store.TriggerFiring, error) {
	t0 := time.Now()
	res, err := f.Store.FireTrigger(ctx, fence, id, now)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.took = append(f.took, time.Since(t0))
	f.started = append(f.started, time.Duration(len(res.Started)))
	return res, err
}

// summary says how many firings there were, what they took and how many runs each started.
func (f *firings) summary() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	p := stats.Percentiles(f.started, 50, 99, 100)
	return fmt.Sprintf("%d firings: each took %s; runs started per firing p50 %d, p99 %d, max %d",
		len(f.took), stats.Summary(f.took), p[0], p[1], p[2])
}

// job creates the i-th trigger's job (its name returned), deployed with concurrency policy Allow, its CronJob
// rendered and applied as the synchronizer would (suspended: only the leader starts its
// runs), and its applied deployment recorded.
func (e *env) job(ctx context.Context, i int) (string, error) {
	jobName := jobName
	if i > 0 {
		jobName = fmt.Sprintf("%s-%02d", jobName, i)
	}
	render := kube.RenderConfig{Namespace: e.NS}.WithDefaults()
	v, allow, suspend := "v1", "Allow", true
	if _, err := e.Svc.CreateJob(ctx, team, job.Job{Name: jobName, Team: team, Schedule: "0 3 1 1 *"}); err != nil {
		return "", fmt.Errorf("create job: %w", err)
	}
	d, err := e.Svc.Deploy(ctx, team, jobName, job.DeploymentChange{JobVersion: &v, Policy: job.PolicyChange{ConcurrencyPolicy: &allow}}, "bench")
	if err != nil {
		return "", fmt.Errorf("deploy: %w", err)
	}
	j, err := e.Svc.GetJob(ctx, team, jobName)
	if err != nil {
		return "", fmt.Errorf("read job: %w", err)
	}
	cj, hash := kube.Render(j, d, render)
	// The pods run as their team's ServiceAccount (issue 43's profiles), which the
	// synchronizer makes and this benchmark runs without: with datajobs-job only, the
	// apiserver admitted no pod (the Jobs' FailedCreate), as bench/pipelines found.
	sa := cj.Spec.JobTemplate.Spec.Template.Spec.ServiceAccountName
	if _, err := kube.NewWriter(e.Client, e.NS).EnsureJobServiceAccount(ctx, sa, "bench"); err != nil {
		return "", fmt.Errorf("job service account %s: %w", sa, err)
	}
	cj.Spec.Suspend = &suspend
	if cj, err = e.Client.BatchV1().CronJobs(e.NS).Create(ctx, cj, metav1.CreateOptions{}); err != nil {
		return "", fmt.Errorf("create cronjob: %w", err)
	}
	wrote, err := e.DB.RecordAppliedAll(ctx, job.Fence{Epoch: e.Epoch}, []job.ActualDeployment{{
		JobName: j.Name, JobUID: j.UID, Generation: j.Generation, Team: j.Team, DeploymentVersionSHA: hash,
		JobVersion: d.JobVersion, VDKVersion: d.VDKVersion, PythonVersion: d.PythonVersion, Schedule: d.Schedule,
		Resources: render.Resources.Effective(d.Resources), Enabled: d.Enabled, DeployedBy: d.DeployedBy,
		DeployedDate: time.Now(), CronJobGeneration: cj.Generation, CronJobUID: string(cj.UID),
	}})
	if err != nil || !wrote[0] {
		return "", fmt.Errorf("record the applied deployment (%v): %w", wrote, err)
	}
	return jobName, nil
}

// watch watches the namespace's Jobs (each added one is seen), watching again from the
// last version seen when the server ends a watch, until the returned stop is called.
func (e *env) watch(ctx context.Context) (stop func(), err error) {
	ctx, cancel := context.WithCancel(ctx)
	w, err := e.Client.BatchV1().Jobs(e.NS).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		cancel()
		return nil, fmt.Errorf("watch jobs: %w", err)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		rv := ""
		for ctx.Err() == nil {
			for ev := range w.ResultChan() {
				if j, ok := ev.Object.(*batchv1.Job); ok {
					rv = j.ResourceVersion
					if ev.Type == watch.Added {
						e.seen.Set(j.Name, time.Now())
					}
				}
			}
			if w, err = e.Client.BatchV1().Jobs(e.NS).Watch(ctx, metav1.ListOptions{ResourceVersion: rv}); err != nil {
				return
			}
		}
	})
	return func() {
		cancel() // ends the watch under way
		wg.Wait()
	}, nil
}

// listen notes when each execution's row was committed: its NOTIFY on the executions'
// channel is delivered at the commit of the transaction that inserted it (a firing's), so
// a latency splits into the firer's part and the tracker's. It runs until the returned
// stop is called.
func (e *env) listen(ctx context.Context) (stop func(), err error) {
	conn, err := pgx.Connect(ctx, e.URL)
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	if _, err := conn.Exec(ctx, "LISTEN "+store.ExecutionsChannel); err != nil {
		_ = conn.Close(ctx)
		return nil, fmt.Errorf("listen: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			n, err := conn.WaitForNotification(ctx)
			if err != nil {
				if !errors.Is(err, context.Canceled) {
					fmt.Println("bench/triggers: listen:", err)
				}
				return
			}
			e.committed.Set(n.Payload, time.Now())
		}
	})
	return func() {
		cancel()
		wg.Wait()
		_ = conn.Close(context.Background())
	}, nil
}
