package store

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/datajobs/datajobs/internal/job"
)

// VDKJobGauges reads, for VDK's alerting gauges (--vdk-job-metrics), up to limit jobs by
// name: their team, execution notification settings and contacts, delay, and their latest
// execution that is not skipped (by start time, of the current incarnation).
func (s *Store) VDKJobGauges(ctx context.Context, limit int) ([]job.VDKJobGauges, error) {
	const q = `SELECT j.name, j.team, j.enable_execution_notifications, j.notified_on_job_success,
	j.notified_on_job_failure_user_error, j.notified_on_job_failure_platform_error, j.notification_delay_period_minutes,
	COALESCE(e.id, ''), COALESCE(e.status, '')
FROM data_job j
LEFT JOIN LATERAL (SELECT e.id, e.status FROM data_job_execution e
	WHERE e.job_name = j.name AND e.job_uid = j.uid AND e.status <> 'skipped'
	ORDER BY e.start_time DESC NULLS LAST LIMIT 1) e ON true
ORDER BY j.name LIMIT $1`
	rows, _ := s.pool.Query(ctx, q, limit)
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (job.VDKJobGauges, error) {
		var g job.VDKJobGauges
		c := &g.Contacts
		return g, row.Scan(&g.Name, &g.Team, &g.EnableExecutionNotifications, &c.NotifiedOnJobSuccess,
			&c.NotifiedOnJobFailureUserError, &c.NotifiedOnJobFailurePlatformError, &g.DelayMinutes,
			&g.LastExecutionID, &g.LastStatus)
	})
	return out, rowError(err, nil, "read the jobs' VDK gauges")
}
