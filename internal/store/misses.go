package store

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/datajobs/datajobs/internal/job"
)

// ScheduleWatches reads every job incarnation whose missed runs the leader accounts for:
// deployed, enabled and scheduled, with the desired schedule applied (a CronJob not yet
// showing the schedule has no runs of it to miss).
func (s *Store) ScheduleWatches(ctx context.Context) ([]job.ScheduleWatch, error) {
	return s.scheduleWatches(ctx, DefaultTarget)
}

// scheduleWatches is ScheduleWatches of the jobs whose CronJobs are in target.
func (s *Store) scheduleWatches(ctx context.Context, target string) ([]job.ScheduleWatch, error) {
	const q = `SELECT j.name, j.uid::text, d.schedule, d.run_policy, m.checked_until, a.last_deployed_date,
	a.git_commit_sha, a.vdk_version, a.python_version,
	COALESCE(a.resources_cpu_request_millis, 0), COALESCE(a.resources_cpu_limit_millis, 0),
	COALESCE(a.resources_memory_request_bytes, 0), COALESCE(a.resources_memory_limit_bytes, 0), a.last_deployed_by
FROM data_job j
JOIN desired_data_job_deployment d ON d.data_job_name = j.name
JOIN actual_data_job_deployment a ON a.data_job_name = j.name AND a.job_uid = j.uid
LEFT JOIN data_job_schedule_mark m ON m.job_uid = j.uid
WHERE d.enabled AND a.enabled AND d.schedule <> '' AND a.schedule = d.schedule AND a.target = $1`
	rows, _ := s.pool.Query(ctx, q, target)
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (job.ScheduleWatch, error) {
		var w job.ScheduleWatch
		d := &w.Snapshot
		err := row.Scan(&w.Name, &w.UID, &w.Schedule, &w.Policy, &w.CheckedUntil, &w.AppliedAt,
			&d.JobVersion, &d.VDKVersion, &d.PythonVersion,
			&d.Resources.CPURequestMillis, &d.Resources.CPULimitMillis,
			&d.Resources.MemoryRequestBytes, &d.Resources.MemoryLimitBytes, &d.DeployedBy)
		d.Schedule, d.DeployedDate = w.Schedule, w.AppliedAt
		return w, err
	})
	return out, rowError(err, nil, "read schedule watches")
}

// ExistingExecutions returns which of ids are execution rows.
func (s *Store) ExistingExecutions(ctx context.Context, ids []string) (map[string]bool, error) {
	rows, _ := s.pool.Query(ctx, `SELECT id FROM data_job_execution WHERE id = ANY($1)`, ids)
	found, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, rowError(err, nil, "read executions")
	}
	out := make(map[string]bool, len(found))
	for _, id := range found {
		out[id] = true
	}
	return out, nil
}

// RecordMissedRuns writes what the leader decided about the missed runs of one watch,
// while fence holds the lease: the skipped rows (RecordExecutions, which never writes over
// a row), then, in one transaction, the catch-up runs (submitted, notified) and the new
// mark. Every id is the CronJob controller's name of the run, so doing it again after a
// failure writes nothing twice.
func (s *Store) RecordMissedRuns(ctx context.Context, fence job.Fence, m job.MissedRuns) error {
	if len(m.Skipped) > 0 {
		if _, err := s.RecordExecutions(ctx, fence, m.Skipped); err != nil {
			return err
		}
	}
	j := job.Job{Name: m.Watch.Name, UID: m.Watch.UID}
	return s.InTx(ctx, func(tx Tx) error {
		var held bool
		if err := tx.QueryRow(ctx, `SELECT `+syncLeaseHeld("$1"), fence.Epoch).Scan(&held); err != nil {
			return fmt.Errorf("check lease: %w", err)
		}
		if !held {
			return fmt.Errorf("record missed runs of %s: the lease of term %d is no longer held", m.Watch.Name, fence.Epoch)
		}
		for _, n := range m.CatchUp {
			var exists bool
			if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM data_job_execution WHERE id = $1)`, n.ID).Scan(&exists); err != nil {
				return fmt.Errorf("check execution %s: %w", n.ID, err)
			}
			if exists {
				continue
			}
			id, err := insertExecution(ctx, tx, j, n)
			if err != nil {
				return err
			}
			if err := notify(ctx, tx, ExecutionsChannel, id); err != nil {
				return err
			}
		}
		_, err := tx.Exec(ctx, `INSERT INTO data_job_schedule_mark (job_uid, job_name, checked_until) VALUES ($1::uuid, $2, $3)
ON CONFLICT (job_uid) DO UPDATE SET checked_until = GREATEST(data_job_schedule_mark.checked_until, excluded.checked_until)`,
			m.Watch.UID, m.Watch.Name, m.Until)
		if err != nil {
			return writeError("mark schedule of "+m.Watch.Name, err)
		}
		return nil
	})
}
