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

// retentionDB deletes what the test says, and records the retention it was asked for.
type retentionDB struct {
	execs, backfills, staged int
	execsErr, backfillsErr   error
	asked                    []job.Retention
	stagedBefore             []time.Time
}

func (d *retentionDB) DeleteExpiredExecutions(_ context.Context, _ job.Fence, r job.Retention) (int, error) {
	d.asked = append(d.asked, r)
	return d.execs, d.execsErr
}

func (d *retentionDB) DeleteExpiredBackfills(_ context.Context, _ job.Fence, r job.Retention) (int, error) {
	d.asked = append(d.asked, r)
	return d.backfills, d.backfillsErr
}

func (d *retentionDB) DeleteExpiredStagedSources(_ context.Context, _ job.Fence, before time.Time) (int, error) {
	d.stagedBefore = append(d.stagedBefore, before)
	return d.staged, nil
}

func TestRetentionRunOnce(t *testing.T) {
	t.Parallel()
	defaults := job.Retention{KeptPerJob: ExecutionsKeptPerJobDefault, MaxAge: ExecutionsMaxAgeDefault, Batch: RetentionBatchDefault}
	for _, tc := range []struct {
		name       string
		cfg        job.Retention
		db         retentionDB
		asked      []job.Retention
		counts     Counts
		errContain string
	}{{
		name: "the executions, then the backfills, are deleted beyond the same bounds (the defaults)",
		db:   retentionDB{execs: 5, backfills: 1, staged: 2}, asked: []job.Retention{defaults, defaults},
		counts: Counts{"executions": 5, "backfills": 1, "staged_sources": 2},
	}, {
		name: "the bounds given are the bounds used",
		cfg:  job.Retention{KeptPerJob: 3, MaxAge: time.Hour, Batch: 10},
		db:   retentionDB{}, asked: []job.Retention{{KeptPerJob: 3, MaxAge: time.Hour, Batch: 10}, {KeptPerJob: 3, MaxAge: time.Hour, Batch: 10}},
		counts: Counts{"executions": 0, "backfills": 0, "staged_sources": 0},
	}, {
		name: "executions that fail to go leave the backfills for the next run (their runs would go first)",
		db:   retentionDB{execsErr: errors.New("deposed")}, asked: []job.Retention{defaults},
		counts: Counts{"executions": 0}, errContain: "deposed",
	}, {
		name: "backfills that fail to go are the run's error, the executions deleted still counted",
		db:   retentionDB{execs: 2, backfillsErr: errors.New("timeout")}, asked: []job.Retention{defaults, defaults},
		counts: Counts{"executions": 2, "backfills": 0}, errContain: "timeout",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			db := tc.db
			now := time.Date(2026, 12, 6, 4, 0, 0, 0, time.UTC)
			s := NewRetention(RetentionConfig{Retention: tc.cfg, Settings: Settings{Now: func() time.Time { return now }, Logger: slog.New(slog.DiscardHandler)}}, &db)
			counts, err := s.runOnce(t.Context(), job.Fence{Epoch: 3})
			requireRun(t, tc.counts, tc.errContain, counts, err)
			require.Equal(t, tc.asked, db.asked)
			if tc.errContain == "" { // the sources staged for an apply more than an hour ago, by the clock
				require.Equal(t, []time.Time{now.Add(-StagedSourcesMaxAgeDefault)}, db.stagedBefore)
			} else {
				require.Empty(t, db.stagedBefore)
			}
		})
	}
}
