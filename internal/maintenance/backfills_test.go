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

// backfillStep is what AdvanceBackfill does with one backfill.
type backfillStep struct {
	started  []string
	finished bool
	err      error
}

// backfillsDB is the backfills service's store: the open backfills and each one's step.
type backfillsDB struct {
	steps    map[int64]backfillStep
	ids      []int64
	advanced []int64
}

func (d *backfillsDB) OpenBackfills(context.Context) ([]int64, error) { return d.ids, nil }

func (d *backfillsDB) AdvanceBackfill(_ context.Context, fence job.Fence, id int64, _ time.Time) ([]string, bool, error) {
	if fence.Epoch != 3 {
		return nil, false, errors.New("wrong fence")
	}
	d.advanced = append(d.advanced, id)
	s := d.steps[id]
	return s.started, s.finished, s.err
}

func TestBackfillsRunOnce(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		steps      map[int64]backfillStep
		counts     Counts
		errContain string
	}{{
		name:   "no open backfill is an empty pass",
		counts: Counts{"runs_started": 0, "finished": 0},
	}, {
		name:   "every open backfill takes one step: the runs it started and the backfills it finished are counted",
		steps:  map[int64]backfillStep{1: {started: []string{"r1", "r2"}}, 2: {finished: true}, 3: {}},
		counts: Counts{"runs_started": 2, "finished": 1},
	}, {
		name:   "a backfill whose step fails is reported by id, and the others still step",
		steps:  map[int64]backfillStep{1: {err: errors.New("deposed")}, 2: {started: []string{"r3"}}},
		counts: Counts{"runs_started": 1, "finished": 0}, errContain: "backfill 1: deposed",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			db := &backfillsDB{steps: tc.steps}
			for id := range int64(len(tc.steps)) {
				db.ids = append(db.ids, id+1)
			}
			s := NewBackfills(BackfillsConfig{Settings: Settings{Logger: slog.New(slog.DiscardHandler)}}, db)
			counts, err := s.runOnce(t.Context(), job.Fence{Epoch: 3})
			requireRun(t, tc.counts, tc.errContain, counts, err)
			require.Equal(t, db.ids, db.advanced, "every open backfill stepped once")
		})
	}
}
