package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/datajobs/datajobs/internal/job"
	pl "github.com/datajobs/datajobs/internal/pipeline"
)

// ScheduledPipeline is an enabled pipeline with a schedule, as the leader accounts for its
// schedule times.
type ScheduledPipeline struct {
	ID             int64
	Team, Name     string
	Cron, TimeZone string
	// From is the time after which its schedule times are not accounted for yet: where the
	// last look stopped, or when the pipeline was stored (or enabled again).
	From time.Time
	// CatchUp is its schedule's catch_up: how many times missed beyond the starting
	// deadline start late.
	CatchUp int
}

// ScheduledPipelines returns the enabled pipelines with a schedule.
func (s *Store) ScheduledPipelines(ctx context.Context) ([]ScheduledPipeline, error) {
	rows, _ := s.pool.Query(ctx, `SELECT id, team, name, schedule_cron, time_zone, COALESCE(checked_until, updated_at),
	COALESCE((spec->'schedule'->>'catch_up')::int, 0)
FROM pipeline WHERE enabled AND schedule_cron <> '' ORDER BY id`)
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (ScheduledPipeline, error) {
		var p ScheduledPipeline
		return p, row.Scan(&p.ID, &p.Team, &p.Name, &p.Cron, &p.TimeZone, &p.From, &p.CatchUp)
	})
	return out, rowError(err, nil, "read scheduled pipelines")
}

// FireScheduledRun accounts for the schedule of the pipeline id up to until, while fence
// holds the lease: when at is set (the latest schedule time due; earlier missed ones are
// not run, as a CronJob without catch-up) and fewer than max_active_runs runs are running,
// it starts the run of at, once per schedule time whichever leader tries. It returns the
// run's id, 0 when none started. The stepper calls it once per time it starts (a late
// catch-up, the time due), oldest first.
func (s *Store) FireScheduledRun(ctx context.Context, fence job.Fence, id int64, at *time.Time, until time.Time) (int64, error) {
	var run int64
	err := s.InTx(ctx, func(tx Tx) error {
		run = 0
		if err := fenced(ctx, tx, fence, "fire pipeline schedule"); err != nil {
			return err
		}
		var active, max int
		err := tx.QueryRow(ctx, `SELECT (SELECT count(*) FROM pipeline_run WHERE pipeline_id = p.id AND status = 'running'), p.max_active_runs
FROM pipeline p WHERE p.id = $1 AND p.enabled FOR UPDATE`, id).Scan(&active, &max)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("lock pipeline %d: %w", id, err)
		}
		if at != nil && active < max {
			if run, err = insertRun(ctx, tx, id, pl.NewRun{LogicalTime: *at, StartedBy: "schedule"}, *at, 0, nil); err != nil {
				return err
			}
		}
		_, err = tx.Exec(ctx, `UPDATE pipeline SET checked_until = $2 WHERE id = $1`, id, until)
		return wrote("account for pipeline schedule", err)
	})
	return run, err
}

// OpenPipelineBackfills returns the ids of the pipeline backfills not finished.
func (s *Store) OpenPipelineBackfills(ctx context.Context) ([]int64, error) {
	rows, _ := s.pool.Query(ctx, `SELECT id FROM pipeline_backfill WHERE finished_at IS NULL ORDER BY id`)
	out, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	return out, rowError(err, nil, "read open pipeline backfills")
}

// AdvancePipelineBackfill starts the next runs of the backfill id, oldest schedule time
// first, up to its max_parallel running, and finishes it when every run was started and
// none runs; one transaction under its row lock, while fence holds the lease. It returns
// the runs it started.
func (s *Store) AdvancePipelineBackfill(ctx context.Context, fence job.Fence, id int64) ([]int64, error) {
	var started []int64
	err := s.InTx(ctx, func(tx Tx) error {
		started = nil
		if err := fenced(ctx, tx, fence, "advance pipeline backfill"); err != nil {
			return err
		}
		var pid int64
		var times []time.Time
		var next, maxParallel, active int
		var nodes []string
		var by string
		err := tx.QueryRow(ctx, `SELECT b.pipeline_id, b.times, b.next_index, b.max_parallel, b.nodes, b.created_by,
	(SELECT count(*) FROM pipeline_run r WHERE r.backfill_id = b.id AND r.status = 'running')
FROM pipeline_backfill b WHERE b.id = $1 AND b.finished_at IS NULL FOR UPDATE`, id).Scan(&pid, &times, &next, &maxParallel, &nodes, &by, &active)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("lock pipeline backfill %d: %w", id, err)
		}
		for ; active < maxParallel && next < len(times); active, next = active+1, next+1 {
			run, err := insertRun(ctx, tx, pid, pl.NewRun{LogicalTime: times[next], StartedBy: "backfill/" + by}, nil, id, nodes)
			if err != nil {
				return err
			}
			started = append(started, run)
		}
		_, err = tx.Exec(ctx, `UPDATE pipeline_backfill SET next_index = $2, finished_at = CASE WHEN $2 >= cardinality(times) AND $3 = 0 THEN now() END
WHERE id = $1`, id, next, active)
		return wrote("advance pipeline backfill", err)
	})
	return started, err
}
