package synchronizer_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"

	"github.com/datajobs/datajobs/internal/controller"
	"github.com/datajobs/datajobs/internal/store"
	"github.com/datajobs/datajobs/internal/synchronizer"
)

// passHook passes every call to the real store and keeps what each pass's read returned;
// during, when set, runs once around the next read: before it starts and after it ends.
type passHook struct {
	synchronizer.Store
	mu     sync.Mutex
	reads  []store.SyncChanges
	during func(read func())
}

func (h *passHook) LoadSyncChanges(ctx context.Context, since store.SyncCursor) (store.SyncChanges, error) {
	h.mu.Lock()
	during := h.during
	h.during = nil
	h.mu.Unlock()
	var (
		ch  store.SyncChanges
		err error
	)
	read := func() { ch, err = h.Store.LoadSyncChanges(ctx, since) }
	if during != nil {
		during(read)
	} else {
		read()
	}
	h.mu.Lock()
	h.reads = append(h.reads, ch)
	h.mu.Unlock()
	return ch, err
}

func (h *passHook) passes() []store.SyncChanges {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]store.SyncChanges(nil), h.reads...)
}

// A pass reads only the rows changed since the previous one (issue 28). What it must not
// lose, with no NOTIFY to help (the changes are written by SQL, as an operator, a restore
// or a lost notification would leave them): a change whose transaction began before a
// pass read and committed after it, although a later change was seen by that read; and a
// job deleted meanwhile, whose CronJob must go. A job that did not change keeps its
// CronJob untouched.
func TestAPassAppliesAChangeCommittedDuringThePreviousPassAndPrunesADeletedJob(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	before := f.deployed("early-job", "late-job", "gone-job", "stays-job")
	hook := &passHook{Store: f.db}
	f.wrap = func(synchronizer.Store) synchronizer.Store { return hook }
	f.startWith(synchronizer.Config{Settings: controller.Settings{Interval: 300 * time.Millisecond}})
	f.eventually(func() bool { return len(hook.passes()) >= 1 }, "a first pass")

	early, late := connect(t, f.dbURL), connect(t, f.dbURL)
	hook.mu.Lock()
	hook.during = func(read func()) {
		tx, err := early.Begin(t.Context())
		if !assert.NoError(t, err) {
			return
		}
		assert.NoError(t, suspendIn(t.Context(), tx, "early-job"))
		assert.NoError(t, pgx.BeginFunc(t.Context(), late, func(tx pgx.Tx) error { return suspendIn(t.Context(), tx, "late-job") }))
		read()
		assert.NoError(t, tx.Commit(t.Context()))
	}
	hook.mu.Unlock()

	f.eventually(func() bool { cj := f.cronJob("early-job"); return cj.Spec.Suspend != nil && *cj.Spec.Suspend },
		"the change committed after the pass's read is applied by a later pass")
	f.eventually(func() bool { cj := f.cronJob("late-job"); return cj.Spec.Suspend != nil && *cj.Spec.Suspend },
		"the change seen by the pass's read is applied")
	f.exec(`DELETE FROM data_job WHERE name = 'gone-job'`)
	f.eventually(func() bool { return f.cronJob("gone-job") == nil }, "the deleted job's CronJob is deleted")

	full := 0
	for _, r := range hook.passes() {
		if r.Full {
			full++
		}
	}
	require.Equal(t, 1, full, "only the term's first pass read every row")
	require.Equal(t, before["stays-job"].ResourceVersion, f.cronJob("stays-job").ResourceVersion, "an unchanged job's CronJob is not written")
}

// suspendIn suspends a job in tx as the API would, without its NOTIFY: a new generation,
// disabled.
func suspendIn(ctx context.Context, tx pgx.Tx, name string) error {
	if _, err := tx.Exec(ctx, `UPDATE data_job SET generation = generation + 1 WHERE name = $1`, name); err != nil {
		return err
	}
	_, err := tx.Exec(ctx, `UPDATE desired_data_job_deployment SET enabled = false WHERE data_job_name = $1`, name)
	return err
}

func connect(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), url)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// A converge of more creates than PrefetchLimit (the states a pass keeps for the creates
// it queued) still creates every CronJob, once: the creates beyond the limit read their
// state when they are dequeued (TestPrefetchHoldsAtMostTheLimit shows the bound).
func TestAConvergeBeyondThePrefetchLimitCreatesEveryCronJobOnce(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	names := f.deployMany("flood", 20)
	var mu sync.Mutex
	created := map[string]int{}
	f.applier.beforeEachCreate = func(cj *batchv1.CronJob) {
		mu.Lock()
		defer mu.Unlock()
		created[cj.Name]++
	}
	f.startWith(synchronizer.Config{PrefetchLimit: 3, Settings: controller.Settings{Workers: 2}})
	for _, name := range names {
		f.synced(name)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, name := range names {
		require.Equal(t, 1, created[name], "%s created once", name)
	}
}
