package store

import (
	"cmp"
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/datajobs/datajobs/internal/job"
)

// ExecutionsChannel is the NOTIFY channel of execution requests: a manual start or a
// cancel sends the execution id on it in the same transaction, so the leader acts on the
// request as soon as it is committed.
const ExecutionsChannel = "datajobs_executions"

// activeStatuses is the SQL list of the statuses that still change.
const activeStatuses = `('submitted', 'running')`

// StartExecution records a manual start of the job name of team: under the job's row lock
// it refuses a start while another execution of the job is submitted or running (the
// concurrency policy) or the team has its most (TeamQuotas.MaxActiveExecutions), inserts
// the submitted execution and notifies the leader, in one transaction.
func (s *Store) StartExecution(ctx context.Context, team, name string, build job.ExecutionStart) (job.Execution, error) {
	var out job.Execution
	err := s.inLockedTx(ctx, team, name, func(tx Tx, st job.JobState) error {
		if err := admitStart(ctx, tx, st); err != nil {
			return err
		}
		room, err := s.activeRoom(ctx, tx, team)
		if err != nil {
			return err
		}
		if room == 0 {
			return job.TeamExecutionsQuota(team, s.quotas.MaxActiveExecutions)
		}
		n, err := build(st)
		if err != nil {
			return err
		}
		id, err := insertExecution(ctx, tx, st.Job, n)
		if err != nil {
			return err
		}
		if err := notify(ctx, tx, ExecutionsChannel, id); err != nil {
			return err
		}
		rows, _ := tx.Query(ctx, `SELECT `+executionColumns+` FROM data_job_execution e WHERE e.id = $1`, id)
		out, err = pgx.CollectExactlyOneRow(rows, scanExecution)
		return err
	})
	return out, err
}

// admitStart applies the deployment's concurrency policy to a manual start, as the
// CronJob controller does to a scheduled one: Forbid (the default, VDK's behaviour)
// refuses it while another execution of the job incarnation is submitted or running,
// Allow lets it run beside them, Replace asks for their cancel.
func admitStart(ctx context.Context, tx Tx, st job.JobState) error {
	var policy string
	if st.Desired != nil {
		policy = st.Desired.Policy.ConcurrencyPolicy
	}
	switch policy {
	case "Allow":
		return nil
	case "Replace":
		return cancelJobExecutions(ctx, tx, st.Job.UID, MsgReplaced)
	}
	var active string
	// Of this incarnation: a deleted job's run still being cancelled is not the new job's.
	err := tx.QueryRow(ctx, `SELECT id FROM data_job_execution WHERE job_name = $1 AND job_uid = $2::uuid AND status IN `+activeStatuses+` LIMIT 1`,
		st.Job.Name, st.Job.UID).Scan(&active)
	if err == nil {
		return job.ExecutionActive(st.Job.Name, active)
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("check executions of %s: %w", st.Job.Name, err)
	}
	return nil
}

// insertExecution inserts a submitted manual execution under the first free id from n.ID
// on (the job's lock is held, so only a scheduled run's Job name can be in the way).
// One statement picks the id: a start that tried one id per round trip made k of them for
// the k-th start of a job within a second (100 pipeline runs at once: 46,715 inserts for
// 1,000 starts, each under the job's row lock, and the stepper's p99 at 9 s).
//
// The wanted id is taken when free; else the first free second of the window of 1,000
// from the start's (after it, when an id was wanted), found among the ids of the window
// read on the primary key (a range: a job's ids of one number of digits sort as their
// numbers); else the second after the job's highest <job>-<10 digits> id, still VDK's form, never a refused start (a firing's whole
// transaction was refused with `no free id`, and its events waited for the clock). Each
// is read only when the one before found nothing (COALESCE). The window was an anti-join
// of its 1,000 candidate ids with the table, which PostgreSQL planned as a hash join over
// a scan of every execution of every job: 5-8 ms of the database's CPU a start at 20,000
// rows, growing with the table, under the job's lock (bench/triggers, T1).
//
// An execution's times are whole seconds, here and in RecordExecutions: Kubernetes records
// a Job's and a pod's times in whole seconds (metav1.Time, cut down), so a start kept at
// the API's clock to the microsecond came after the end of a run that took under a second
// and the run had a negative duration. Both are cut down the same way, so start <= end.
func insertExecution(ctx context.Context, tx Tx, j job.Job, n job.NewExecution) (string, error) {
	const q = `WITH taken AS MATERIALIZED (
	SELECT substr(e.id, length($22) + 1)::bigint AS n FROM data_job_execution e
	WHERE e.id BETWEEN $22 || $23::bigint::text AND $22 || $25::bigint::text AND substr(e.id, length($22) + 1) ~ '^[0-9]{1,18}$'
)
INSERT INTO data_job_execution (id, job_name, job_uid, type, status, op_id, start_time,
	started_by, args, job_version, job_schedule, vdk_version, job_python_version,
	resources_cpu_request_millis, resources_cpu_limit_millis, resources_memory_request_bytes,
	resources_memory_limit_bytes, last_deployed_date, last_deployed_by, logical_time, backfill_id, rerun_of, image)
SELECT c.id, $2, $3::uuid, $18, 'submitted', $4, date_trunc('second', $5::timestamptz), $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17,
	$19, NULLIF($20::bigint, 0), NULLIF($21, ''), $24
FROM (SELECT COALESCE(
	(SELECT $1::text WHERE $1 <> '' AND NOT EXISTS (SELECT 1 FROM data_job_execution e WHERE e.id = $1)),
	(SELECT $22 || min(f.n)::text FROM (SELECT $23::bigint AS n UNION ALL SELECT t.n + 1 FROM taken t) f
		WHERE f.n BETWEEN $23::bigint AND $25::bigint AND f.n NOT IN (SELECT t.n FROM taken t)),
	(SELECT $22 || (substr(e.id, length($22) + 1)::bigint + 1)::text
		FROM data_job_execution e
		WHERE e.id BETWEEN $22 || '1000000000' AND $22 || '9999999999'
			AND left(e.id, length($22)) = $22 AND substr(e.id, length($22) + 1) ~ '^[0-9]{10}$'
		ORDER BY e.id DESC LIMIT 1)
) AS id) c
WHERE c.id IS NOT NULL
ON CONFLICT (id) DO NOTHING
RETURNING id`
	d, r := n.Snapshot, n.Snapshot.Resources
	lo, hi := idWindow(n.ID != "", n.Start.Unix())
	// A conflict is a scheduled run's Job recorded meanwhile under the id chosen: choose again.
	for range 3 {
		rows, _ := tx.Query(ctx, q, n.ID, j.Name, j.UID, n.OpID, n.Start, n.StartedBy, n.Args,
			d.JobVersion, d.Schedule, d.VDKVersion, d.PythonVersion,
			r.CPURequestMillis, r.CPULimitMillis, r.MemoryRequestBytes, r.MemoryLimitBytes,
			d.DeployedDate, d.DeployedBy, cmp.Or(n.Type, job.ExecManual), n.LogicalTime, n.BackfillID, n.RerunOf,
			j.Name+"-", lo, n.Image, hi)
		ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return "", writeError("insert execution of "+j.Name, err)
		}
		if len(ids) == 1 {
			return ids[0], nil
		}
	}
	return "", fmt.Errorf("insert execution of %s: no free id after %s", j.Name, n.ID)
}

// idWindow is the window of seconds a start at unix seconds start takes its id from when
// the id it wants is not free (wanted: it wanted one): the 1,000 seconds from its start's
// (the 999 after it when it wanted an id). It ends before the number of digits grows, so
// that its ids are one range of the primary key.
func idWindow(wanted bool, start int64) (lo, hi int64) {
	lo, hi = start, start+999
	if wanted {
		lo++
	}
	if lo <= 0 {
		return lo, hi
	}
	next := int64(10) // the least power of ten above lo
	for next <= lo && next < 1e18 {
		next *= 10
	}
	return lo, min(hi, next-1)
}

// jobExecution selects the execution $1 of the job $2 of team $3 (executionColumns). It
// answers for the run of a deleted job too, until retention removes it, so that a user
// sees what the delete stopped (DESIGN.md invariant 11): the id names one run.
const jobExecution = `SELECT ` + executionColumns + ` FROM data_job_execution e
WHERE e.id = $1 AND e.job_name = $2 AND e.team = $3`

// GetJobExecution reads the execution id of the job name of team; an execution of
// another job or team is not found.
func (s *Store) GetJobExecution(ctx context.Context, team, name, id string) (job.Execution, error) {
	rows, _ := s.pool.Query(ctx, jobExecution, id, name, team)
	e, err := pgx.CollectExactlyOneRow(rows, scanExecution)
	return e, rowError(err, job.ExecutionNotFound(team, name, id), "read execution "+id)
}

// CancelExecution records a cancel of the execution id of the job name of team and
// notifies the leader, which deletes the Job and records cancelled once it is gone. An
// execution already final cannot be cancelled; asking twice is one request.
func (s *Store) CancelExecution(ctx context.Context, team, name, id, by string) (job.Execution, error) {
	var out job.Execution
	err := s.InTx(ctx, func(tx Tx) error {
		rows, _ := tx.Query(ctx, jobExecution+` FOR UPDATE OF e`, id, name, team)
		e, err := pgx.CollectExactlyOneRow(rows, scanExecution)
		if err != nil {
			return rowError(err, job.ExecutionNotFound(team, name, id), "read execution "+id)
		}
		if st := job.ExecutionStatus(e.Status); st.Final() {
			return job.ExecutionFinished(id, st)
		}
		if _, err := tx.Exec(ctx, `UPDATE data_job_execution SET cancel_requested_at = now(), cancel_requested_by = $2
WHERE id = $1 AND cancel_requested_at IS NULL`, id, by); err != nil {
			return writeError("cancel execution "+id, err)
		}
		out = e
		return notify(ctx, tx, ExecutionsChannel, id)
	})
	return out, err
}

// ExecutionLog reads the stored log of the execution id of the job name of team (nil
// while it has none stored; Pending while its pod is still to be read), and the target
// its Job runs in, where its pod's log is read while it runs: the target's name alone
// when its row is gone (the default target before serve first wrote it).
func (s *Store) ExecutionLog(ctx context.Context, team, name, id string) (job.Target, *job.StoredLog, error) {
	const q = `SELECT e.target, coalesce(t.namespace, ''), coalesce(t.kubeconfig_secret, ''), l.logs, l.truncated, l.pending
FROM data_job_execution e LEFT JOIN execution_target t ON t.name = e.target LEFT JOIN data_job_execution_log l ON l.execution_id = e.id
WHERE e.id = $1 AND e.job_name = $2 AND e.team = $3`
	var (
		t                  job.Target
		logs               *string
		truncated, pending *bool
	)
	err := s.pool.QueryRow(ctx, q, id, name, team).Scan(&t.Name, &t.Namespace, &t.KubeconfigSecret, &logs, &truncated, &pending)
	if err != nil || logs == nil {
		return t, nil, rowError(err, job.ExecutionNotFound(team, name, id), "read log of execution "+id)
	}
	return t, &job.StoredLog{Logs: *logs, Truncated: truncated != nil && *truncated, Pending: pending != nil && *pending}, nil
}

// Tracking, by the synchronizer leader.

const trackedColumns = `id, job_name, COALESCE(job_uid::text, ''), type, status, message, op_id, started_by, args,
	cancel_requested_at IS NOT NULL, cancel_message, start_time, job_created_at IS NOT NULL, logical_time, image`

func scanTracked(row pgx.CollectableRow) (job.TrackedExecution, error) {
	var e job.TrackedExecution
	err := row.Scan(&e.ID, &e.JobName, &e.JobUID, &e.Type, &e.Status, &e.Message, &e.OpID, &e.StartedBy, &e.Args,
		&e.CancelRequested, &e.CancelMessage, &e.StartTime, &e.JobCreated, &e.LogicalTime, &e.Image)
	return e, err
}

// ActiveExecutions reads every execution that is submitted or running in the default
// target (TargetView for another's).
func (s *Store) ActiveExecutions(ctx context.Context) ([]job.TrackedExecution, error) {
	return s.activeExecutions(ctx, DefaultTarget)
}

func (s *Store) activeExecutions(ctx context.Context, target string) ([]job.TrackedExecution, error) {
	rows, _ := s.pool.Query(ctx, `SELECT `+trackedColumns+` FROM data_job_execution WHERE status IN `+activeStatuses+` AND target = $1`, target)
	out, err := pgx.CollectRows(rows, scanTracked)
	return out, rowError(err, nil, "read active executions")
}

// LoadExecution reads one execution of the default target; ok is false when there is none
// of that id there (TargetView for another target's).
func (s *Store) LoadExecution(ctx context.Context, id string) (job.TrackedExecution, bool, error) {
	return s.loadExecution(ctx, DefaultTarget, id)
}

func (s *Store) loadExecution(ctx context.Context, target, id string) (job.TrackedExecution, bool, error) {
	rows, _ := s.pool.Query(ctx, `SELECT `+trackedColumns+` FROM data_job_execution WHERE id = $1 AND target = $2`, id, target)
	e, err := pgx.CollectExactlyOneRow(rows, scanTracked)
	return e, err == nil, rowError(err, nil, "load execution "+id)
}

// MarkExecutionJobCreated records that the Job of the submitted manual execution id was
// created, while fence holds the lease. It writes once; it reports whether it wrote.
func (s *Store) MarkExecutionJobCreated(ctx context.Context, fence job.Fence, id string) (bool, error) {
	tag, err := s.pool.Exec(ctx, `UPDATE data_job_execution SET job_created_at = now()
WHERE id = $1 AND status = 'submitted' AND job_created_at IS NULL AND `+syncLeaseHeld("$2"), id, fence.Epoch)
	if err != nil {
		return false, translate(fmt.Errorf("mark job of execution %s created: %w", id, err))
	}
	return tag.RowsAffected() == 1, nil
}

// RecordExecutions writes one status of each of several executions (distinct ids), in one
// statement: it inserts the row of a run not yet recorded (with the applied deployment as
// its snapshot) or updates a submitted or running one, and with a final status also keeps
// the log (when given) and sets the job row's last execution. It writes only while the
// writer's term holds the lease, only rows of the incarnation JobUID (a new row only while
// the job row is that incarnation: the row of a deleted job's run still ends), and never
// over a final status or an identical one. A final status also records its
// execution_finished event in the outbox (executionFinishedEvents), with the end of the
// log. wrote[i] tells whether us[i] was written.
func (s *Store) RecordExecutions(ctx context.Context, fence job.Fence, us []job.ExecutionUpdate) (wrote []bool, err error) {
	q := `WITH u AS (
	SELECT * FROM unnest($1::text[], $2::text[], $3::uuid[], $4::text[], $5::text[], $6::text[], $7::text[],
		$8::timestamptz[], $9::timestamptz[], $10::text[], $11::bool[], $12::text[], $13::bool[], $14::text[],
		$15::integer[], $16::text[], $17::bool[])
		AS u(id, job_name, job_uid, type, status, message, op_id, start_time, end_time, started_by, final, logs, truncated, log_tail,
			exit_code, termination_reason, log_pending)
	WHERE ` + syncLeaseHeld("$18") + `
), j AS (
	-- A run is new only while its job incarnation exists; the row of one whose job was
	-- deleted since still ends (cancelled, or what its Job showed before the cancel).
	SELECT u.* FROM u WHERE EXISTS (SELECT 1 FROM data_job j WHERE j.name = u.job_name AND j.uid = u.job_uid)
		OR EXISTS (SELECT 1 FROM data_job_execution x WHERE x.id = u.id AND x.job_uid = u.job_uid)
), up AS (
	INSERT INTO data_job_execution AS e (id, job_name, job_uid, type, status, message, op_id, start_time, end_time,
		started_by, job_version, job_schedule, vdk_version, job_python_version,
		resources_cpu_request_millis, resources_cpu_limit_millis, resources_memory_request_bytes,
		resources_memory_limit_bytes, last_deployed_date, last_deployed_by, exit_code, termination_reason, target)
	SELECT j.id, j.job_name, j.job_uid, j.type, j.status, j.message, j.op_id,
		date_trunc('second', COALESCE(j.start_time, now())), date_trunc('second', j.end_time), j.started_by,
		COALESCE(a.git_commit_sha, ''), COALESCE(a.schedule, ''), COALESCE(a.vdk_version, ''), COALESCE(a.python_version, ''),
		a.resources_cpu_request_millis, a.resources_cpu_limit_millis, a.resources_memory_request_bytes,
		a.resources_memory_limit_bytes, a.last_deployed_date, COALESCE(a.last_deployed_by, ''),
		j.exit_code, j.termination_reason, ` + shardTarget("$18") + `
	FROM j LEFT JOIN actual_data_job_deployment a ON a.data_job_name = j.job_name AND a.job_uid = j.job_uid
	ON CONFLICT (id) DO UPDATE SET status = EXCLUDED.status, message = EXCLUDED.message,
		start_time = COALESCE(e.start_time, EXCLUDED.start_time), end_time = EXCLUDED.end_time,
		exit_code = EXCLUDED.exit_code, termination_reason = EXCLUDED.termination_reason
	WHERE e.job_uid = EXCLUDED.job_uid AND e.target = EXCLUDED.target AND e.status IN ` + activeStatuses + `
		AND (e.status, e.message, e.end_time) IS DISTINCT FROM (EXCLUDED.status, EXCLUDED.message, EXCLUDED.end_time)
	RETURNING e.id, e.job_name, e.job_uid, e.status, e.start_time, e.end_time, e.type, e.message, e.started_by
), events AS (` + executionFinishedEvents + `
), lg AS (
	INSERT INTO data_job_execution_log (execution_id, logs, truncated, pending)
	SELECT up.id, j.logs, j.truncated, j.log_pending FROM up JOIN j ON j.id = up.id WHERE j.final AND j.logs IS NOT NULL
	ON CONFLICT (execution_id) DO UPDATE SET logs = EXCLUDED.logs, truncated = EXCLUDED.truncated,
		pending = EXCLUDED.pending, stored_at = now()
), last AS (
	SELECT DISTINCT ON (up.job_name) up.* FROM up JOIN j ON j.id = up.id WHERE j.final
	ORDER BY up.job_name, up.end_time DESC NULLS LAST
), jr AS (
	UPDATE data_job d SET last_execution_status = last.status, last_execution_end_time = last.end_time,
		last_execution_duration = GREATEST(0, EXTRACT(EPOCH FROM last.end_time - last.start_time))::integer,
		last_execution_id = last.id
	FROM last WHERE d.name = last.job_name AND d.uid = last.job_uid
		AND (d.last_execution_end_time IS NULL OR d.last_execution_end_time <= last.end_time)
)
SELECT id FROM up`
	args := columns(us, func(u job.ExecutionUpdate) []any {
		var logs, tail *string
		if u.Log != nil {
			logs = &u.Log.Logs
		}
		if u.Log != nil && !u.Log.Pending {
			t := job.LogTail(u.Log.Logs, job.NotificationLogLines, job.NotificationLogBytes)
			tail = &t
		}
		return []any{
			u.ID, u.JobName, u.JobUID, u.Type, string(u.Status), u.Message, u.OpID,
			u.StartTime, u.EndTime, u.StartedBy, u.Status.Final(), logs, u.Log != nil && u.Log.Truncated, tail,
			u.ExitCode, u.TerminationReason, u.Log != nil && u.Log.Pending,
		}
	})
	names := namesOf(us, func(u job.ExecutionUpdate) string { return u.JobName })
	// The tracker writes the jobs' last execution: it takes their rows for no-key update
	// first, or a deployment's delete (the job's lock, then its runs' cancel) and this
	// (a run's row, then its job's last execution) would meet in the other order.
	written, err := s.writeLocked(ctx, lockForNoKeyUpdate, "tracker", names, q, append(args, fence.Epoch)...)
	if err != nil {
		return nil, translate(fmt.Errorf("record %d execution statuses: %w", len(us), err))
	}
	done := make(map[string]bool, len(written))
	for _, id := range written {
		done[id] = true
	}
	wrote = make([]bool, len(us))
	for i, u := range us {
		wrote[i] = done[u.ID]
	}
	return wrote, nil
}

// StoreExecutionLog keeps the end of the log of the final execution id, unless one is kept
// already (a pending row, written with the final status, becomes the kept log), while
// fence holds the lease. It reports whether it wrote.
//
// The same statement gives the execution's finished event (written with the final status,
// when the log was still pending) the log's last lines, which its mails quote: the
// dispatcher holds such an event back while its log is pending (UnexpandedEvents).
func (s *Store) StoreExecutionLog(ctx context.Context, fence job.Fence, id string, l job.StoredLog) (bool, error) {
	var kept int
	err := s.pool.QueryRow(ctx, `WITH kept AS (
	INSERT INTO data_job_execution_log AS l (execution_id, logs, truncated)
	SELECT e.id, $2, $3 FROM data_job_execution e
	WHERE e.id = $1 AND e.status NOT IN `+activeStatuses+` AND `+syncLeaseHeld("$4")+`
	ON CONFLICT (execution_id) DO UPDATE SET logs = EXCLUDED.logs, truncated = EXCLUDED.truncated, pending = false, stored_at = now()
		WHERE l.pending
	RETURNING execution_id
), tail AS (
	UPDATE notification_event ev SET payload = jsonb_set(ev.payload, '{log_tail}', to_jsonb($5::text))
	FROM kept WHERE ev.key = 'execution:' || kept.execution_id || ':finished' AND COALESCE(ev.payload->>'log_tail', '') = ''
)
SELECT count(*) FROM kept`, id, l.Logs, l.Truncated, fence.Epoch,
		job.LogTail(l.Logs, job.NotificationLogLines, job.NotificationLogBytes)).Scan(&kept)
	if err != nil {
		return false, translate(fmt.Errorf("store log of execution %s: %w", id, err))
	}
	return kept == 1, nil
}

// FinalWithoutLog returns those of ids that are final executions with no log kept, none
// or a pending one (a leader stopped between the final status and the log).
func (s *Store) FinalWithoutLog(ctx context.Context, ids []string) ([]string, error) {
	rows, err := s.pool.Query(ctx, `SELECT e.id FROM data_job_execution e
WHERE e.id = ANY($1) AND e.status NOT IN `+activeStatuses+`
	AND NOT EXISTS (SELECT 1 FROM data_job_execution_log l WHERE l.execution_id = e.id AND NOT l.pending)`, ids)
	if err != nil {
		return nil, translate(fmt.Errorf("read executions without log: %w", err))
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	return out, translate(err)
}

// DeleteExpiredExecutions deletes final executions beyond r, in statements of r.Batch
// rows each (short locks), while fence holds the lease. Submitted and running executions
// are never deleted. It returns how many it deleted.
func (s *Store) DeleteExpiredExecutions(ctx context.Context, fence job.Fence, r job.Retention) (int, error) {
	q := `DELETE FROM data_job_execution WHERE id IN (
	SELECT id FROM (
		SELECT id, end_time, row_number() OVER (PARTITION BY job_name, job_uid ORDER BY end_time DESC NULLS LAST, id DESC) AS rn
		FROM data_job_execution WHERE status NOT IN ` + activeStatuses + `
			-- An open backfill's runs stay until it finished and counted them (backfill.go).
			AND (backfill_id IS NULL OR backfill_id IN (SELECT id FROM data_job_backfill WHERE finished_at IS NOT NULL))
	) x WHERE rn > $1 OR end_time < now() - $2::interval
	LIMIT $3
) AND ` + syncLeaseHeld("$4")
	return s.deleteExpired(ctx, q, fence, r, "executions")
}

// deleteExpired runs the retention statement q ($1 kept per job, $2 max age, $3 batch,
// $4 the fence's epoch) until a statement deletes less than a batch, and returns how many
// rows of what it deleted.
func (s *Store) deleteExpired(ctx context.Context, q string, fence job.Fence, r job.Retention, what string) (int, error) {
	total := 0
	for {
		tag, err := s.pool.Exec(ctx, q, r.KeptPerJob, r.MaxAge, r.Batch, fence.Epoch)
		if err != nil {
			return total, translate(fmt.Errorf("delete expired %s: %w", what, err))
		}
		total += int(tag.RowsAffected())
		if int(tag.RowsAffected()) < r.Batch {
			return total, nil
		}
	}
}

// The messages of the cancels a job's change asks for (DESIGN.md invariant 11).
const (
	MsgJobDeleted        = "the data job was deleted"
	MsgDeploymentDeleted = "the deployment of the data job was deleted"
	MsgJobMoved          = "the data job was moved to another team"
	MsgReplaced          = "a new run replaced it (concurrency policy Replace)"
)

// cancelJobExecutions asks the leader to cancel every submitted and running execution of
// the job incarnation uid, with message as the cancelled status's message, and notifies it
// of each at commit. A cancel asked already keeps its message.
func cancelJobExecutions(ctx context.Context, tx Tx, uid, message string) error {
	return cancelExecutions(ctx, tx, `job_uid = $1::uuid`, uid, message)
}

// cancelExecutions is cancelJobExecutions for the executions where cond (a constant
// condition on $1, arg) holds.
func cancelExecutions(ctx context.Context, tx Tx, cond string, arg any, message string) error {
	rows, _ := tx.Query(ctx, `UPDATE data_job_execution SET cancel_requested_at = now(), cancel_message = $2
WHERE `+cond+` AND status IN `+activeStatuses+` AND cancel_requested_at IS NULL
RETURNING id`, arg, message)
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return writeError(fmt.Sprintf("cancel executions (%s, %v)", cond, arg), err)
	}
	for _, id := range ids {
		if err := notify(ctx, tx, ExecutionsChannel, id); err != nil {
			return err
		}
	}
	return nil
}

// moveJobExecutions moves the executions of the job incarnation uid to team with their
// job, and asks for the cancel of those still running: they run with the old team's
// credentials and cannot be moved.
func moveJobExecutions(ctx context.Context, tx Tx, uid, team string) error {
	if _, err := tx.Exec(ctx, `UPDATE data_job_execution SET team = $2 WHERE job_uid = $1::uuid`, uid, team); err != nil {
		return writeError("move executions of job "+uid, err)
	}
	return cancelJobExecutions(ctx, tx, uid, MsgJobMoved)
}
