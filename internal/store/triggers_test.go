package store_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/job"
	pl "github.com/datajobs/datajobs/internal/pipeline"
	"github.com/datajobs/datajobs/internal/secrets"
	"github.com/datajobs/datajobs/internal/store"
	"github.com/datajobs/datajobs/internal/trigger"
)

// newTrigger stores the trigger of team from body, with an open secret.
func (w *pipeWorld) newTrigger(team, body string) (trigger.Trigger, error) {
	w.t.Helper()
	spec, err := trigger.Parse(team, []byte(body))
	require.NoError(w.t, err)
	return w.st.CreateTrigger(w.t.Context(), team, spec, "alice", func(string) (secrets.Envelope, error) {
		return secrets.Envelope{Sealed: []byte("s3cr3t")}, nil
	})
}

func (w *pipeWorld) mustTrigger(team, body string) trigger.Trigger {
	w.t.Helper()
	tr, err := w.newTrigger(team, body)
	require.NoError(w.t, err)
	return tr
}

// fire fires the trigger id at now under the world's lease.
func (w *pipeWorld) fire(id string, now time.Time) storeFiring {
	w.t.Helper()
	f, err := w.st.FireTrigger(w.t.Context(), w.fence, id, now)
	require.NoError(w.t, err)
	return storeFiring{started: f.Started, coalesced: f.Coalesced, skipped: f.Skipped, waiting: f.Waiting, wake: f.WakeAt}
}

type storeFiring struct {
	started            []string
	coalesced, skipped int
	waiting            bool
	wake               time.Time
}

// event records one event of the signed trigger id with key.
func (w *pipeWorld) event(id, key string) trigger.EventResult {
	w.t.Helper()
	res, err := w.st.AddTriggerEvents(w.t.Context(), id, []trigger.NewEvent{{Key: key, Source: "webhook"}})
	require.NoError(w.t, err)
	require.Len(w.t, res, 1)
	return res[0]
}

// A trigger is stored only with a target of its team and, following another team's job,
// that job's grant (403 otherwise, whether the job exists or not); a team's triggers are
// bounded; a name is once per team.
func TestATriggerIsStoredWithItsTargetAndTheUpstreamsGrant(t *testing.T) {
	t.Parallel()
	w := newPipeWorld(t, map[string]string{"load-job": "team-a", "extract-job": "team-b"})
	ctx := t.Context()
	_, err := w.newTrigger("team-a", `{"name":"on-call","target":{"job_name":"no-such-job"},"on":{"kind":"webhook"}}`)
	require.Equal(t, job.KindInvalid, job.KindOf(err))
	require.Contains(t, err.Error(), "target.job_name")
	_, err = w.newTrigger("team-a", `{"name":"on-call","target":{"job_name":"extract-job"},"on":{"kind":"webhook"}}`)
	require.Equal(t, job.KindInvalid, job.KindOf(err), "another team's job is no target")

	after := `{"name":"after-b","target":{"job_name":"load-job"},"on":{"kind":"outcome","job_name":"%s","team":"team-b","statuses":["succeeded"]}}`
	for _, upstream := range []string{"extract-job", "no-such-job"} {
		_, err = w.newTrigger("team-a", fmt.Sprintf(after, upstream))
		require.Equal(t, job.KindForbidden, job.KindOf(err), upstream)
	}
	_, err = w.newTrigger("team-a", `{"name":"after-b","target":{"job_name":"load-job"},"on":{"kind":"outcome","pipeline_name":"theirs","team":"team-b","statuses":["failed"]}}`)
	require.Equal(t, job.KindForbidden, job.KindOf(err), "pipelines are not granted across teams")
	require.NoError(t, w.st.GrantJob(ctx, "team-b", "extract-job", "team-a", "bob"))
	tr := w.mustTrigger("team-a", fmt.Sprintf(after, "extract-job"))
	require.Equal(t, "team-b", tr.Spec.On.Team)
	_, err = w.newTrigger("team-a", fmt.Sprintf(after, "extract-job"))
	require.Equal(t, job.KindConflict, job.KindOf(err), "a name once per team")

	for i := 1; i < trigger.MaxPerTeam; i++ {
		w.mustTrigger("team-a", fmt.Sprintf(`{"name":"hook-%03d","target":{"job_name":"load-job"},"on":{"kind":"webhook"}}`, i))
	}
	_, err = w.newTrigger("team-a", `{"name":"one-more","target":{"job_name":"load-job"},"on":{"kind":"webhook"}}`)
	require.Equal(t, job.KindConflict, job.KindOf(err), "the team's bound")
	ts, err := w.st.ListTriggers(ctx, "team-a", "load-job", false, 0)
	require.NoError(t, err)
	require.Len(t, ts, trigger.MaxPerTeam)
	require.NoError(t, w.st.DeleteTrigger(ctx, "team-a", "after-b"))
	require.Equal(t, job.KindNotFound, job.KindOf(w.st.DeleteTrigger(ctx, "team-a", "after-b")))
}

// A signed trigger's events start one run each, under the lease, once: a repeated key
// answers the first event's run; a deposed leader starts nothing; a second firing starts
// nothing again; the events per minute are bounded.
func TestEachEventStartsOneRunOnceUnderTheLease(t *testing.T) {
	t.Parallel()
	w := newPipeWorld(t, map[string]string{"load-job": "team-a"})
	ctx := t.Context()
	allow(t, w, "team-a", "load-job")
	tr := w.mustTrigger("team-a", `{"name":"on-call","target":{"job_name":"load-job"},"on":{"kind":"webhook"},
		"arguments":{"mode":"full"},"max_events_per_minute":3}`)
	first := w.event(tr.ID, "k1")
	second := w.event(tr.ID, "k2")
	again := w.event(tr.ID, "k1")
	require.True(t, again.Duplicate)
	require.Equal(t, first.EventID, again.EventID)

	_, err := w.st.FireTrigger(ctx, job.Fence{Epoch: w.fence.Epoch + 1}, tr.ID, time.Now())
	require.Error(t, err, "a deposed leader fires nothing")
	f := w.fire(tr.ID, time.Now())
	require.Len(t, f.started, 2)
	require.Empty(t, w.fire(tr.ID, time.Now()).started, "each event once")
	e, err := w.st.GetJobExecution(ctx, "team-a", "load-job", f.started[0])
	require.NoError(t, err)
	require.Equal(t, trigger.StartedBy("team-a", "on-call", first.EventID), e.StartedBy)
	require.JSONEq(t, fmt.Sprintf(`{"mode":"full","trigger_event_ids":"%d"}`, first.EventID), string(e.Args))

	again = w.event(tr.ID, "k1")
	require.Equal(t, f.started[0], *again.Run, "a repeated key answers the first event's run")
	events, total, err := w.st.ListTriggerEvents(ctx, "team-a", "on-call", 1, 10)
	require.NoError(t, err)
	require.Equal(t, 2, total)
	require.Equal(t, second.EventID, events[0].ID)
	require.Equal(t, trigger.Started, events[1].Status)
	require.Equal(t, 2, events[1].Duplicates)

	w.event(tr.ID, "k3")
	_, err = w.st.AddTriggerEvents(ctx, tr.ID, []trigger.NewEvent{{Key: "k4", Source: "webhook"}})
	var rl *trigger.RateLimited
	require.ErrorAs(t, err, &rl, "3 a minute")
	require.Greater(t, rl.RetryAfter, time.Duration(0))
	require.Equal(t, job.KindBusy, job.KindOf(err))
	require.Equal(t, 3, w.count(`SELECT count(*) FROM job_trigger_event`), "nothing recorded")
}

// A firing starts at most RunsPerFiring runs, its oldest events' first, and says when more
// are left: 3×RunsPerFiring events of an each trigger start in three firings, each event
// once and in the order received, each firing in a transaction of its own.
func TestAFiringStartsTheOldestEventsABoundedBatchAtATime(t *testing.T) {
	t.Parallel()
	w := newPipeWorld(t, map[string]string{"load-job": "team-a"})
	ctx := t.Context()
	allow(t, w, "team-a", "load-job")
	tr := w.mustTrigger("team-a", `{"name":"busy-hook","target":{"job_name":"load-job"},"on":{"kind":"webhook"}}`)
	n := 3 * store.RunsPerFiring
	ids := make([]int64, n)
	for i := range n {
		ids[i] = w.event(tr.ID, fmt.Sprint(i)).EventID
	}
	var runs []string
	for i := range 3 {
		f, err := w.st.FireTrigger(ctx, w.fence, tr.ID, time.Now())
		require.NoError(t, err)
		require.Len(t, f.Started, store.RunsPerFiring, "firing %d", i)
		require.Equal(t, i < 2, f.More, "firing %d: more left", i)
		require.Equal(t, n-(i+1)*store.RunsPerFiring, w.count(`SELECT count(*) FROM job_trigger_event WHERE status = 'pending'`))
		runs = append(runs, f.Started...)
	}
	require.Empty(t, w.fire(tr.ID, time.Now()).started, "each event once")
	for i, run := range runs {
		e, err := w.st.GetJobExecution(ctx, "team-a", "load-job", run)
		require.NoError(t, err)
		require.Equal(t, trigger.StartedBy("team-a", "busy-hook", ids[i]), e.StartedBy, "run %d in the order of the events", i)
		require.Equal(t, 1, w.count(`SELECT count(*) FROM job_trigger_event WHERE run = $1 AND status = 'started' AND id = $2`, run, ids[i]))
	}
	require.Equal(t, n, w.count(`SELECT count(DISTINCT run) FROM job_trigger_event WHERE status = 'started'`))
	require.Equal(t, n, w.count(`SELECT count(*) FROM data_job_execution WHERE started_by LIKE 'trigger/%'`))
}

// allow sets the job's concurrency policy to Allow, so that its runs go side by side.
func allow(t *testing.T, w *pipeWorld, team, name string) {
	t.Helper()
	_, err := w.st.ChangeDeployment(t.Context(), team, name, func(_ job.Job, cur *job.Deployment) (job.Deployment, error) {
		d := *cur
		d.Policy.ConcurrencyPolicy = "Allow"
		return d, nil
	})
	require.NoError(t, err)
}

// With window coalescing, 10 events in 5 s are one run listing the 10; a busy target
// leaves events pending, a disabled one skips them.
func TestAWindowOfTenEventsIsOneRunAndADisabledTargetSkips(t *testing.T) {
	t.Parallel()
	w := newPipeWorld(t, map[string]string{"load-job": "team-a"})
	ctx := t.Context()
	tr := w.mustTrigger("team-a", `{"name":"batched","target":{"job_name":"load-job"},"on":{"kind":"webhook"},"coalesce":{"mode":"window","seconds":5}}`)
	var ids []int64
	for i := range 10 {
		ids = append(ids, w.event(tr.ID, fmt.Sprint(i)).EventID)
	}
	f := w.fire(tr.ID, time.Now())
	require.Empty(t, f.started, "the window is open")
	require.False(t, f.wake.IsZero())
	f = w.fire(tr.ID, time.Now().Add(6*time.Second))
	require.Len(t, f.started, 1)
	require.Equal(t, 9, f.coalesced)
	e, err := w.st.GetJobExecution(ctx, "team-a", "load-job", f.started[0])
	require.NoError(t, err)
	var list string
	for i, id := range ids {
		if i > 0 {
			list += ","
		}
		list += fmt.Sprint(id)
	}
	require.JSONEq(t, `{"trigger_event_ids":"`+list+`"}`, string(e.Args))
	require.Equal(t, 10, w.count(`SELECT count(*) FROM job_trigger_event WHERE run = $1`, f.started[0]))
	require.Equal(t, 9, w.count(`SELECT count(*) FROM job_trigger_event WHERE coalesced_into = $1`, ids[0]))

	w.event(tr.ID, "busy")
	f = w.fire(tr.ID, time.Now().Add(6*time.Second))
	require.True(t, f.waiting, "the job's run under way (Forbid)")
	require.Equal(t, 1, w.count(`SELECT count(*) FROM job_trigger_event WHERE status = 'pending' AND message LIKE 'waiting for the execution%'`))

	_, err = w.st.ChangeDeployment(ctx, "team-a", "load-job", func(_ job.Job, cur *job.Deployment) (job.Deployment, error) {
		d := *cur
		d.Enabled = false
		return d, nil
	})
	require.NoError(t, err)
	f = w.fire(tr.ID, time.Now().Add(6*time.Second))
	require.Equal(t, 1, f.skipped)
	require.Equal(t, 1, w.count(`SELECT count(*) FROM job_trigger_event WHERE status = 'skipped' AND message = 'target disabled'`))
}

// An outcome trigger gets its event in the statement that records the upstream's final
// status, once, only for the statuses it names, and across teams only while granted; a
// pipeline target starts a run.
func TestAnOutcomeIsAnEventOfTheFinalStatusesStatementOnce(t *testing.T) {
	t.Parallel()
	w := newPipeWorld(t, map[string]string{"report-job": "team-a", "extract-job": "team-b"})
	ctx := t.Context()
	spec, err := pl.Parse("team-a", "reporting", []byte(`{"nodes":[{"name":"report","job_name":"report-job"}]}`))
	require.NoError(t, err)
	_, err = w.st.PutPipeline(ctx, "team-a", "reporting", spec, "alice", "op")
	require.NoError(t, err)
	require.NoError(t, w.st.GrantJob(ctx, "team-b", "extract-job", "team-a", "bob"))
	tr := w.mustTrigger("team-a", `{"name":"after-extract","target":{"pipeline_name":"reporting"},
		"on":{"kind":"outcome","job_name":"extract-job","team":"team-b","statuses":["succeeded"]}}`)
	start := func() string {
		e, err := w.st.StartExecution(ctx, "team-b", "extract-job", func(st job.JobState) (job.NewExecution, error) {
			return job.NewExecution{ID: fmt.Sprintf("extract-job-%d", time.Now().UnixNano()), StartedBy: "bob", Snapshot: st.Actual.Snapshot(), Start: time.Now()}, nil
		})
		require.NoError(t, err)
		return e.ID
	}
	failed := start()
	w.finish("extract-job", failed, job.ExecUserError)
	require.Zero(t, w.count(`SELECT count(*) FROM job_trigger_event`), "a failed upstream does not fire a succeeded trigger")

	ok := start()
	w.finish("extract-job", ok, job.ExecSucceeded)
	require.Equal(t, 1, w.count(`SELECT count(*) FROM job_trigger_event WHERE dedup_key = $1`, "execution:"+ok))
	f := w.fire(tr.ID, time.Now())
	require.Len(t, f.started, 1)
	runs, err := w.st.ListPipelineRuns(ctx, "team-a", "reporting", 1, 10)
	require.NoError(t, err)
	require.Len(t, runs.Items, 1)
	require.Contains(t, runs.Items[0].StartedBy, "trigger/team-a/after-extract/")

	require.NoError(t, w.st.RevokeGrant(ctx, "team-b", "extract-job", "team-a"))
	revoked := start()
	w.finish("extract-job", revoked, job.ExecSucceeded)
	require.Equal(t, 1, w.count(`SELECT count(*) FROM job_trigger_event`), "no grant, no event")
}
