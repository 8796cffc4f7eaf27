package maintenance

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/job"
)

// missesDB is the missed-runs service's store: the watches, the existing rows, and what
// a run records.
type missesDB struct {
	watches   []job.ScheduleWatch
	existing  map[string]bool
	recordErr map[string]error // by job name
	recorded  []job.MissedRuns
}

func (d *missesDB) ScheduleWatches(context.Context) ([]job.ScheduleWatch, error) {
	return d.watches, nil
}

func (d *missesDB) ExistingExecutions(_ context.Context, ids []string) (map[string]bool, error) {
	out := map[string]bool{}
	for _, id := range ids {
		out[id] = d.existing[id]
	}
	return out, nil
}

func (d *missesDB) RecordMissedRuns(_ context.Context, _ job.Fence, m job.MissedRuns) error {
	if err := d.recordErr[m.Watch.Name]; err != nil {
		return err
	}
	d.recorded = append(d.recorded, m)
	return nil
}

// jobCache is the tracker's cache of Jobs: the names it holds, or an error for any.
type jobCache struct {
	names map[string]bool
	err   error
}

func (c jobCache) JobExists(name string) (bool, error) { return c.names[name], c.err }

func TestMissedRunsRunOnce(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 4, 12, 0, 30, 0, time.UTC)
	// Every minute, a 10 s starting deadline, catch_up 2, applied 10 minutes ago: the
	// times 11:51 to 11:59 are past the deadline and the slack (horizon 11:59:20).
	watch := func(name string) job.ScheduleWatch {
		return job.ScheduleWatch{
			Name: name, UID: "uid-" + name, Schedule: "* * * * *", AppliedAt: now.Add(-10 * time.Minute),
			Policy: job.RunPolicy{StartingDeadlineSeconds: 10, CatchUp: 2},
		}
	}
	at := func(hhmm string) time.Time {
		t, err := time.Parse("15:04", hhmm)
		if err != nil {
			panic(err)
		}
		return time.Date(2026, 12, 4, t.Hour(), t.Minute(), 0, 0, time.UTC)
	}
	id := func(name, hhmm string) string { return job.ScheduledRunID(name, at(hhmm)) }
	checked := at("11:59")
	for _, tc := range []struct {
		name       string
		watches    []job.ScheduleWatch
		existing   []string
		jobs       jobCache
		recordErr  map[string]error
		skipped    []string // ids, of the only job recorded
		caughtUp   []string
		recorded   int
		counts     Counts
		errContain string
	}{{
		name:    "every time past the deadline with no row and no Job is missed: the latest catch_up are started late, the others skipped",
		watches: []job.ScheduleWatch{watch("a")}, recorded: 1,
		skipped:  []string{id("a", "11:51"), id("a", "11:52"), id("a", "11:53"), id("a", "11:54"), id("a", "11:55"), id("a", "11:56"), id("a", "11:57")},
		caughtUp: []string{id("a", "11:58"), id("a", "11:59")},
		counts:   Counts{"skipped": 7, "caught_up": 2},
	}, {
		name:    "a time with an execution row, or with a Job the tracker has not recorded yet, was not missed",
		watches: []job.ScheduleWatch{watch("a")}, recorded: 1,
		existing: []string{id("a", "11:59"), id("a", "11:51"), id("a", "11:52"), id("a", "11:53")},
		jobs:     jobCache{names: map[string]bool{id("a", "11:58"): true, id("a", "11:54"): true}},
		skipped:  []string{id("a", "11:55")},
		caughtUp: []string{id("a", "11:56"), id("a", "11:57")},
		counts:   Counts{"skipped": 1, "caught_up": 2},
	}, {
		name:    "a job accounted for up to the horizon records nothing",
		watches: func() []job.ScheduleWatch { w := watch("a"); w.CheckedUntil = &now; return []job.ScheduleWatch{w} }(),
		counts:  Counts{"skipped": 0, "caught_up": 0},
	}, {
		name: "a job accounted for up to 11:59 has no time left to miss: only the horizon is recorded, for the next run to start from",
		watches: func() []job.ScheduleWatch {
			w := watch("a")
			w.CheckedUntil = &checked
			return []job.ScheduleWatch{w}
		}(),
		recorded: 1, counts: Counts{"skipped": 0, "caught_up": 0},
	}, {
		name:    "a job whose record fails is reported by name, and the next job is still recorded",
		watches: []job.ScheduleWatch{watch("a"), watch("b")}, recordErr: map[string]error{"a": errors.New("deposed")},
		recorded: 1, errContain: "job a: deposed",
		skipped:  []string{id("b", "11:51"), id("b", "11:52"), id("b", "11:53"), id("b", "11:54"), id("b", "11:55"), id("b", "11:56"), id("b", "11:57")},
		caughtUp: []string{id("b", "11:58"), id("b", "11:59")},
		counts:   Counts{"skipped": 7, "caught_up": 2},
	}, {
		name:    "with no term's cache of Jobs nothing can be called missed: nothing is recorded",
		watches: []job.ScheduleWatch{watch("a")}, jobs: jobCache{err: errors.New("no term")},
		errContain: "job a: no term", counts: Counts{"skipped": 0, "caught_up": 0},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			db := &missesDB{watches: tc.watches, existing: map[string]bool{}, recordErr: tc.recordErr}
			for _, id := range tc.existing {
				db.existing[id] = true
			}
			s := NewMissedRuns(MissedRunsConfig{Jobs: tc.jobs, Settings: Settings{Now: func() time.Time { return now }, Logger: slog.New(slog.DiscardHandler)}}, db)
			counts, err := s.runOnce(t.Context(), job.Fence{Epoch: 3})
			requireRun(t, tc.counts, tc.errContain, counts, err)
			require.Len(t, db.recorded, tc.recorded)
			if tc.recorded == 0 {
				return
			}
			m := db.recorded[0]
			require.Equal(t, now.Add(-10*time.Second-missSlack), m.Until, "accounted for up to the horizon")
			var skipped, caughtUp []string
			for _, u := range m.Skipped {
				require.Equal(t, job.ExecSkipped, u.Status)
				require.Contains(t, u.Message, "starting deadline of 10 s")
				skipped = append(skipped, u.ID)
			}
			for _, e := range m.CatchUp {
				require.Equal(t, "catch-up", e.StartedBy)
				require.JSONEq(t, `{"logical_time":"`+e.LogicalTime.Format(time.RFC3339)+`"}`, string(e.Args))
				caughtUp = append(caughtUp, e.ID)
			}
			require.Equal(t, tc.skipped, skipped)
			require.Equal(t, tc.caughtUp, caughtUp)
		})
	}
}
