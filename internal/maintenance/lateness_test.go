package maintenance

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/job"
)

// latenessDB is the lateness service's store: the watches, and the late starts a run
// records (nil: it recorded nothing).
type latenessDB struct {
	watches   []job.LatenessWatch
	recordErr error
	recorded  []job.LateStart
	at        time.Time
}

func (d *latenessDB) LatenessWatches(context.Context) ([]job.LatenessWatch, error) {
	return d.watches, nil
}

func (d *latenessDB) RecordLateness(_ context.Context, _ job.Fence, now time.Time, starts []job.LateStart) error {
	d.at, d.recorded = now, append([]job.LateStart{}, starts...)
	return d.recordErr
}

func TestLatenessRunOnce(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 4, 12, 0, 30, 0, time.UTC)
	applied, lastEnd := now.Add(-10*time.Minute), now.Add(-30*time.Second)
	// Hourly at :55, a delay of 2 minutes, a starting deadline of 1, deployed 10 minutes
	// ago (11:50:30).
	watch := func(uid string) job.LatenessWatch {
		return job.LatenessWatch{
			Name: "job-" + uid, UID: uid, Schedule: "55 * * * *", AppliedAt: applied, DelayMinutes: 2,
			Policy: job.RunPolicy{StartingDeadlineSeconds: 60},
		}
	}
	anchor := time.Date(2026, 12, 4, 11, 55, 0, 0, time.UTC)
	// Jobs made 30 s and 150 s before now (the delay is 2 minutes), and one before the
	// schedule time.
	created, createdEarly, before := now.Add(-30*time.Second), now.Add(-150*time.Second), anchor.Add(-time.Minute)
	with := func(change func(*job.LatenessWatch)) []job.LatenessWatch {
		w := watch("a")
		change(&w)
		return []job.LatenessWatch{w}
	}
	for _, tc := range []struct {
		name       string
		watches    []job.LatenessWatch
		recordErr  error
		jobs       map[string]bool // the Jobs in the tracker's cache
		late       []job.LateStart
		counts     Counts
		errContain string
	}{{
		name:    "a job with no run started two minutes after its 11:55 schedule time is late from 11:55",
		watches: []job.LatenessWatch{watch("a")},
		late:    []job.LateStart{{UID: "a", Anchor: anchor}}, counts: Counts{"late_starts": 1},
	}, {
		name:    "a job whose run is running is no late start (the store counts a late run)",
		watches: func() []job.LatenessWatch { w := watch("a"); w.Running = true; return []job.LatenessWatch{w} }(),
		late:    []job.LateStart{}, counts: Counts{"late_starts": 0},
	}, {
		name:    "a job whose last run ended after its schedule time waits for the next one",
		watches: func() []job.LatenessWatch { w := watch("a"); w.LastEnd = &lastEnd; return []job.LatenessWatch{w} }(),
		late:    []job.LateStart{}, counts: Counts{"late_starts": 0},
	}, {
		name:    "a job not yet past its delay is not late",
		watches: func() []job.LatenessWatch { w := watch("a"); w.DelayMinutes = 10; return []job.LatenessWatch{w} }(),
		late:    []job.LateStart{}, counts: Counts{"late_starts": 0},
	}, {
		name:    "a run the controller may still start (its starting deadline, 10 minutes, not passed) is not late yet",
		watches: with(func(w *job.LatenessWatch) { w.Policy.StartingDeadlineSeconds = 600 }),
		late:    []job.LateStart{}, counts: Counts{"late_starts": 0},
	}, {
		name:    "the default starting deadline (30 minutes) holds a late start back as well",
		watches: with(func(w *job.LatenessWatch) { w.Policy = job.RunPolicy{} }),
		late:    []job.LateStart{}, counts: Counts{"late_starts": 0},
	}, {
		name:    "a run whose Job the controller made within its deadline, its pod pending under a minute, is not late",
		watches: with(func(w *job.LatenessWatch) { w.Policy.StartingDeadlineSeconds = 600; w.LastCreated = &created }),
		late:    []job.LateStart{}, counts: Counts{"late_starts": 0},
	}, {
		// Issue 45: at 10,000 jobs hashed over 5 minutes, 3,850 runs whose Job was made in
		// time and whose pod started over the delay after it, within the deadline, were late.
		name:    "a run whose Job was made and whose pod has not started the delay after is not late within its starting deadline",
		watches: with(func(w *job.LatenessWatch) { w.Policy.StartingDeadlineSeconds = 600; w.LastCreated = &createdEarly }),
		late:    []job.LateStart{}, counts: Counts{"late_starts": 0},
	}, {
		// Issue 45 again: at 10,000 hashed, 2,172 runs whose Job was made in time and whose
		// pod waited past the deadline for the burst's scheduler were told late.
		name:    "a run whose Job was made in time is no late start, its pod pending past the deadline and the delay after its Job",
		watches: with(func(w *job.LatenessWatch) { w.LastCreated = &createdEarly }),
		late:    []job.LateStart{}, counts: Counts{"late_starts": 0},
	}, {
		name:    "a run whose Job the tracker's cache holds before its row is written is no late start",
		watches: []job.LatenessWatch{watch("a")}, jobs: map[string]bool{job.ScheduledRunID("job-a", anchor): true},
		late: []job.LateStart{}, counts: Counts{"late_starts": 0},
	}, {
		name:    "another schedule time's Job in the cache does not count",
		watches: []job.LatenessWatch{watch("a")}, jobs: map[string]bool{job.ScheduledRunID("job-a", anchor.Add(-time.Hour)): true},
		late: []job.LateStart{{UID: "a", Anchor: anchor}}, counts: Counts{"late_starts": 1},
	}, {
		name:    "a run whose Job came late in its deadline has the delay after its Job for its pod",
		watches: with(func(w *job.LatenessWatch) { w.LastCreated = &created }),
		late:    []job.LateStart{}, counts: Counts{"late_starts": 0},
	}, {
		name:    "an older run's Job (made before the schedule time) does not count",
		watches: with(func(w *job.LatenessWatch) { w.LastCreated = &before }),
		late:    []job.LateStart{{UID: "a", Anchor: anchor}}, counts: Counts{"late_starts": 1},
	}, {
		name: "a job whose schedule cannot be read is reported by name, and the others are recorded",
		watches: func() []job.LatenessWatch {
			w := watch("bad")
			w.Schedule = "not a schedule"
			return []job.LatenessWatch{w, watch("a")}
		}(),
		late: []job.LateStart{{UID: "a", Anchor: anchor}}, counts: Counts{"late_starts": 1}, errContain: "job job-bad",
	}, {
		name:    "a record that fails (a deposed leader) is the run's error",
		watches: []job.LatenessWatch{watch("a")}, recordErr: errors.New("deposed"),
		late: []job.LateStart{{UID: "a", Anchor: anchor}}, errContain: "deposed",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			db := &latenessDB{watches: tc.watches, recordErr: tc.recordErr}
			s := NewLateness(LatenessConfig{Settings: Settings{Now: func() time.Time { return now }}, Jobs: jobCache{names: tc.jobs}}, db)
			counts, err := s.runOnce(t.Context(), job.Fence{Epoch: 3})
			requireRun(t, tc.counts, tc.errContain, counts, err)
			require.Equal(t, tc.late, db.recorded)
			require.Equal(t, now, db.at, "the store ends the late runs and the recoveries as of the same now")
		})
	}
}
