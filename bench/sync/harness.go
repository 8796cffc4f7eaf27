package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5" //nolint:depguard // the benchmark inspects rows (xmin, counts) as tests do
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/datajobs/datajobs/internal/controller"
	"github.com/datajobs/datajobs/internal/devenv"
	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/kube"
	"github.com/datajobs/datajobs/internal/service"
	"github.com/datajobs/datajobs/internal/store"
	"github.com/datajobs/datajobs/internal/synchronizer"
)

// team owns every benchmark job.
const team = "bench"

// schedule fires once a year (1 January, 03:00 UTC), so the CronJob controller starts no
// Job while a benchmark runs and only the synchronizer's own work is measured.
const schedule = "0 3 1 1 *"

// limits are the client rate limits, the same for the synchronizer, the floor and the
// serve processes: QPS 0 is the service's default, "auto" (no client-side limit when the
// apiserver runs API Priority and Fairness, else 50/100); a negative QPS is no limit.
type limits struct {
	QPS   float32
	Burst int
}

func (l limits) String() string {
	switch {
	case l.QPS == 0:
		return "auto"
	case l.QPS < 0:
		return "none"
	}
	return fmt.Sprintf("%g/%d", l.QPS, l.Burst)
}

// flags are the serve command line's flags for these limits.
func (l limits) flags() []string {
	if l.QPS == 0 {
		return []string{"--kube-qps", "auto", "--kube-burst", "auto"}
	}
	return []string{"--kube-qps", fmt.Sprint(l.QPS), "--kube-burst", strconv.Itoa(l.Burst)}
}

// requestCounter counts the requests a Kubernetes client sends, reads and writes apart.
type requestCounter struct {
	reads, writes atomic.Int64
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func (c *requestCounter) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(r *http.Request) (*http.Response, error) {
		switch r.Method {
		case http.MethodGet, http.MethodHead:
			c.reads.Add(1)
		default:
			c.writes.Add(1)
		}
		return rt.RoundTrip(r)
	})
}

// clientset builds a fresh client (its own connection and rate limiter) the way the
// service does (kube.Connect, which resolves "auto"), with b's limits. When counter is not
// nil, every request is counted.
func (b *bench) clientset(ctx context.Context, counter *requestCounter) (kubernetes.Interface, error) {
	c, err := kube.Connect(ctx, kube.ClusterConfig{Kubeconfig: b.kubeconfig, QPS: b.limits.QPS, Burst: b.limits.Burst, UserAgent: "datajobs-bench"})
	if err != nil {
		return nil, err
	}
	if counter == nil {
		return c.Client, nil
	}
	rc := rest.CopyConfig(c.Rest)
	rc.Wrap(counter.wrap)
	return kubernetes.NewForConfig(rc)
}

// fleet is one database and one namespace holding benchmark jobs.
type fleet struct {
	dbURL  string
	db     *store.Store
	svc    *service.Service
	conn   *pgx.Conn // for inspection queries only
	ns     string
	render kube.RenderConfig
	names  []string
	epoch  int64
	drop   func()
	// profile is the execution profile its deployments select (empty: the default).
	profile string
}

// newFleet creates a migrated database and a namespace, and takes the synchronizer's
// lease for an hour, so that in-process synchronizers can write under its epoch.
func newFleet(ctx context.Context, b *bench, withLease bool) (*fleet, error) {
	name := "bench_sync_" + randomHex(6)
	if err := devenv.CreateDatabase(ctx, b.adminURL, name, ""); err != nil {
		return nil, fmt.Errorf("create database: %w", err)
	}
	u, err := url.Parse(b.adminURL)
	if err != nil {
		return nil, fmt.Errorf("parse database url: %w", err)
	}
	u.Path = "/" + name
	f := &fleet{dbURL: u.String()}
	var cleanups []func()
	f.drop = func() {
		for i := len(cleanups) - 1; i >= 0; i-- {
			cleanups[i]()
		}
	}
	cleanups = append(cleanups, func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := devenv.DropDatabase(ctx, b.adminURL, name); err != nil {
			b.log.WarnContext(ctx, "drop_database_failed", "error", err)
		}
	})
	fail := func(err error) (*fleet, error) {
		f.drop()
		return nil, err
	}
	// No bound on a team's active manual executions: a thousand run at once here.
	if f.db, err = store.Open(ctx, store.Config{URL: f.dbURL, MaxConns: 16, Quotas: store.TeamQuotas{MaxActiveExecutions: -1}}); err != nil {
		return fail(err)
	}
	cleanups = append(cleanups, f.db.Close)
	if _, err := f.db.Migrate(ctx); err != nil {
		return fail(err)
	}
	if f.svc, err = service.New(service.Config{SupportedPythonVersions: []string{"3.11"}}, f.db); err != nil {
		return fail(err)
	}
	if f.conn, err = pgx.Connect(ctx, f.dbURL); err != nil {
		return fail(fmt.Errorf("connect: %w", err))
	}
	cleanups = append(cleanups, func() { f.conn.Close(context.Background()) })
	ns, dropNS, err := b.namespace(ctx)
	if err != nil {
		return fail(err)
	}
	f.ns = ns
	cleanups = append(cleanups, dropNS)
	f.render = kube.RenderConfig{Namespace: f.ns, ImageRegistry: "registry.local/datajobs"}
	if withLease {
		epoch, ok, err := f.db.TryAcquireLease(ctx, store.SyncLeaseName, "bench", time.Hour)
		if err != nil || !ok {
			return fail(fmt.Errorf("take the synchronizer lease: %v %w", ok, err))
		}
		f.epoch = epoch
	}
	return f, nil
}

// namespace creates a namespace for benchmark CronJobs, and returns what deletes them
// and it.
func (b *bench) namespace(ctx context.Context) (name string, drop func(), err error) {
	name = "bench-sync-" + randomHex(4)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if _, err := b.admin.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		return "", nil, fmt.Errorf("create namespace: %w", err)
	}
	return name, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		if err := cleanNamespace(ctx, b.admin, name); err != nil {
			b.log.WarnContext(ctx, "clean_namespace_failed", "error", err)
		}
		if err := b.admin.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			b.log.WarnContext(ctx, "delete_namespace_failed", "error", err)
		}
	}, nil
}

// jobNames are the names of n benchmark jobs.
func jobNames(n int) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("bench-job-%06d", i)
	}
	return names
}

// createJobs creates the jobs of the benchmark's team through the service, workers at a time.
func (f *fleet) createJobs(ctx context.Context, names []string, workers int) error {
	return f.createTeamJobs(ctx, team, names, workers)
}

// createTeamJobs creates the jobs of owner through the service, workers at a time.
func (f *fleet) createTeamJobs(ctx context.Context, owner string, names []string, workers int) error {
	err := parallel(ctx, names, workers, func(ctx context.Context, name string) error {
		_, err := f.svc.CreateJob(ctx, owner, job.Job{Name: name, Team: owner, Schedule: schedule})
		return err
	})
	if err == nil {
		f.names = append(f.names, names...)
	}
	return err
}

// deployJobs deploys version v1 of each job through the service, workers at a time,
// selecting the fleet's execution profile when it has one.
func (f *fleet) deployJobs(ctx context.Context, names []string, workers int) error {
	return f.deployTeamJobs(ctx, team, names, workers)
}

// deployTeamJobs is deployJobs of owner's jobs.
func (f *fleet) deployTeamJobs(ctx context.Context, owner string, names []string, workers int) error {
	version := "v1"
	change := job.DeploymentChange{JobVersion: &version}
	if f.profile != "" {
		change.ExecutionProfile = &f.profile
	}
	return parallel(ctx, names, workers, func(ctx context.Context, name string) error {
		_, err := f.svc.Deploy(ctx, owner, name, change, "bench")
		return err
	})
}

// parallel calls fn for every item, workers at a time, and returns the first error.
func parallel[T any](ctx context.Context, items []T, workers int, fn func(context.Context, T) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	work := make(chan T)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for it := range work {
				if err := fn(ctx, it); err != nil {
					cancel(err)
				}
			}
		})
	}
feed:
	for _, it := range items {
		select {
		case work <- it:
		case <-ctx.Done():
			break feed
		}
	}
	close(work)
	wg.Wait()
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return ctx.Err()
}

// syncedCount counts the deployments whose current generation is recorded as applied.
func (f *fleet) syncedCount(ctx context.Context) (int, error) {
	var n int
	err := f.conn.QueryRow(ctx, `SELECT count(*) FROM desired_data_job_deployment d
JOIN data_job j ON j.name = d.data_job_name
JOIN actual_data_job_deployment a ON a.data_job_name = j.name AND a.job_uid = j.uid AND a.generation = j.generation
WHERE d.status = 'synced' AND d.status_generation = j.generation`).Scan(&n)
	return n, err
}

// rowVersions maps every row of the three deployment tables to its xmin: any write to a
// row (update, delete and re-insert) changes it.
func (f *fleet) rowVersions(ctx context.Context) (map[string]string, error) {
	rows, err := f.conn.Query(ctx, `SELECT 'job/' || name, xmin::text FROM data_job
UNION ALL SELECT 'desired/' || data_job_name, xmin::text FROM desired_data_job_deployment
UNION ALL SELECT 'actual/' || data_job_name, xmin::text FROM actual_data_job_deployment`)
	if err != nil {
		return nil, fmt.Errorf("read row versions: %w", err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var k, v string
		if err := rows.Scan(&k, &v); err != nil {
			return nil, err
		}
		out[k] = v
	}
	return out, rows.Err()
}

// cronJobVersions maps every CronJob of the namespace to its resourceVersion.
func cronJobVersions(ctx context.Context, cs kubernetes.Interface, ns string) (map[string]string, error) {
	out := map[string]string{}
	err := eachCronJob(ctx, cs, ns, func(cj *batchv1.CronJob) { out[cj.Name] = cj.ResourceVersion })
	return out, err
}

// eachCronJob calls fn with every CronJob of the namespace, listed 2,000 at a time.
func eachCronJob(ctx context.Context, cs kubernetes.Interface, ns string, fn func(*batchv1.CronJob)) error {
	opts := metav1.ListOptions{Limit: 2000}
	for {
		l, err := cs.BatchV1().CronJobs(ns).List(ctx, opts)
		if err != nil {
			return fmt.Errorf("list cronjobs: %w", err)
		}
		for i := range l.Items {
			fn(&l.Items[i])
		}
		if l.Continue == "" {
			return nil
		}
		opts.Continue = l.Continue
	}
}

// changed counts the keys whose value differs between two snapshots, or that only one has.
func changed(before, after map[string]string) int {
	n := 0
	for k, v := range before {
		if w, ok := after[k]; !ok || w != v {
			n++
		}
	}
	for k := range after {
		if _, ok := before[k]; !ok {
			n++
		}
	}
	return n
}

// cleanNamespace deletes every CronJob of ns and waits until none is left.
func cleanNamespace(ctx context.Context, cs kubernetes.Interface, ns string) error {
	for {
		err := cs.BatchV1().CronJobs(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
		if err != nil && ctx.Err() != nil {
			return fmt.Errorf("delete cronjobs: %w", err)
		}
		l, lerr := cs.BatchV1().CronJobs(ns).List(ctx, metav1.ListOptions{Limit: 1})
		if lerr == nil && len(l.Items) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("clean namespace %s: %w", ns, ctx.Err())
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// countCronJobs counts the CronJobs of ns.
func countCronJobs(ctx context.Context, cs kubernetes.Interface, ns string) (int, error) {
	v, err := cronJobVersions(ctx, cs, ns)
	return len(v), err
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// restConfigFor is the admin configuration with generous limits, for set-up and checks.
func restConfigFor(kubeconfig string) (*rest.Config, error) {
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, err
	}
	rc.QPS, rc.Burst = 500, 1000
	return rc, nil
}

// syncer is the synchronizer every in-process measurement runs: the fleet's rendering and
// the bench's workers, with a resync period (0: the default), a log (nil: discarded) and
// metrics (nil: none) as the measurement needs.
func (b *bench) syncer(f *fleet, db synchronizer.Store, cs kubernetes.Interface, resync time.Duration, log *slog.Logger, metrics *synchronizer.Metrics) *synchronizer.Synchronizer {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return synchronizer.New(synchronizer.Config{
		Render: f.render, Settings: controller.Settings{Workers: b.workers, Interval: resync, Logger: log}, Metrics: metrics,
	}, db, cs, nil)
}
