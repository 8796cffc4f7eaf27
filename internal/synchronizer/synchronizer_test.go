package synchronizer_test

import (
	"cmp"
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/kube"
	"github.com/datajobs/datajobs/internal/service"
	"github.com/datajobs/datajobs/internal/store"
	"github.com/datajobs/datajobs/internal/synchronizer"
	"github.com/datajobs/datajobs/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m, testenv.WithControllers()) }

const team = "team-a"

// fixture is one synchronizer over a fresh database and namespace.
type fixture struct {
	t       testing.TB
	dbURL   string
	db      *store.Store
	svc     *service.Service
	client  kubernetes.Interface
	ns      string
	render  kube.RenderConfig
	applier *faultyApplier
	epoch   int64
	// wrap, if set, wraps the store the synchronizer is given (a spy of its calls).
	wrap func(synchronizer.Store) synchronizer.Store
	// syncClient, if set, is the synchronizer's client instead of client (a spy of its
	// requests).
	syncClient kubernetes.Interface

	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	return newFixtureIn(t, testenv.Namespace(t))
}

// newFixtureIn is a fixture over a fresh database whose synchronizer manages namespace ns.
func newFixtureIn(t testing.TB, ns string) *fixture {
	t.Helper()
	dbURL := testenv.DatabaseURL(t)
	db, err := store.Open(t.Context(), store.Config{URL: dbURL})
	require.NoError(t, err)
	t.Cleanup(db.Close)
	svc, err := service.New(service.Config{SupportedPythonVersions: []string{"3.11"}}, db)
	require.NoError(t, err)
	f := &fixture{t: t, dbURL: dbURL, db: db, svc: svc, client: testenv.ServiceClientset(t), ns: ns}
	f.render = kube.RenderConfig{Namespace: f.ns, ImageRegistry: "registry.test/jobs"}
	f.applier = &faultyApplier{real: kube.NewWriter(f.client, f.ns).CronJobs(), ns: f.ns}
	f.epoch = testenv.SyncEpoch(t, db)
	t.Cleanup(f.stop)
	return f
}

func (f *fixture) synchronizer(dryRun bool) *synchronizer.Synchronizer {
	return f.synchronizerWith(synchronizer.Config{DryRun: dryRun})
}

// synchronizerWith is the fixture's synchronizer with cfg's guards and mode.
func (f *fixture) synchronizerWith(cfg synchronizer.Config) *synchronizer.Synchronizer {
	cfg.Render, cfg.Workers, cfg.Interval = f.render, cmp.Or(cfg.Workers, 4), cmp.Or(cfg.Interval, time.Hour)
	cfg.RetryBase, cfg.RetryMax = 50*time.Millisecond, 500*time.Millisecond
	var db synchronizer.Store = f.db
	if f.wrap != nil {
		db = f.wrap(db)
	}
	return synchronizer.New(cfg, db, cmp.Or(f.syncClient, f.client), f.applier)
}

// exec runs SQL on the fixture's database, as an operator or a restore would.
func (f *fixture) exec(sql string) {
	f.t.Helper()
	conn, err := pgx.Connect(f.t.Context(), f.dbURL)
	require.NoError(f.t, err)
	defer conn.Close(context.Background())
	_, err = conn.Exec(f.t.Context(), sql)
	require.NoError(f.t, err)
}

// newInstallation gives the fixture's database an installation id of its own: test
// databases are copies of one migrated template, and so share one.
func (f *fixture) newInstallation() {
	f.exec(`UPDATE installation SET id = gen_random_uuid()`)
}

// start runs a synchronizer until stop (or the end of the test).
func (f *fixture) start() { f.startWith(synchronizer.Config{}) }

// startWith runs a synchronizer with cfg's guards until stop (or the end of the test).
func (f *fixture) startWith(cfg synchronizer.Config) {
	f.mu.Lock()
	defer f.mu.Unlock()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	s := f.synchronizerWith(cfg)
	go func() {
		defer close(done)
		_ = s.Run(ctx, f.epoch)
	}()
	f.cancel, f.done = cancel, done
}

func (f *fixture) stop() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.cancel != nil {
		f.cancel()
		<-f.done
		f.cancel = nil
	}
}

func (f *fixture) createJob(name string) job.Job {
	f.t.Helper()
	j, err := f.svc.CreateJob(f.t.Context(), team, job.Job{Name: name, Team: team, Schedule: "*/5 * * * *"})
	require.NoError(f.t, err)
	return j
}

func (f *fixture) deploy(name string, c job.DeploymentChange) {
	f.t.Helper()
	_, err := f.svc.Deploy(f.t.Context(), team, name, c, "alice")
	require.NoError(f.t, err)
}

func (f *fixture) patch(name string, c job.DeploymentChange) {
	f.t.Helper()
	_, err := f.svc.PatchDeployment(f.t.Context(), team, name, c, "bob")
	require.NoError(f.t, err)
}

func (f *fixture) cronJob(name string) *batchv1.CronJob {
	f.t.Helper()
	cj, err := f.client.BatchV1().CronJobs(f.ns).Get(f.t.Context(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	require.NoError(f.t, err)
	return cj
}

func (f *fixture) state(name string) job.SyncState {
	f.t.Helper()
	st, err := f.db.LoadSyncState(f.t.Context(), name)
	require.NoError(f.t, err)
	return st
}

// eventually waits for the synchronizer to converge on cond.
func (f *fixture) eventually(cond func() bool, what string) {
	f.t.Helper()
	require.Eventually(f.t, cond, 30*time.Second, 20*time.Millisecond, what)
}

// synced waits until the job's current generation is recorded as applied.
func (f *fixture) synced(name string) job.SyncState {
	f.t.Helper()
	var st job.SyncState
	f.eventually(func() bool {
		st = f.state(name)
		return st.Job != nil && st.Desired != nil && st.Actual != nil && st.Desired.Status == job.StatusSynced &&
			st.Desired.StatusGeneration == st.Job.Generation && st.Actual.Generation == st.Job.Generation
	}, "deployment of "+name+" synced")
	return st
}

// rowVersions returns the xmin of the job's rows: any write to a row changes it.
func (f *fixture) rowVersions(name string) [3]string {
	f.t.Helper()
	var v [3]string
	conn, err := pgx.Connect(f.t.Context(), f.dbURL)
	require.NoError(f.t, err)
	defer conn.Close(context.Background())
	err = conn.QueryRow(f.t.Context(), `SELECT
		COALESCE((SELECT xmin::text FROM data_job WHERE name = $1), ''),
		COALESCE((SELECT xmin::text FROM desired_data_job_deployment WHERE data_job_name = $1), ''),
		COALESCE((SELECT xmin::text FROM actual_data_job_deployment WHERE data_job_name = $1), '')`, name).Scan(&v[0], &v[1], &v[2])
	require.NoError(f.t, err)
	return v
}

func ptr[T any](v T) *T { return &v }

// faultyApplier passes writes to the real apiserver, or fails them like an unreachable
// one while down is set (a real client-go error from a closed port). Its hooks inject
// what the real apiserver cannot produce on demand: a race right before a create, a
// reconcile that panics.
type faultyApplier struct {
	real *kube.Applier
	ns   string
	mu   sync.Mutex
	down *kube.Applier
	// beforeCreate, if set, runs once right before the next create of a new CronJob.
	beforeCreate func(cj *batchv1.CronJob)
	// beforeEachCreate, if set, runs before every create of a new CronJob; afterApply
	// after every create or update the apiserver confirmed, before it is recorded.
	beforeEachCreate, afterApply func(cj *batchv1.CronJob)
	// panicking, while set, makes every write panic; panics counts them.
	panicking bool
	panics    int
}

func (a *faultyApplier) pick() *kube.Applier {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.panicking {
		a.panics++
		panic("injected fault: the applier panics")
	}
	if a.down != nil {
		return a.down
	}
	return a.real
}

func (a *faultyApplier) Apply(ctx context.Context, live, cj *batchv1.CronJob) (*batchv1.CronJob, error) {
	return a.write(live, cj, func(real *kube.Applier) (*batchv1.CronJob, error) { return real.Apply(ctx, live, cj) })
}

func (a *faultyApplier) CreatePlainly(ctx context.Context, cj *batchv1.CronJob) (*batchv1.CronJob, error) {
	return a.write(nil, cj, func(real *kube.Applier) (*batchv1.CronJob, error) { return real.CreatePlainly(ctx, cj) })
}

// write runs the create hooks (live nil) and then w, and afterApply with what it wrote.
func (a *faultyApplier) write(live, cj *batchv1.CronJob, w func(*kube.Applier) (*batchv1.CronJob, error)) (*batchv1.CronJob, error) {
	a.mu.Lock()
	once, each, after := a.beforeCreate, a.beforeEachCreate, a.afterApply
	if live == nil {
		a.beforeCreate = nil
	}
	a.mu.Unlock()
	if live == nil && once != nil {
		once(cj)
	}
	if live == nil && each != nil {
		each(cj)
	}
	applied, err := w(a.pick())
	if err == nil && after != nil {
		after(applied)
	}
	return applied, err
}

func (a *faultyApplier) Replace(ctx context.Context, live, cj *batchv1.CronJob) (*batchv1.CronJob, error) {
	return a.pick().Replace(ctx, live, cj)
}

func (a *faultyApplier) Delete(ctx context.Context, live *batchv1.CronJob) error {
	return a.pick().Delete(ctx, live)
}

func (a *faultyApplier) Gone(ctx context.Context, name, jobUID string) (bool, error) {
	return a.pick().Gone(ctx, name, jobUID)
}

func (a *faultyApplier) panicCount() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.panics
}

func (a *faultyApplier) setPanicking(on bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.panicking = on
}

// setDown makes every write fail as against an apiserver that does not answer.
func (a *faultyApplier) setDown(t *testing.T) {
	rc := testenv.RestConfig(t)
	rc.Host = "https://127.0.0.1:1"
	rc.Timeout = 2 * time.Second
	cs, err := kubernetes.NewForConfig(rc)
	require.NoError(t, err)
	a.mu.Lock()
	defer a.mu.Unlock()
	a.down = kube.NewWriter(cs, a.ns).CronJobs()
}

func (a *faultyApplier) setUp() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.down = nil
}
