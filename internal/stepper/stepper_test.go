package stepper_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/controller"
	"github.com/datajobs/datajobs/internal/job"
	pl "github.com/datajobs/datajobs/internal/pipeline"
	"github.com/datajobs/datajobs/internal/stepper"
	"github.com/datajobs/datajobs/internal/store"
	"github.com/datajobs/datajobs/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// The stepper's behaviour against a real database: what it starts, when, and under which
// lease. The Jobs of the executions it starts are the tracker's (internal/tracker's
// pipeline tests run both on kwok).

// world is a store with the lease held by epoch and deployed, applied jobs.
type world struct {
	t     *testing.T
	st    *store.Store
	url   string
	fence job.Fence
}

func newWorld(t *testing.T, jobs ...string) *world {
	t.Helper()
	url := testenv.DatabaseURL(t)
	st, err := store.Open(t.Context(), store.Config{URL: url})
	require.NoError(t, err)
	t.Cleanup(st.Close)
	w := &world{t: t, st: st, url: url, fence: job.Fence{Epoch: testenv.SyncEpoch(t, st)}}
	for _, name := range jobs {
		testenv.DeployApplied(t, st, w.fence, "team-a", name)
	}
	return w
}

// pipeline stores the pipeline name of body in team-a.
func (w *world) pipeline(name, body string) {
	w.t.Helper()
	spec, err := pl.Parse("team-a", name, []byte(body))
	require.NoError(w.t, err)
	_, err = w.st.PutPipeline(w.t.Context(), "team-a", name, spec, "alice", "op")
	require.NoError(w.t, err)
}

// run starts a run of the pipeline name.
func (w *world) run(name string) int64 {
	w.t.Helper()
	id, err := w.st.StartPipelineRun(w.t.Context(), "team-a", name, pl.NewRun{LogicalTime: time.Now(), StartedBy: "alice"})
	require.NoError(w.t, err)
	return id
}

// start runs s as the leader of epoch until the test ends.
func (w *world) start(s *stepper.Stepper, epoch int64) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = s.Run(ctx, epoch) })
	w.t.Cleanup(func() { cancel(); wg.Wait() })
}

// node reads the node of run id of the pipeline name.
func (w *world) node(name string, id int64, node string) pl.NodeRun {
	w.t.Helper()
	r, err := w.st.GetPipelineRun(w.t.Context(), "team-a", name, id)
	require.NoError(w.t, err)
	for _, n := range r.Nodes {
		if n.Name == node {
			return n
		}
	}
	w.t.Fatalf("no node %s in run %d", node, id)
	return pl.NodeRun{}
}

// started waits until node of run id has an execution, and returns it.
func (w *world) started(name string, id int64, node string) string {
	w.t.Helper()
	var exec string
	require.Eventually(w.t, func() bool {
		n := w.node(name, id, node)
		if n.ExecutionID != nil {
			exec = *n.ExecutionID
		}
		return exec != ""
	}, 10*time.Second, 20*time.Millisecond, "node %s of run %d started", node, id)
	return exec
}

// finish records the execution id of job name succeeded, as the tracker does.
func (w *world) finish(name, id string) {
	w.t.Helper()
	s, err := w.st.LoadSyncState(w.t.Context(), name)
	require.NoError(w.t, err)
	end := time.Now().UTC()
	wrote, err := w.st.RecordExecutions(w.t.Context(), w.fence, []job.ExecutionUpdate{{ID: id, JobName: name, JobUID: s.Job.UID, Type: job.ExecManual, OpID: id, Status: job.ExecSucceeded, EndTime: &end}})
	require.NoError(w.t, err)
	require.True(w.t, wrote[0])
}

// listening waits until a connection of the test's database LISTENs.
func (w *world) listening() {
	w.t.Helper()
	require.Eventually(w.t, func() bool {
		return w.count(`SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND query ILIKE 'listen%'`) > 0
	}, 10*time.Second, 10*time.Millisecond, "the stepper listens")
}

func (w *world) count(q string, args ...any) int {
	w.t.Helper()
	conn, err := pgx.Connect(w.t.Context(), w.url)
	require.NoError(w.t, err)
	defer conn.Close(context.WithoutCancel(w.t.Context()))
	var n int
	require.NoError(w.t, conn.QueryRow(w.t.Context(), q, args...).Scan(&n))
	return n
}

const twoSteps = `{"nodes":[{"name":"first-step","job_name":"first-job"},{"name":"second-step","job_name":"second-job","depends_on":["first-step"]}]}`

// A run is stepped on its NOTIFYs, not on the resync (an hour here): its start starts the
// first node, and the first node's final status, recorded, starts the next, each within
// moments; the run ends succeeded once the last node's does.
func TestARunIsSteppedOnItsNotificationsNotOnTheResync(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "first-job", "second-job")
	w.pipeline("two-steps", twoSteps)
	w.start(stepper.New(stepper.Config{Settings: controller.Settings{Interval: time.Hour}}, w.st), w.fence.Epoch)
	w.listening()

	id := w.run("two-steps")
	first := w.started("two-steps", id, "first-step")
	require.Equal(t, "waiting for first-step", w.node("two-steps", id, "second-step").Message)
	w.finish("first-job", first)
	second := w.started("two-steps", id, "second-step")
	w.finish("second-job", second)
	require.Eventually(t, func() bool {
		return w.count(`SELECT count(*) FROM pipeline_run WHERE id = $1 AND status = 'succeeded'`, id) == 1
	}, 10*time.Second, 20*time.Millisecond)
}

// The resync is the safety net: a run already running when the term starts (its NOTIFY
// went to the last leader) is stepped by the term's first resync, a scheduled pipeline
// fires the latest schedule time due on the stepper's clock, and a backfill's runs start
// on its notification.
func TestTheResyncStepsRunningRunsFiresSchedulesAndMovesBackfills(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "first-job", "second-job", "third-job")
	w.pipeline("two-steps", twoSteps)
	w.pipeline("every-minute", `{"schedule":{"schedule_cron":"* * * * *"},"max_active_runs":5,"nodes":[{"name":"only-step","job_name":"third-job"}]}`)
	id := w.run("two-steps") // before any stepper listens

	later := time.Now().Add(3 * time.Minute)
	w.start(stepper.New(stepper.Config{Settings: controller.Settings{Interval: time.Hour, Now: func() time.Time { return later }}}, w.st), w.fence.Epoch)
	w.started("two-steps", id, "first-step")
	var logical time.Time
	require.Eventually(t, func() bool {
		conn, err := pgx.Connect(t.Context(), w.url)
		require.NoError(t, err)
		defer conn.Close(context.WithoutCancel(t.Context()))
		err = conn.QueryRow(t.Context(), `SELECT logical_time FROM pipeline_run WHERE started_by = 'schedule'`).Scan(&logical)
		return err == nil
	}, 10*time.Second, 20*time.Millisecond, "the scheduled run fired")
	require.Equal(t, later.UTC().Truncate(time.Minute), logical.UTC(), "the latest schedule time due, once")
	require.Equal(t, 1, w.count(`SELECT count(*) FROM pipeline_run WHERE started_by = 'schedule'`))

	times := []time.Time{time.Date(2026, 1, 1, 3, 0, 0, 0, time.UTC), time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)}
	_, err := w.st.CreatePipelineBackfill(t.Context(), "team-a", "every-minute", pl.NewBackfill{Times: times, MaxParallel: 2, CreatedBy: "bob"})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		return w.count(`SELECT count(*) FROM pipeline_run WHERE started_by = 'backfill/bob'`) == 2
	}, 10*time.Second, 20*time.Millisecond, "both backfill runs started, without waiting for the hourly resync")
}

// A stepper whose term no longer holds the lease starts nothing: its steps are refused
// and retried, and the run's node stays pending.
func TestADeposedStepperStartsNothing(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "first-job", "second-job")
	w.pipeline("two-steps", twoSteps)
	id := w.run("two-steps")
	w.start(stepper.New(stepper.Config{Settings: controller.Settings{Interval: 50 * time.Millisecond}}, w.st), w.fence.Epoch-1)
	time.Sleep(time.Second)
	require.Zero(t, w.count(`SELECT count(*) FROM data_job_execution`))
	require.Nil(t, w.node("two-steps", id, "first-step").ExecutionID)
}

func TestDueStartsTheLatestTimeDueAndCatchesUpTheLatestMissed(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	at := func(minutesAgo int) time.Time { return now.Add(-time.Duration(minutesAgo) * time.Minute) }
	tests := map[string]struct {
		times      []time.Time
		catchUp    int
		want       []time.Time
		wantMissed int
	}{
		"a time due starts": {times: []time.Time{at(0)}, want: []time.Time{at(0)}},
		"a time late within the starting deadline starts":  {times: []time.Time{at(29)}, want: []time.Time{at(29)}},
		"of several due, the latest (a CronJob's)":         {times: []time.Time{at(20), at(10), at(1)}, want: []time.Time{at(1)}},
		"a missed time without catch_up starts nothing":    {times: []time.Time{at(45)}, want: nil, wantMissed: 1},
		"a missed time with catch_up starts late":          {times: []time.Time{at(45)}, catchUp: 1, want: []time.Time{at(45)}, wantMissed: 1},
		"catch_up starts the latest missed, then the due":  {times: []time.Time{at(180), at(120), at(60), at(0)}, catchUp: 2, want: []time.Time{at(120), at(60), at(0)}, wantMissed: 3},
		"catch_up over the missed starts each missed once": {times: []time.Time{at(120), at(60)}, catchUp: 10, want: []time.Time{at(120), at(60)}, wantMissed: 2},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			fire, missed := stepper.Due(tt.times, now, tt.catchUp)
			require.Equal(t, tt.want, fire)
			require.Equal(t, tt.wantMissed, missed)
		})
	}
}

// A pipeline whose schedule time passed while no leader looked (beyond the starting
// deadline) starts that run late, once, with catch_up 1, and not at all with catch_up 0;
// both have their schedule accounted for up to the stepper's now.
func TestAMissedScheduleTimeStartsLateOnlyWithCatchUp(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "first-job", "second-job")
	w.pipeline("caught-up", `{"schedule":{"schedule_cron":"0 * * * *","catch_up":1},"nodes":[{"name":"only-step","job_name":"first-job"}]}`)
	w.pipeline("not-caught-up", `{"schedule":{"schedule_cron":"0 * * * *"},"nodes":[{"name":"only-step","job_name":"second-job"}]}`)
	hour := time.Now().UTC().Truncate(time.Hour).Add(time.Hour)
	later := hour.Add(45 * time.Minute) // the leader was down over the hour, and 45 minutes after
	w.start(stepper.New(stepper.Config{Settings: controller.Settings{Interval: 50 * time.Millisecond, Now: func() time.Time { return later }}}, w.st), w.fence.Epoch)
	require.Eventually(t, func() bool {
		return w.count(`SELECT count(*) FROM pipeline WHERE checked_until = $1`, later) == 2
	}, 10*time.Second, 20*time.Millisecond, "both schedules accounted for")
	time.Sleep(300 * time.Millisecond) // more resyncs
	require.Equal(t, 1, w.count(`SELECT count(*) FROM pipeline_run r JOIN pipeline p ON p.id = r.pipeline_id
WHERE p.name = 'caught-up' AND r.logical_time = $1`, hour), "the missed run, started late once")
	require.Equal(t, 1, w.count(`SELECT count(*) FROM pipeline_run`), "none for the pipeline without catch_up")
}

// A planned pass (sync --once --dry-run) says which nodes it would start and writes
// nothing; the pass then starts those and says so; a plan after it has nothing to start
// (the second node waits for the first).
func TestAPassStartsWhatItsPlanSaysAndAPlanWritesNothing(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "first-job", "second-job")
	w.pipeline("two-steps", twoSteps)
	id := w.run("two-steps")
	s := stepper.New(stepper.Config{}, w.st)

	plan, err := s.Plan(t.Context())
	require.NoError(t, err)
	require.Len(t, plan.Started, 1)
	require.Equal(t, stepper.NodeStart{Team: "team-a", Pipeline: "two-steps", Run: id, Node: "first-step", Execution: plan.Started[0].Execution}, plan.Started[0])
	require.Zero(t, w.count(`SELECT count(*) FROM data_job_execution`), "a plan writes nothing")
	require.Nil(t, w.node("two-steps", id, "first-step").ExecutionID)

	done, err := s.Once(t.Context(), w.fence)
	require.NoError(t, err)
	require.Len(t, done.Started, 1)
	require.Equal(t, "first-step", done.Started[0].Node)
	require.Equal(t, done.Started[0].Execution, *w.node("two-steps", id, "first-step").ExecutionID)

	plan, err = s.Plan(t.Context())
	require.NoError(t, err)
	require.Empty(t, plan.Started, "the second node waits for the first")
	_, err = s.Once(t.Context(), job.Fence{Epoch: w.fence.Epoch + 1})
	require.Error(t, err, "a pass without the lease is refused")
}
