package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/datajobs/datajobs/internal/job"
)

// The statements of a team's health page, each bounded: counts grouped in the database,
// lists cut at the limit, the runs of a time window read by the job_uid index of the team's
// jobs (retention keeps each job's runs bounded).
const (
	healthByStatus = `SELECT COALESCE(%s, '` + string(job.NotDeployed) + `'), count(*)
FROM data_job j` + joinDeployments + `
WHERE j.team = $1 GROUP BY 1`
	healthFailing = `SELECT j.name, j.last_execution_status, j.last_execution_end_time, count(*) OVER ()
FROM data_job j
WHERE j.team = $1 AND j.last_execution_status IN ('user_error', 'platform_error')
ORDER BY j.last_execution_end_time DESC NULLS LAST, j.name LIMIT $2`
	healthRuns = `SELECT e.status, count(*)
FROM data_job j JOIN data_job_execution e ON e.job_uid = j.uid
WHERE j.team = $1 AND (e.end_time >= $2 OR (e.end_time IS NULL AND e.status IN ('submitted', 'running')))
GROUP BY e.status`
	// A run counts as started once it left submitted (a Job no node takes stays there);
	// a skipped row is a hole, not a run. A catch-up or backfill run counts for its logical time.
	healthScheduled = `SELECT j.name, d.schedule, COALESCE(d.run_policy->>'time_zone', ''), j.notification_delay_period_minutes,
	a.last_deployed_date,
	(SELECT max(COALESCE(e.logical_time, e.start_time)) FROM data_job_execution e
	 WHERE e.job_uid = j.uid AND e.status NOT IN ('submitted', 'skipped')),
	count(*) OVER ()
FROM data_job j
JOIN desired_data_job_deployment d ON d.data_job_name = j.name
JOIN actual_data_job_deployment a ON a.data_job_name = j.name AND a.job_uid = j.uid
WHERE j.team = $1 AND d.enabled AND a.enabled AND d.schedule <> '' AND a.schedule = d.schedule
ORDER BY j.name LIMIT $2`
)

// TeamHealth reads the health of team in one round trip: its jobs by deployment status,
// up to limit failing jobs and scheduled jobs (with their totals), and its runs that ended
// since since, or are under way, by status. Late is left to job.TeamHealth.LateJobs.
func (s *Store) TeamHealth(ctx context.Context, team string, since time.Time, limit int) (job.TeamHealth, error) {
	h := job.TeamHealth{ByStatus: map[string]int{}, Runs: map[string]int{}}
	batch := &pgx.Batch{}
	counts := func(into map[string]int, total *int) func(pgx.Rows) error {
		return func(rows pgx.Rows) error {
			for rows.Next() {
				var k string
				var n int
				if err := rows.Scan(&k, &n); err != nil {
					return err
				}
				into[k] = n
				if total != nil {
					*total += n
				}
			}
			return rows.Err()
		}
	}
	batch.Queue(fmt.Sprintf(healthByStatus, syncStatusExpr), team).Query(counts(h.ByStatus, &h.Jobs))
	batch.Queue(healthFailing, team, limit).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var f job.HealthJob
			if err := rows.Scan(&f.Name, &f.LastStatus, &f.LastEnd, &h.FailingTotal); err != nil {
				return err
			}
			h.Failing = append(h.Failing, f)
		}
		return rows.Err()
	})
	batch.Queue(healthRuns, team, since).Query(counts(h.Runs, nil))
	batch.Queue(healthScheduled, team, limit).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var sj job.ScheduledJob
			var delayMinutes int
			if err := rows.Scan(&sj.Name, &sj.Schedule, &sj.TimeZone, &delayMinutes, &sj.AppliedAt, &sj.LastStart, &h.ScheduledTotal); err != nil {
				return err
			}
			sj.Delay = time.Duration(delayMinutes) * time.Minute
			h.Scheduled = append(h.Scheduled, sj)
		}
		return rows.Err()
	})
	if err := s.pool.SendBatch(ctx, batch).Close(); err != nil {
		return job.TeamHealth{}, translate(fmt.Errorf("read the health of team %s: %w", team, err))
	}
	return h, nil
}
