package store

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/datajobs/datajobs/internal/job"
)

// DesiredChannel is the PostgreSQL NOTIFY channel of desired-state changes. Every write
// that can change a job's CronJob sends the job name on it in the same transaction, so
// the synchronizer hears of a change exactly when it is committed, and never of a
// rolled-back one.
const DesiredChannel = "datajobs_desired"

// jobColumns are the columns of data_job in the order scanJob reads them.
const jobColumns = `j.name, j.uid::text, j.team, j.description, j.schedule, j.db_default_type,
	j.notified_on_job_failure_user_error, j.notified_on_job_failure_platform_error,
	j.notified_on_job_success, j.notified_on_job_deploy,
	j.generate_keytab, j.enable_execution_notifications, j.notification_delay_period_minutes,
	j.generation, j.revision, coalesce(j.managed_by, ''), j.created_at, j.updated_at, j.hashed_schedule`

// jobDest returns the scan destinations of jobColumns into j.
func jobDest(j *job.Job) []any {
	return []any{
		&j.Name, &j.UID, &j.Team, &j.Description, &j.Schedule, &j.DBDefaultType,
		&j.Contacts.NotifiedOnJobFailureUserError, &j.Contacts.NotifiedOnJobFailurePlatformError,
		&j.Contacts.NotifiedOnJobSuccess, &j.Contacts.NotifiedOnJobDeploy,
		&j.GenerateKeytab, &j.EnableExecutionNotifications, &j.NotificationDelayPeriodMinutes,
		&j.Generation, &j.Revision, &j.ManagedBy, &j.CreatedAt, &j.UpdatedAt, &j.HashedSchedule,
	}
}

// CreateJob inserts a new data job with a new UID and generation 1. A name that exists
// (in any team: names are global, as CronJob names are) is a conflict, and so is a team
// at its job quota.
func (s *Store) CreateJob(ctx context.Context, j job.Job) (job.Job, error) {
	var out job.Job
	err := s.InTx(ctx, func(tx Tx) (err error) {
		out, err = s.createJob(ctx, tx, j)
		return err
	})
	return out, err
}

// createJob is CreateJob in tx.
func (s *Store) createJob(ctx context.Context, tx Tx, j job.Job) (job.Job, error) {
	if err := s.checkJobsQuota(ctx, tx, j.Team); err != nil {
		return job.Job{}, err
	}
	out, err := insertJob(ctx, tx, j)
	if sqlState(err) == "23505" { // unique violation
		return job.Job{}, job.JobExists(j.Name)
	}
	if err != nil {
		return job.Job{}, writeError(fmt.Sprintf("create job %s", j.Name), err)
	}
	return out, revisionOf(ctx, tx, job.RevisionCreate, 0, job.Job{}, nil, out, nil)
}

// insertJob inserts j with a new UID and generation 1 (the API's creation and imports).
// An apply's job (the actor's File) is its file's already: no second row version to own it.
func insertJob(ctx context.Context, tx Tx, j job.Job) (job.Job, error) {
	const q = `
INSERT INTO data_job AS j (name, team, description, schedule, db_default_type,
	notified_on_job_failure_user_error, notified_on_job_failure_platform_error,
	notified_on_job_success, notified_on_job_deploy,
	generate_keytab, enable_execution_notifications, notification_delay_period_minutes, hashed_schedule, managed_by, uid)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, NULLIF($14, ''), gen_random_uuid())
RETURNING ` + jobColumns
	var out job.Job
	err := tx.QueryRow(ctx, q, append(jobValues(j), job.ActorFrom(ctx).File)...).Scan(jobDest(&out)...)
	return out, err
}

// updateJob writes every column of j but its identity to the row of j.Name; bump bumps
// the generation (a change the CronJob may render) and notifies the synchronizer. An
// apply (the actor's File) makes its file the owner in the same row version.
func updateJob(ctx context.Context, tx Tx, j job.Job, bump bool) (job.Job, error) {
	const q = `
UPDATE data_job AS j SET team = $2, description = $3, schedule = $4, db_default_type = $5,
	notified_on_job_failure_user_error = $6, notified_on_job_failure_platform_error = $7,
	notified_on_job_success = $8, notified_on_job_deploy = $9,
	generate_keytab = $10, enable_execution_notifications = $11,
	notification_delay_period_minutes = $12, hashed_schedule = $13, generation = generation + $14,
	managed_by = coalesce(NULLIF($15, ''), managed_by), updated_at = now()
WHERE name = $1
RETURNING ` + jobColumns
	inc := 0
	if bump {
		inc = 1
	}
	var out job.Job
	if err := tx.QueryRow(ctx, q, append(jobValues(j), inc, job.ActorFrom(ctx).File)...).Scan(jobDest(&out)...); err != nil {
		return job.Job{}, err
	}
	if bump {
		return out, notify(ctx, tx, DesiredChannel, j.Name)
	}
	return out, nil
}

// jobValues are the parameters $1 to $13 of insertJob and updateJob.
func jobValues(j job.Job) []any {
	c := j.Contacts
	return []any{
		j.Name, j.Team, j.Description, j.Schedule, j.DBDefaultType,
		nonNil(c.NotifiedOnJobFailureUserError), nonNil(c.NotifiedOnJobFailurePlatformError),
		nonNil(c.NotifiedOnJobSuccess), nonNil(c.NotifiedOnJobDeploy),
		j.GenerateKeytab, j.EnableExecutionNotifications, j.NotificationDelayPeriodMinutes, j.HashedSchedule,
	}
}

// GetJob reads the job name of team; a job of another team is not found.
func (s *Store) GetJob(ctx context.Context, team, name string) (job.Job, error) {
	q := `SELECT ` + jobColumns + ` FROM data_job j WHERE j.name = $1 AND j.team = $2`
	var j job.Job
	err := s.pool.QueryRow(ctx, q, name, team).Scan(jobDest(&j)...)
	return j, rowError(err, job.JobNotFound(team, name), "get job "+name)
}

// UpdateJob changes the job name of team under a row lock, so that concurrent updates
// apply one after the other. Name, UID, generation and creation time are kept whatever
// update returns; everything else, team included, is written.
func (s *Store) UpdateJob(ctx context.Context, team, name string, update job.JobUpdate) (job.Job, error) {
	var out job.Job
	err := s.inLockedTx(ctx, team, name, func(tx Tx, st job.JobState) (err error) {
		out, err = s.updateJobIn(ctx, tx, st, update)
		return err
	})
	return out, err
}

// updateJobIn is UpdateJob in tx, on the state st read under the job's lock. A job a file
// owns is changed only by an apply of that file (job.CheckOwner).
func (s *Store) updateJobIn(ctx context.Context, tx Tx, st job.JobState, update job.JobUpdate) (job.Job, error) {
	cur, name := st.Job, st.Job.Name
	if err := job.CheckOwner(ctx, "data job", name, cur.ManagedBy); err != nil {
		return job.Job{}, err
	}
	next, bump, err := update(cur)
	if err != nil {
		return job.Job{}, err
	}
	if next.Team != cur.Team {
		if err := s.checkJobsQuota(ctx, tx, next.Team); err != nil {
			return job.Job{}, err
		}
		if st.Desired != nil { // its deployment's profile must be granted to the new team
			var check pipeline
			check.checkGrant(job.ActorFrom(ctx).User, next.Team, st.Desired.ProfileName())
			if err := check.send(ctx, tx); err != nil {
				return job.Job{}, err
			}
		}
	}
	next.Name = name
	out, err := updateJob(ctx, tx, next, bump)
	if err != nil {
		return job.Job{}, writeError(fmt.Sprintf("update job %s", name), err)
	}
	if err := revisionOf(ctx, tx, job.RevisionUpdate, 0, cur, st.Desired, out, st.Desired); err != nil {
		return job.Job{}, err
	}
	if next.Team == cur.Team {
		return out, nil
	}
	return out, moveJobExecutions(ctx, tx, cur.UID, next.Team)
}

// DeleteJob deletes the job name of team with its desired deployment and properties (by
// cascade) in one transaction, asks for the cancel of its submitted and running
// executions, and notifies the synchronizer. The actual deployment row and the execution
// rows stay: the synchronizer deletes the CronJob, then the row (asynchronous deletion),
// and cancels the executions, whose rows retention removes.
func (s *Store) DeleteJob(ctx context.Context, team, name string) error {
	return s.InTx(ctx, func(tx Tx) error { return deleteJob(ctx, tx, team, name) })
}

// deleteJob is DeleteJob in tx. A job a file owns is deleted only by an apply of that
// file (job.CheckOwner): the delete is rolled back.
func deleteJob(ctx context.Context, tx Tx, team, name string) error {
	var uid, owner string
	err := tx.QueryRow(ctx, `DELETE FROM data_job WHERE name = $1 AND team = $2 RETURNING uid::text, coalesce(managed_by, '')`, name, team).Scan(&uid, &owner)
	if err != nil {
		return rowError(err, job.JobNotFound(team, name), "delete job "+name)
	}
	if err := job.CheckOwner(ctx, "data job", name, owner); err != nil {
		return err
	}
	// Read after the delete took the job's lock: a pipeline stored meanwhile is seen.
	if err := pipelineUsing(ctx, tx, name); err != nil {
		return err
	}
	if err := cancelJobExecutions(ctx, tx, uid, MsgJobDeleted); err != nil {
		return err
	}
	return notify(ctx, tx, DesiredChannel, name)
}

// lockJob reads the job name of team and locks its row until the transaction ends. Every
// write of a job or its deployment takes this lock first, so writes of one job are
// serialised and never deadlock.
func lockJob(ctx context.Context, tx Tx, team, name string) (job.Job, error) {
	q := `SELECT ` + jobColumns + ` FROM data_job j WHERE j.name = $1 FOR UPDATE`
	var j job.Job
	err := tx.QueryRow(ctx, q, name).Scan(jobDest(&j)...)
	if err == nil && j.Team != team {
		err = pgx.ErrNoRows
	}
	return j, rowError(err, job.JobNotFound(team, name), "lock job "+name)
}

// bumpGeneration marks a change of what the job's CronJob renders from, and notifies the
// synchronizer when the transaction commits.
func bumpGeneration(ctx context.Context, tx Tx, name string) error {
	var p pipeline
	p.bumpGeneration(name)
	return p.send(ctx, tx)
}

// notify queues a notification of payload on channel; PostgreSQL delivers it at commit.
func notify(ctx context.Context, tx Tx, channel, payload string) error {
	var p pipeline
	p.notify(channel, payload)
	return p.send(ctx, tx)
}

// writeError wraps a failed write. Input the database cannot store (class 22, data
// exception: a NUL character, a number out of range) is the user's error, not a 500.
func writeError(op string, err error) error {
	if pgErr, ok := errors.AsType[*pgconn.PgError](err); ok && strings.HasPrefix(pgErr.Code, "22") {
		e := job.Invalid("body", "a value the database can store", "rejected: "+pgErr.Message)
		e.Err = err
		return e
	}
	return translate(fmt.Errorf("%s: %w", op, err))
}

// sqlState is the SQLSTATE of a PostgreSQL error, "" for any other error.
func sqlState(err error) string {
	if pgErr, ok := errors.AsType[*pgconn.PgError](err); ok {
		return pgErr.Code
	}
	return ""
}

// constraintOf is the constraint a PostgreSQL error names, "" when none.
func constraintOf(err error) string {
	if pgErr, ok := errors.AsType[*pgconn.PgError](err); ok {
		return pgErr.ConstraintName
	}
	return ""
}

// nonNil stores an absent list as an empty array: the columns are NOT NULL.
func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
