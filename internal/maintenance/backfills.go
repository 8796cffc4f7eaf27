package maintenance

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/store"
)

// Backfills (issue 27). The leader moves every open backfill on: it starts its next runs
// as earlier ones end, at most max_parallel under way, stops it when its job or deployment
// went, and finishes it. Each step is one transaction under the backfill's row lock,
// fenced by the lease (Store.AdvanceBackfill), and all state is in the database, so a new
// leader simply goes on. A step runs at the start of a term, on every NOTIFY of the API (a
// backfill created or cancelled), after every final status the tracker writes (a run
// ended: its slot is free; Kick), and every Interval in case a signal was lost.

// BackfillsIntervalDefault is the period of the backfill pass that needs no signal.
const BackfillsIntervalDefault = 10 * time.Second

// BackfillsConfig configures the backfills service.
type BackfillsConfig struct {
	// Settings are the period of the pass that needs no signal (default
	// BackfillsIntervalDefault), the clock and the logger, which receives a line per backfill step
	// that started runs or finished it.
	Settings
}

// backfillsStore is what the backfills service reads and writes.
type backfillsStore interface {
	OpenBackfills(ctx context.Context) ([]int64, error)
	AdvanceBackfill(ctx context.Context, fence job.Fence, id int64, now time.Time) (started []string, finished bool, err error)
}

// Backfills advances the open backfills.
type Backfills struct {
	cfg  BackfillsConfig
	db   backfillsStore
	wake *Wake
}

// NewBackfills returns the backfills service.
func NewBackfills(cfg BackfillsConfig, db backfillsStore) *Backfills {
	cfg.Settings = cfg.withDefaults(BackfillsIntervalDefault)
	return &Backfills{cfg: cfg, db: db, wake: NewWake()}
}

// Kick asks for a pass soon (a run ended: a backfill may start its next); kicks while
// one is pending are one pass.
func (s *Backfills) Kick() { s.wake.Kick() }

// Service is the service as a Maintainer runs it.
func (s *Backfills) Service() Service {
	return Service{
		Name: "backfills", Period: s.cfg.Interval, AtStart: true, Wake: s.wake, Listen: store.BackfillsChannel,
		RunOnce: s.runOnce,
	}
}

// runOnce takes one step of every open backfill; one that fails is tried again at the
// next pass, the others go on.
func (s *Backfills) runOnce(ctx context.Context, fence job.Fence) (Counts, error) {
	ids, err := s.db.OpenBackfills(ctx)
	if err != nil {
		return nil, err
	}
	counts := Counts{"runs_started": 0, "finished": 0}
	var errs []error
	for _, id := range ids {
		started, finished, err := s.db.AdvanceBackfill(ctx, fence, id, s.cfg.Now())
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("backfill %d: %w", id, err))
		case finished:
			counts["finished"]++
			s.cfg.Logger.InfoContext(ctx, "backfill_finished", "backfill", id)
		case len(started) > 0:
			counts["runs_started"] += len(started)
			s.cfg.Logger.InfoContext(ctx, "backfill_runs_started", "backfill", id, "runs", len(started))
		}
	}
	return counts, errors.Join(errs...)
}
