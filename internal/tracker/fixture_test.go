package tracker_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/kubernetes"

	"github.com/datajobs/datajobs/internal/controller"
	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/kube"
	"github.com/datajobs/datajobs/internal/service"
	"github.com/datajobs/datajobs/internal/store"
	"github.com/datajobs/datajobs/internal/synchronizer"
	"github.com/datajobs/datajobs/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m, testenv.WithControllers()) }

const team = "team-a"

// fixture is a fresh database and namespace, the lease's epoch, and the synchronizer that
// makes the CronJobs of the tracker's tests when one asks for it (start).
type fixture struct {
	t      testing.TB
	dbURL  string
	db     *store.Store
	svc    *service.Service
	client kubernetes.Interface
	ns     string
	render kube.RenderConfig
	epoch  int64

	cancel context.CancelFunc
	done   chan struct{}
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	dbURL := testenv.DatabaseURL(t)
	db, err := store.Open(t.Context(), store.Config{URL: dbURL})
	require.NoError(t, err)
	t.Cleanup(db.Close)
	svc, err := service.New(service.Config{SupportedPythonVersions: []string{"3.11"}}, db)
	require.NoError(t, err)
	f := &fixture{t: t, dbURL: dbURL, db: db, svc: svc, client: testenv.ServiceClientset(t), ns: testenv.Namespace(t)}
	f.render = kube.RenderConfig{Namespace: f.ns, ImageRegistry: "registry.test/jobs"}
	f.epoch = testenv.SyncEpoch(t, db)
	t.Cleanup(f.stop)
	return f
}

// start runs the synchronizer of the fixture's namespace until stop (or the end of the test).
func (f *fixture) start() {
	cfg := synchronizer.Config{Render: f.render, Settings: controller.Settings{Workers: 4, Interval: time.Hour}, RetryBase: 50 * time.Millisecond, RetryMax: 500 * time.Millisecond}
	s := synchronizer.New(cfg, f.db, f.client, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = s.Run(ctx, f.epoch)
	}()
	f.cancel, f.done = cancel, done
}

func (f *fixture) stop() {
	if f.cancel != nil {
		f.cancel()
		<-f.done
		f.cancel = nil
	}
}

// exec runs SQL on the fixture's database, as an operator would.
func (f *fixture) exec(sql string) {
	f.t.Helper()
	conn, err := pgx.Connect(f.t.Context(), f.dbURL)
	require.NoError(f.t, err)
	defer conn.Close(context.Background())
	_, err = conn.Exec(f.t.Context(), sql)
	require.NoError(f.t, err)
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

// eventually waits for cond.
func (f *fixture) eventually(cond func() bool, what string) {
	f.t.Helper()
	require.Eventually(f.t, cond, 30*time.Second, 20*time.Millisecond, what)
}

// synced waits until the job's current generation is recorded as applied.
func (f *fixture) synced(name string) {
	f.t.Helper()
	f.eventually(func() bool {
		st, err := f.db.LoadSyncState(f.t.Context(), name)
		require.NoError(f.t, err)
		return st.Job != nil && st.Desired != nil && st.Actual != nil && st.Desired.Status == job.StatusSynced &&
			st.Desired.StatusGeneration == st.Job.Generation && st.Actual.Generation == st.Job.Generation
	}, "deployment of "+name+" synced")
}

func ptr[T any](v T) *T { return &v }
