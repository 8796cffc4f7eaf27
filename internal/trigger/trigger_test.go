package trigger_test

import (
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/trigger"
)

func TestParseNamesTheFieldOfEachBrokenRule(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct{ body, field string }{
		"a bad name":                         {`{"name":"X","target":{"job_name":"load-job"},"on":{"kind":"webhook"}}`, "name"},
		"no target":                          {`{"name":"on-call","on":{"kind":"webhook"}}`, "target"},
		"both targets":                       {`{"name":"on-call","target":{"job_name":"load-job","pipeline_name":"nightly"},"on":{"kind":"webhook"}}`, "target"},
		"an unknown kind":                    {`{"name":"on-call","target":{"job_name":"load-job"},"on":{"kind":"cron"}}`, "on.kind"},
		"an outcome without statuses":        {`{"name":"on-call","target":{"job_name":"load-job"},"on":{"kind":"outcome","job_name":"extract"}}`, "on.statuses"},
		"an outcome with a pipeline's state": {`{"name":"on-call","target":{"job_name":"load-job"},"on":{"kind":"outcome","job_name":"extract","statuses":["failed"]}}`, "on.statuses"},
		"an outcome of nothing":              {`{"name":"on-call","target":{"job_name":"load-job"},"on":{"kind":"outcome","statuses":["succeeded"]}}`, "on.job_name"},
		"an object trigger without bucket":   {`{"name":"on-call","target":{"job_name":"load-job"},"on":{"kind":"object"}}`, "on.bucket"},
		"a webhook with a bucket":            {`{"name":"on-call","target":{"job_name":"load-job"},"on":{"kind":"webhook","bucket":"b"}}`, "on"},
		"an unknown mode":                    {`{"name":"on-call","target":{"job_name":"load-job"},"on":{"kind":"webhook"},"coalesce":{"mode":"batch"}}`, "coalesce.mode"},
		"a window of no seconds":             {`{"name":"on-call","target":{"job_name":"load-job"},"on":{"kind":"webhook"},"coalesce":{"mode":"window"}}`, "coalesce.seconds"},
		"arguments of a list":                {`{"name":"on-call","target":{"job_name":"load-job"},"on":{"kind":"webhook"},"arguments":{"a":[1]}}`, "arguments"},
		"a rate past the bound":              {`{"name":"on-call","target":{"job_name":"load-job"},"on":{"kind":"webhook"},"max_events_per_minute":100000}`, "max_events_per_minute"},
		"an unknown field":                   {`{"name":"on-call","target":{"job_name":"load-job"},"on":{"kind":"webhook"},"when":1}`, "body"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, err := trigger.Parse("team-a", []byte(tc.body))
			require.Equal(t, job.KindInvalid, job.KindOf(err), "%v", err)
			var de *job.Error
			require.ErrorAs(t, err, &de)
			assert.Equal(t, "Parameter "+tc.field+" is not valid.", de.What)
		})
	}
}

func TestParseAppliesTheDefaults(t *testing.T) {
	t.Parallel()
	s, err := trigger.Parse("team-a", []byte(`{"name":"after-extract","target":{"pipeline_name":"nightly"},
		"on":{"kind":"outcome","job_name":"extract","statuses":["user_error","succeeded","succeeded"]}}`))
	require.NoError(t, err)
	assert.Equal(t, "team-a", s.On.Team)
	assert.Equal(t, []string{"succeeded", "user_error"}, s.On.Statuses)
	assert.Equal(t, trigger.Coalesce{Mode: trigger.Each}, s.Coalesce)
	assert.Equal(t, trigger.DefaultEventsPerMinute, s.MaxEventsPerMinute)
	assert.False(t, s.Signed())
}

func TestVerifyAcceptsOnlyTheRightSignatureWithinTheWindow(t *testing.T) {
	t.Parallel()
	secret, body := trigger.NewSecret(), []byte(`{"order":42}`)
	now := time.Unix(1_800_000_000, 0)
	ts := strconv.FormatInt(now.Unix(), 10)
	sig := trigger.Sign(secret, ts, body)
	require.NoError(t, trigger.Verify(secret, ts, sig, body, now))
	require.NoError(t, trigger.Verify(secret, ts, sig, body, now.Add(4*time.Minute)), "within ±5 min")
	for name, check := range map[string]func() error{
		"a changed body":          func() error { return trigger.Verify(secret, ts, sig, []byte(`{"order":43}`), now) },
		"another secret":          func() error { return trigger.Verify(trigger.NewSecret(), ts, sig, body, now) },
		"no signature":            func() error { return trigger.Verify(secret, ts, "", body, now) },
		"no timestamp":            func() error { return trigger.Verify(secret, "", sig, body, now) },
		"a replay 6 min later":    func() error { return trigger.Verify(secret, ts, sig, body, now.Add(6*time.Minute)) },
		"a timestamp from later":  func() error { return trigger.Verify(secret, ts, sig, body, now.Add(-6*time.Minute)) },
		"a timestamp not numeric": func() error { return trigger.Verify(secret, "soon", sig, body, now) },
	} {
		assert.Equal(t, job.KindUnauthenticated, job.KindOf(check()), name)
	}
}

func TestPlanTurnsEventsIntoRuns(t *testing.T) {
	t.Parallel()
	t0 := time.Unix(1_800_000_000, 0)
	at := func(id int64, s float64) trigger.PendingEvent {
		return trigger.PendingEvent{ID: id, ReceivedAt: t0.Add(time.Duration(s * float64(time.Second)))}
	}
	window := trigger.Coalesce{Mode: trigger.Window, Seconds: 5}
	ten := make([]trigger.PendingEvent, 10)
	for i := range ten {
		ten[i] = at(int64(i+1), float64(i)*0.4)
	}
	for name, tc := range map[string]struct {
		c       trigger.Coalesce
		pending []trigger.PendingEvent
		now     time.Time
		want    trigger.Decision
	}{
		"each event is a run of its own": {
			trigger.Coalesce{Mode: trigger.Each},
			[]trigger.PendingEvent{at(1, 0), at(2, 0)},
			t0,
			trigger.Decision{Runs: []trigger.Batch{{1}, {2}}},
		},
		"an open window waits for its close": {window, ten, t0.Add(4 * time.Second), trigger.Decision{WakeAt: t0.Add(5 * time.Second)}},
		"ten events in 5 s are one run":      {window, ten, t0.Add(5 * time.Second), trigger.Decision{Runs: []trigger.Batch{{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}}}},
		"an event after the window opens the next": {
			window,
			[]trigger.PendingEvent{at(1, 0), at(2, 6)},
			t0.Add(7 * time.Second),
			trigger.Decision{Runs: []trigger.Batch{{1}}, WakeAt: t0.Add(11 * time.Second)},
		},
		"nothing pending is nothing": {window, nil, t0, trigger.Decision{}},
	} {
		assert.Equal(t, tc.want, trigger.Plan(tc.c, tc.pending, tc.now), name)
	}
}

func TestParseObjectsReadsS3NotificationsOfTheBucketAndPrefix(t *testing.T) {
	t.Parallel()
	body := []byte(`{"Records":[
		{"eventName":"ObjectCreated:Put","s3":{"bucket":{"name":"landing"},"object":{"key":"in/day+1%2Fa.csv"}}},
		{"eventName":"ObjectCreated:Put","s3":{"bucket":{"name":"other"},"object":{"key":"in/b.csv"}}},
		{"eventName":"ObjectRemoved:Delete","s3":{"bucket":{"name":"landing"},"object":{"key":"in/c.csv"}}},
		{"eventName":"s3:ObjectCreated:Put","s3":{"bucket":{"name":"landing"},"object":{"key":"out/d.csv"}}}]}`)
	got, ok := trigger.ParseObjects(trigger.On{Bucket: "landing", Prefix: "in/"}, body)
	require.True(t, ok)
	assert.Equal(t, []trigger.ObjectEvent{{Bucket: "landing", Key: "in/day 1/a.csv"}}, got)
	_, ok = trigger.ParseObjects(trigger.On{Bucket: "landing"}, []byte(`{"hello":1}`))
	assert.False(t, ok)
}

func TestRunArgsListTheEventsAndTheObjects(t *testing.T) {
	t.Parallel()
	spec := trigger.Spec{Name: "landed", Arguments: json.RawMessage(`{"mode":"full"}`)}
	raw, err := trigger.RunArgs(spec, []trigger.Event{
		{ID: 7, Arguments: trigger.ObjectArgs(trigger.ObjectEvent{Bucket: "b", Key: "k1"})},
		{ID: 8, Arguments: trigger.ObjectArgs(trigger.ObjectEvent{Bucket: "b", Key: "k2"})},
	})
	require.NoError(t, err)
	assert.JSONEq(t, `{"mode":"full","trigger_event_ids":"7,8","object_bucket":"b","object_key":"k2","object_keys":"[\"k1\",\"k2\"]"}`, string(raw))
	_, err = job.ValidateArgs(raw)
	require.NoError(t, err, "a run's arguments are strings, numbers and booleans")
}

// ParseStartedBy reads back what StartedBy wrote, and nothing else: the console links a
// run to its event only when a trigger started it.
func TestParseStartedByReadsBackOnlyATriggersStartedBy(t *testing.T) {
	team, name, event, ok := trigger.ParseStartedBy(trigger.StartedBy("team-a", "on-call", 17))
	require.True(t, ok)
	assert.Equal(t, []any{"team-a", "on-call", int64(17)}, []any{team, name, event})
	for _, other := range []string{
		"", "manual/console/alice", "schedule", "trigger/team-a/on-call", "trigger/team-a/on-call/x",
		"trigger//on-call/1", "trigger/team-a/on-call/0", "trigger/team-a/on-call/1/2", "pipeline/team-a/p/1",
	} {
		_, _, _, ok := trigger.ParseStartedBy(other)
		assert.False(t, ok, other)
	}
}
