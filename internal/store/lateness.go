package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/datajobs/datajobs/internal/job"
)

// Lateness (issue 25, VDK's JobDelay; docs/notifications.md): the leader tells a job's
// platform-error contacts, once per episode, that a scheduled run has not started
// notification_delay_period_minutes after its schedule time, or that a run is still
// running that long after it started, and once that it recovered. An episode is a row of
// data_job_lateness written by the statement that writes its job_late event; its end is
// written by the statement that writes its job_recovered event.

// startedStatuses are the statements' SQL list of the statuses of a run that started.
const startedStatuses = `('running', 'succeeded', 'user_error', 'platform_error', 'cancelled')`

// LatenessWatches reads every job incarnation whose next scheduled run the leader waits
// for: deployed, enabled (a suspended job is never late), scheduled with the desired
// schedule applied, execution notifications on with a delay (0 turns lateness off), and
// no lateness episode of its start open.
func (s *Store) LatenessWatches(ctx context.Context) ([]job.LatenessWatch, error) {
	return s.latenessWatches(ctx, DefaultTarget)
}

// latenessWatches is LatenessWatches of the jobs whose CronJobs are in target.
func (s *Store) latenessWatches(ctx context.Context, target string) ([]job.LatenessWatch, error) {
	const q = `SELECT j.name, j.uid::text, d.schedule, d.run_policy, a.last_deployed_date, j.notification_delay_period_minutes,
	(SELECT max(e.end_time) FROM data_job_execution e WHERE e.job_uid = j.uid AND e.type = 'scheduled'
		AND e.backfill_id IS NULL AND e.status IN ('succeeded', 'user_error', 'platform_error', 'cancelled')),
	(SELECT max(e.start_time) FROM data_job_execution e WHERE e.job_uid = j.uid AND e.type = 'scheduled'
		AND e.backfill_id IS NULL AND e.status <> 'skipped'),
	EXISTS (SELECT 1 FROM data_job_execution e WHERE e.job_name = j.name AND e.job_uid = j.uid AND e.status = 'running')
FROM data_job j
JOIN desired_data_job_deployment d ON d.data_job_name = j.name
JOIN actual_data_job_deployment a ON a.data_job_name = j.name AND a.job_uid = j.uid
WHERE d.enabled AND a.enabled AND d.schedule <> '' AND a.schedule = d.schedule
	AND j.enable_execution_notifications AND j.notification_delay_period_minutes > 0
	AND NOT EXISTS (SELECT 1 FROM data_job_lateness l WHERE l.job_uid = j.uid AND l.kind = 'start' AND l.recovered_at IS NULL)
	AND a.target = $1`
	rows, _ := s.pool.Query(ctx, q, target)
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (job.LatenessWatch, error) {
		var w job.LatenessWatch
		return w, row.Scan(&w.Name, &w.UID, &w.Schedule, &w.Policy, &w.AppliedAt, &w.DelayMinutes, &w.LastEnd, &w.LastCreated, &w.Running)
	})
	return out, rowError(err, nil, "read lateness watches")
}

// latePayload is the SQL of a lateness event's details from the columns of a row named
// l (kind, anchor, execution_id) and $1 (now).
const latePayload = `jsonb_build_object('lateness', l.kind, 'schedule_time', CASE l.kind WHEN 'start' THEN l.anchor END,
	'start_time', CASE l.kind WHEN 'run' THEN l.anchor END, 'execution_id', l.execution_id,
	'delay_minutes', j.notification_delay_period_minutes,
	'late_minutes', GREATEST(0, floor(EXTRACT(EPOCH FROM $1::timestamptz - l.anchor) / 60))::bigint)`

// recoverStarts ends the open start episodes a scheduled run ended by starting (running
// or finished, its Job created at or after the schedule time), with their job_recovered
// events.
const recoverStarts = `WITH x AS (
	SELECT l.key, (SELECT e.id FROM data_job_execution e WHERE e.job_uid = l.job_uid AND e.type = 'scheduled'
		AND e.backfill_id IS NULL AND e.status IN ` + startedStatuses + ` AND e.start_time >= l.anchor
		ORDER BY e.start_time LIMIT 1) AS id
	FROM data_job_lateness l WHERE l.kind = 'start' AND l.recovered_at IS NULL
), l AS (
	UPDATE data_job_lateness l SET recovered_at = $1, execution_id = x.id FROM x WHERE l.key = x.key AND x.id IS NOT NULL
	RETURNING l.*
)
INSERT INTO notification_event (key, kind, job_name, team, recipients, payload)
SELECT 'recovered' || substr(l.key, 5), '` + EventJobRecovered + `', l.job_name, l.team, j.notified_on_job_failure_platform_error,
	` + latePayload + ` || jsonb_build_object('status', e.status, 'run_start_time', e.start_time)
FROM l JOIN data_job j ON j.uid = l.job_uid JOIN data_job_execution e ON e.id = l.execution_id
WHERE j.enable_execution_notifications
ORDER BY l.key
ON CONFLICT (key) DO NOTHING`

// recoverRuns ends the run episodes whose execution finished, with their job_recovered
// events.
const recoverRuns = `WITH l AS (
	DELETE FROM data_job_lateness l USING data_job_execution e
	WHERE l.kind = 'run' AND e.id = l.execution_id AND e.status NOT IN ` + activeStatuses + `
	RETURNING l.*, e.status, e.end_time
)
INSERT INTO notification_event (key, kind, job_name, team, recipients, payload)
SELECT 'recovered' || substr(l.key, 5), '` + EventJobRecovered + `', l.job_name, l.team, j.notified_on_job_failure_platform_error,
	` + latePayload + ` || jsonb_build_object('status', l.status, 'end_time', l.end_time)
FROM l JOIN data_job j ON j.uid = l.job_uid
WHERE j.enable_execution_notifications
ORDER BY l.key
ON CONFLICT (key) DO NOTHING`

// forgetLateness deletes, telling nobody, the episodes nothing can end any more: of a
// deleted job incarnation, of a run whose row retention removed, and the recovered start
// episodes whose run no longer goes on.
const forgetLateness = `DELETE FROM data_job_lateness l
WHERE NOT EXISTS (SELECT 1 FROM data_job j WHERE j.uid = l.job_uid)
	OR (l.kind = 'run' AND NOT EXISTS (SELECT 1 FROM data_job_execution e WHERE e.id = l.execution_id))
	OR (l.kind = 'start' AND l.recovered_at IS NOT NULL AND NOT EXISTS (SELECT 1 FROM data_job_execution e
		WHERE e.id = l.execution_id AND e.status IN ` + activeStatuses + `))`

// openLateness opens the new episodes, with their job_late events: the late starts the
// leader found ($2 incarnations, $3 schedule times), and every run of an enabled job with
// notifications on that has been running for its delay (counted from when a start episode
// it ended saw it start). An event key written before (a recovered episode) opens nothing.
const openLateness = `WITH late AS (
	SELECT 'late:start:' || j.uid || ':' || EXTRACT(EPOCH FROM s.anchor)::bigint AS key, 'start' AS kind,
		j.uid AS job_uid, j.name AS job_name, j.team, s.anchor, NULL::text AS execution_id
	FROM unnest($2::text[], $3::timestamptz[]) AS s(uid, anchor) JOIN data_job j ON j.uid = s.uid::uuid
	WHERE j.enable_execution_notifications
		AND NOT EXISTS (SELECT 1 FROM data_job_lateness o WHERE o.job_uid = j.uid AND o.kind = 'start' AND o.recovered_at IS NULL)
	UNION ALL
	SELECT 'late:run:' || e.id, 'run', j.uid, j.name, j.team, GREATEST(e.start_time, s.recovered_at), e.id
	FROM data_job_execution e
	JOIN data_job j ON j.name = e.job_name AND j.uid = e.job_uid
	JOIN desired_data_job_deployment d ON d.data_job_name = j.name
	LEFT JOIN data_job_lateness s ON s.kind = 'start' AND s.execution_id = e.id
	WHERE e.status = 'running' AND j.enable_execution_notifications AND d.enabled AND j.notification_delay_period_minutes > 0
		AND GREATEST(e.start_time, s.recovered_at) <= $1::timestamptz - make_interval(mins => j.notification_delay_period_minutes)
), ev AS (
	INSERT INTO notification_event (key, kind, job_name, team, recipients, payload)
	SELECT l.key, '` + EventJobLate + `', l.job_name, l.team, j.notified_on_job_failure_platform_error, ` + latePayload + `
	FROM late l JOIN data_job j ON j.uid = l.job_uid
	ORDER BY l.key
	ON CONFLICT (key) DO NOTHING
	RETURNING key
)
INSERT INTO data_job_lateness (key, kind, job_uid, job_name, team, anchor, execution_id)
SELECT l.key, l.kind, l.job_uid, l.job_name, l.team, l.anchor, l.execution_id FROM late l JOIN ev ON ev.key = l.key
ON CONFLICT (key) DO NOTHING`

// RecordLateness writes one lateness pass at now while fence holds the lease, in one
// transaction: the episodes that recovered end (with their events), those nothing can
// end are forgotten, then the late starts found and the runs late by now open (with
// theirs). An episode's key is its schedule time or execution: a second pass, or a new
// leader's, opens nothing twice.
func (s *Store) RecordLateness(ctx context.Context, fence job.Fence, now time.Time, starts []job.LateStart) error {
	uids, anchors := make([]string, len(starts)), make([]time.Time, len(starts))
	for i, l := range starts {
		uids[i], anchors[i] = l.UID, l.Anchor
	}
	return s.InTx(ctx, func(tx Tx) error {
		var held bool
		if err := tx.QueryRow(ctx, `SELECT `+syncLeaseHeld("$1"), fence.Epoch).Scan(&held); err != nil {
			return fmt.Errorf("check lease: %w", err)
		}
		if !held {
			return fmt.Errorf("record lateness: the lease of term %d is no longer held", fence.Epoch)
		}
		steps := []struct {
			what, sql string
			args      []any
		}{
			{"recover late starts", recoverStarts, []any{now}},
			{"recover late runs", recoverRuns, []any{now}},
			{"forget lateness", forgetLateness, nil},
			{"open lateness", openLateness, []any{now, uids, anchors}},
		}
		for _, st := range steps {
			if _, err := tx.Exec(ctx, st.sql, st.args...); err != nil {
				return writeError(st.what, err)
			}
		}
		return nil
	})
}
