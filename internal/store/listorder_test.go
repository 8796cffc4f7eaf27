package store_test

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/service"
	"github.com/datajobs/datajobs/internal/store"
)

// listAt is the time the next runs of these tests are counted from.
var listAt = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

// listWorld is a store with a synchronizer's lease, for tests that move jobs through the
// states the list orders and filters by, as the API and the synchronizer do.
type listWorld struct {
	t     *testing.T
	st    *store.Store
	svc   *service.Service
	fence job.Fence
	url   string
	names []string // every job the test created and did not delete
}

func newListWorld(t *testing.T) *listWorld {
	st, ctx, url := openStore(t)
	epoch, ok, err := st.TryAcquireLease(ctx, store.SyncLeaseName, "test", time.Hour)
	require.NoError(t, err)
	require.True(t, ok)
	svc, err := service.New(service.Config{SupportedPythonVersions: []string{"3.9"}}, st)
	require.NoError(t, err)
	return &listWorld{t: t, st: st, svc: svc, fence: job.Fence{Epoch: epoch}, url: url}
}

// create creates a job whose configuration's schedule is one of three, or none.
func (w *listWorld) create(team, name string) {
	w.t.Helper()
	schedule := []string{"0 3 * * *", "0 1 * * *", "", "0 3 * * *"}[len(w.names)%4]
	_, err := w.st.CreateJob(w.t.Context(), job.Job{Name: name, Team: team, Schedule: schedule})
	require.NoError(w.t, err)
	w.names = append(w.names, name)
}

// deploy writes the desired deployment as the API does (status pending).
func (w *listWorld) deploy(team, name, schedule, tz string, enabled bool) {
	w.t.Helper()
	_, err := w.st.ChangeDeployment(w.t.Context(), team, name, func(_ job.Job, _ *job.Deployment) (job.Deployment, error) {
		return job.Deployment{
			JobVersion: "v1", PythonVersion: "3.9", Schedule: schedule, Enabled: enabled,
			DeployedBy: "me", DeployedDate: time.Now(), Policy: job.RunPolicy{TimeZone: tz},
		}, nil
	})
	require.NoError(w.t, err)
}

// apply records the deployment as the synchronizer does once its CronJob is written.
func (w *listWorld) apply(team, name string) {
	w.t.Helper()
	s, err := w.st.LoadSyncState(w.t.Context(), name)
	require.NoError(w.t, err)
	wrote, err := w.st.RecordAppliedAll(w.t.Context(), w.fence, []job.ActualDeployment{{
		JobName: name, JobUID: s.Job.UID, Generation: s.Job.Generation, Team: team, DeploymentVersionSHA: "h",
		JobVersion: "v1", PythonVersion: "3.9", Schedule: s.Desired.Schedule, Enabled: s.Desired.Enabled,
		DeployedBy: "me", DeployedDate: time.Now(),
	}})
	require.NoError(w.t, err)
	require.Equal(w.t, []bool{true}, wrote)
}

// fail records a result that is not applied, as the synchronizer does.
func (w *listWorld) fail(name string, status job.SyncStatus) {
	w.t.Helper()
	s, err := w.st.LoadSyncState(w.t.Context(), name)
	require.NoError(w.t, err)
	wrote, err := w.st.RecordUnappliedStatus(w.t.Context(), w.fence, name, s.Job.UID, s.Job.Generation, status, "why")
	require.NoError(w.t, err)
	require.True(w.t, wrote)
}

// lastRun records a job's last finished execution as the execution tracker does.
func (w *listWorld) lastRun(name, status string, end time.Time) {
	w.t.Helper()
	_, err := connect(w.t, w.url).Exec(w.t.Context(),
		`UPDATE data_job SET last_execution_status = $2, last_execution_end_time = $3, last_execution_duration = 60 WHERE name = $1`,
		name, status, end)
	require.NoError(w.t, err)
}

// shown is what the console's row of a job shows in the column of a sort key: nil for an
// empty cell, which the list puts last either way.
func shown(l job.Listed, field job.ListField) any {
	var enabled *bool
	schedule, tz := "", ""
	switch {
	case l.Desired != nil:
		enabled, schedule, tz = &l.Desired.Enabled, l.Desired.Schedule, l.Desired.Policy.TimeZone
	case l.Actual != nil:
		enabled, schedule = &l.Actual.Enabled, l.Actual.Schedule
	}
	switch field {
	case job.FieldName:
		return l.Job.Name
	case job.FieldTeam:
		return l.Job.Team
	case job.FieldSyncStatus:
		return nilIfEmpty(string(l.Status))
	case job.FieldLastExecutionStatus:
		return nilIfEmpty(l.LastExecution.Status)
	case job.FieldLastExecutionTime:
		if l.LastExecution.EndTime == nil {
			return nil
		}
		return l.LastExecution.EndTime.Unix()
	case job.FieldDeploymentEnabled:
		if enabled == nil {
			return nil
		}
		return map[bool]int64{false: 0, true: 1}[*enabled]
	case job.FieldNextRun:
		var s job.Schedules
		if next, ok := s.NextRun(l.Job.Schedule, listAt); ok {
			return next
		}
		return nil
	case job.FieldDeploymentNextRun:
		var s job.Schedules
		if next, ok := s.NextRun(job.ZonedSchedule(schedule, tz), listAt); ok && enabled != nil && *enabled {
			return next
		}
		return nil
	}
	panic(fmt.Sprintf("no column for field %d", field))
}

func nilIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// compareShown orders two cells as the list's ORDER BY does: empty cells last either way.
func compareShown(a, b any, desc bool) int {
	switch {
	case a == nil && b == nil:
		return 0
	case a == nil:
		return 1
	case b == nil:
		return -1
	}
	var c int
	switch a := a.(type) {
	case string:
		c = cmp.Compare(a, b.(string))
	case int64:
		c = cmp.Compare(a, b.(int64))
	}
	if desc {
		return -c
	}
	return c
}

// consoleSorts are the orders the console offers (ui.sortFields), and GraphQL's by the
// job configuration's next run.
var consoleSorts = []job.ListField{
	job.FieldName, job.FieldTeam, job.FieldDeploymentNextRun, job.FieldLastExecutionTime,
	job.FieldLastExecutionStatus, job.FieldDeploymentEnabled, job.FieldSyncStatus, job.FieldNextRun,
}

// check lists the jobs under every filter of the console and every order, page by page,
// and requires what a user reads off the rows: every job once, in the order of the column
// sorted on (ties by name), exactly the jobs whose row shows what the filter asks for,
// and a total that is the number of those jobs.
func (w *listWorld) check(step string) {
	w.t.Helper()
	all := w.list(job.ListFilter{Visible: job.AllTeams}, job.SortKey{Field: job.FieldName}, 0, 1000)
	require.ElementsMatch(w.t, w.names, names(all), "%s: every job is listed once", step)
	filters := map[string]func(l job.Listed) bool{"none": func(job.Listed) bool { return true }}
	keep := map[string]job.ListFilter{"none": {}}
	for _, team := range []string{"team-a", "team-b"} {
		filters["team "+team], keep["team "+team] = func(l job.Listed) bool { return l.Job.Team == team }, job.ListFilter{TeamGlob: team}
	}
	for _, s := range job.SyncStatuses() {
		filters["status "+s], keep["status "+s] = func(l job.Listed) bool { return string(l.Status) == s }, job.ListFilter{Status: job.SyncStatus(s)}
	}
	for _, d := range []job.DeploymentState{job.DeploymentEnabled, job.DeploymentDisabled, job.NotDeployed} {
		want := map[job.DeploymentState]any{job.DeploymentEnabled: int64(1), job.DeploymentDisabled: int64(0), job.NotDeployed: nil}[d]
		filters["deployment "+string(d)] = func(l job.Listed) bool { return shown(l, job.FieldDeploymentEnabled) == want }
		keep["deployment "+string(d)] = job.ListFilter{Deployment: d}
	}
	filters["last user_error"], keep["last user_error"] = func(l job.Listed) bool { return l.LastExecution.Status == "user_error" }, job.ListFilter{LastExecutionStatus: "user_error"}
	for fname, pass := range filters {
		var want []job.Listed
		for _, l := range all.Jobs {
			if pass(l) {
				want = append(want, l)
			}
		}
		for _, field := range consoleSorts {
			for _, desc := range []bool{false, true} {
				slices.SortStableFunc(want, func(a, b job.Listed) int {
					return cmp.Or(compareShown(shown(a, field), shown(b, field), desc), cmp.Compare(a.Job.Name, b.Job.Name))
				})
				f := keep[fname]
				f.Visible = job.AllTeams
				got := []string{}
				total := -2
				for offset := 0; offset <= len(want); offset += 3 { // pages of 3, past the end once
					page := w.list(f, job.SortKey{Field: field, Desc: desc}, offset, 3)
					got, total = append(got, names(page)...), page.Total
				}
				wantNames := names(job.ListPage{Jobs: want})
				require.Equal(w.t, wantNames, got, "%s: filter %s, sort %d desc %v", step, fname, field, desc)
				require.Equal(w.t, len(want), total, "%s: total of filter %s, sort %d", step, fname, field)
			}
		}
	}
}

func (w *listWorld) list(f job.ListFilter, sort job.SortKey, offset, limit int) job.ListPage {
	w.t.Helper()
	page, err := w.svc.ListJobs(w.t.Context(), job.ListRequest{
		Filter: f, Sort: []job.SortKey{sort}, Offset: offset, Limit: limit, Count: true, WithDeployments: true, At: listAt,
	})
	require.NoError(w.t, err)
	return page
}

// TestJobsListOrdersAndFiltersAsItShowsAcrossChanges moves jobs through every state the
// console's list sorts and filters by (deployed, disabled, rescheduled, in another time
// zone, synced, failed, changed since its last sync, being deleted, recreated, moved to
// another team, run) and after each change pages through every order and filter. The
// orders and filters read values kept in data_job_list by triggers (migration 0030) and
// the totals counts kept per team (0031), while the rows show what the job and its
// deployments say: a copy that missed a change would list a job out of the order of its
// column, in the wrong filter, or miscount the total.
func TestJobsListOrdersAndFiltersAsItShowsAcrossChanges(t *testing.T) {
	t.Parallel()
	w := newListWorld(t)
	for i, name := range []string{"job-a", "job-b", "job-c", "job-d", "job-e", "job-f", "job-g"} {
		w.create([]string{"team-a", "team-b"}[i%2], name)
	}
	w.check("created")

	w.deploy("team-a", "job-a", "0 1 * * *", "", true)
	w.deploy("team-b", "job-b", "0 2 * * *", "UTC", true)
	w.deploy("team-a", "job-c", "30 2 * * *", "Europe/Sofia", true) // 00:30 UTC
	w.deploy("team-b", "job-d", "0 1 * * *", "", false)
	w.deploy("team-a", "job-e", "0 1 * * *", "", true) // the same next run as job-a
	w.check("deployed")
	w.compact()
	w.check("deployed, the counts compacted")

	w.apply("team-a", "job-a")
	w.apply("team-b", "job-b")
	w.fail("job-c", job.StatusUserError)
	w.fail("job-e", job.StatusPlatformError)
	w.lastRun("job-a", "succeeded", listAt.Add(-time.Hour))
	w.lastRun("job-f", "user_error", listAt.Add(-2*time.Hour))
	w.check("synced, failed, run")

	w.deploy("team-a", "job-a", "0 4 * * *", "", true)  // rescheduled: pending, later
	w.deploy("team-b", "job-b", "0 2 * * *", "", false) // disabled: no next run
	w.deploy("team-b", "job-d", "0 1 * * *", "", true)  // enabled
	w.lastRun("job-a", "user_error", listAt.Add(-time.Minute))
	_, err := w.st.UpdateJob(t.Context(), "team-a", "job-c", func(cur job.Job) (job.Job, bool, error) {
		cur.Description, cur.Schedule = "changed since its last sync", "0 2 * * *"
		return cur, true, nil
	})
	require.NoError(t, err)
	w.check("rescheduled, disabled, enabled, changed")
	w.compact()
	w.check("rescheduled, disabled, enabled, changed, the counts compacted")

	w.apply("team-a", "job-a")
	require.NoError(t, w.st.DeleteDeployment(t.Context(), "team-a", "job-a")) // deleting: the actual row is left
	_, err = w.st.UpdateJob(t.Context(), "team-a", "job-e", func(cur job.Job) (job.Job, bool, error) {
		cur.Team = "team-b"
		return cur, false, nil
	})
	require.NoError(t, err)
	w.check("deleting, moved to another team")

	// job-b is deleted with its CronJob still there, and created again: the new incarnation
	// is not deployed, whatever the old one's actual row says.
	w.apply("team-b", "job-b")
	require.NoError(t, w.st.DeleteJob(t.Context(), "team-b", "job-b"))
	w.names = slices.DeleteFunc(w.names, func(n string) bool { return n == "job-b" })
	w.check("deleted")
	w.create("team-b", "job-b")
	w.check("recreated")
	ok, err := w.st.DeleteActual(t.Context(), w.fence, "job-a", mustUID(t, w.st, "job-a"))
	require.NoError(t, err)
	require.True(t, ok)
	w.check("deleted CronJob")
}

// compact folds the list's count deltas, which must change no total.
func (w *listWorld) compact() {
	w.t.Helper()
	_, err := w.st.CompactJobListCounts(w.t.Context())
	require.NoError(w.t, err)
}

// Two people disabling two jobs of one team at once do not wait for each other. The
// counts per team were one row per (team, next-run key), upserted by the triggers, so
// the second transaction waited for the first's row lock until it committed (the
// synchronizer's pass test deadlocked on it: a transaction held open across a pass
// stalled every other change of its team); they are appended deltas now.
func TestDisablingTwoJobsOfATeamAtOnceNeitherWaits(t *testing.T) {
	t.Parallel()
	w := newListWorld(t)
	ctx := t.Context()
	for _, name := range []string{"job-a", "job-b"} {
		w.create("team-a", name)
		w.deploy("team-a", name, "0 1 * * *", "", true)
	}
	first, err := connect(t, w.url).Begin(ctx)
	require.NoError(t, err)
	defer first.Rollback(context.Background()) //nolint:errcheck // committed below
	_, err = first.Exec(ctx, `UPDATE desired_data_job_deployment SET enabled = false WHERE data_job_name = 'job-a'`)
	require.NoError(t, err)

	second := connect(t, w.url)
	_, err = second.Exec(ctx, `SET lock_timeout = '5s'`)
	require.NoError(t, err)
	_, err = second.Exec(ctx, `UPDATE desired_data_job_deployment SET enabled = false WHERE data_job_name = 'job-b'`)
	require.NoError(t, err, "the second change waited for the first's lock")
	require.NoError(t, first.Commit(ctx))
	w.check("both disabled")
	w.compact()
	w.check("both disabled, the counts compacted")
	page := w.list(job.ListFilter{Visible: job.AllTeams, Deployment: job.DeploymentDisabled}, job.SortKey{Field: job.FieldName}, 0, 10)
	require.Equal(t, []string{"job-a", "job-b"}, names(page))
}

// A deploy and the synchronizer's record of the same job, at once, both commit. The list's
// triggers were statement-level: the deploy's change of the job's generation locked the
// job's list row at once and its change of the desired row then waited for the
// synchronizer's group commit, which held the desired row and waited for the list row
// (CI: "deadlock detected" on a PATCH of a deployment). Deferred to the commit, the list
// row is the last lock each takes. (lock_timeout turns the old wait into an error.)
func TestADeployAndTheSynchronizersRecordOfOneJobAtOnceBothCommit(t *testing.T) {
	t.Parallel()
	w := newListWorld(t)
	ctx := t.Context()
	w.create("team-a", "job-a")
	w.deploy("team-a", "job-a", "0 1 * * *", "", true)

	deploy, err := connect(t, w.url).Begin(ctx)
	require.NoError(t, err)
	defer deploy.Rollback(context.Background()) //nolint:errcheck // committed below
	_, err = deploy.Exec(ctx, `UPDATE data_job SET generation = generation + 1 WHERE name = 'job-a'`)
	require.NoError(t, err)

	record, err := connect(t, w.url).Begin(ctx)
	require.NoError(t, err)
	defer record.Rollback(context.Background()) //nolint:errcheck // committed below
	_, err = record.Exec(ctx, `SET LOCAL lock_timeout = '5s'`)
	require.NoError(t, err)
	_, err = record.Exec(ctx, `UPDATE desired_data_job_deployment SET status = 'synced', status_generation = 2 WHERE data_job_name = 'job-a'`)
	require.NoError(t, err, "the record waited for the deploy's lock of the list row")

	done := make(chan error, 1)
	go func() {
		_, err := deploy.Exec(ctx, `UPDATE desired_data_job_deployment SET enabled = false WHERE data_job_name = 'job-a'`)
		done <- err
	}()
	require.NoError(t, record.Commit(ctx)) // the deploy's change of the desired row waits for this
	require.NoError(t, <-done)
	require.NoError(t, deploy.Commit(ctx))
	w.check("both committed")
	page := w.list(job.ListFilter{Visible: job.AllTeams, Deployment: job.DeploymentDisabled}, job.SortKey{Field: job.FieldName}, 0, 10)
	require.Equal(t, []string{"job-a"}, names(page), "the deploy's change is in the list's keys")
}

func mustUID(t *testing.T, st *store.Store, name string) string {
	t.Helper()
	s, err := st.LoadSyncState(t.Context(), name)
	require.NoError(t, err)
	return s.Job.UID
}

// TestJobsListKeysHoldConcurrentChangesOfOneJob changes a job's desired deployment and its
// actual one in two transactions at once, the second committing after the first: each
// trigger writes only its own columns of the job's data_job_list row, so both changes are
// in it. (A trigger recomputing the row from a snapshot that did not see the other
// transaction would keep the desired row's old enabled flag: the list would sort and
// filter the job as enabled while its row shows it disabled.)
func TestJobsListKeysHoldConcurrentChangesOfOneJob(t *testing.T) {
	t.Parallel()
	w := newListWorld(t)
	ctx := t.Context()
	w.create("team-a", "job-a")
	w.deploy("team-a", "job-a", "0 1 * * *", "", true)
	w.apply("team-a", "job-a")

	first, err := connect(t, w.url).Begin(ctx)
	require.NoError(t, err)
	defer first.Rollback(context.Background()) //nolint:errcheck // committed below
	_, err = first.Exec(ctx, `UPDATE desired_data_job_deployment SET enabled = false, schedule = '0 5 * * *' WHERE data_job_name = 'job-a'`)
	require.NoError(t, err)
	second := connect(t, w.url)
	done := make(chan error, 1)
	go func() {
		_, err := second.Exec(ctx, `UPDATE actual_data_job_deployment SET schedule = '0 6 * * *' WHERE data_job_name = 'job-a'`)
		done <- err
	}()
	time.Sleep(200 * time.Millisecond) // the second waits for the first's row lock
	require.NoError(t, first.Commit(ctx))
	require.NoError(t, <-done)
	w.check("after both commits")
	page := w.list(job.ListFilter{Visible: job.AllTeams, Deployment: job.DeploymentDisabled}, job.SortKey{Field: job.FieldName}, 0, 10)
	require.Equal(t, []string{"job-a"}, names(page), "the desired row's change is in the list's keys")
}

// Two transactions that lock two jobs' rows in opposite orders deadlock; PostgreSQL aborts
// one. InTx runs the victim again, and both commit (CI answered a deploy with 500
// "deadlock detected": a deploy and the synchronizer's group commit of the same job).
func TestATransactionThatLostADeadlockIsRunAgain(t *testing.T) {
	t.Parallel()
	w := newListWorld(t)
	ctx := t.Context()
	w.create("team-a", "job-a")
	w.create("team-a", "job-b")
	var bothHoldOne sync.WaitGroup
	bothHoldOne.Add(2)
	var once [2]sync.Once
	run := func(i int, first, second string) error {
		return w.st.InTx(ctx, func(tx store.Tx) error {
			if _, err := tx.Exec(ctx, `UPDATE data_job SET description = $2 WHERE name = $1`, first, "by "+first); err != nil {
				return err
			}
			once[i].Do(func() { bothHoldOne.Done(); bothHoldOne.Wait() }) // the second statements cross
			_, err := tx.Exec(ctx, `UPDATE data_job SET description = $2 WHERE name = $1`, second, "by "+first)
			return err
		})
	}
	errs := make(chan error, 2)
	go func() { errs <- run(0, "job-a", "job-b") }()
	go func() { errs <- run(1, "job-b", "job-a") }()
	require.NoError(t, <-errs)
	require.NoError(t, <-errs)
}
