package store

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/datajobs/datajobs/internal/job"
)

// stateQuery reads a job with its desired and actual deployments in one query.
const stateQuery = `SELECT ` + jobColumns + `, ` + joinedDesiredColumns + `, ` + joinedActualColumns + `
FROM data_job j
LEFT JOIN desired_data_job_deployment d ON d.data_job_name = j.name
LEFT JOIN actual_data_job_deployment a ON a.data_job_name = j.name AND a.job_uid = j.uid
WHERE j.name = $1`

// scanState scans row, of stateQuery, as the state of the job name of team.
func scanState(row pgx.Row, team, name string) (job.JobState, error) {
	var st job.JobState
	var r joined
	err := row.Scan(append(append(jobDest(&st.Job), r.desiredDest()...), r.actualDest()...)...)
	if err == nil && st.Job.Team != team {
		err = pgx.ErrNoRows
	}
	st.Desired, st.Actual = r.deployment(st.Job), r.actual(st.Job)
	return st, rowError(err, job.JobNotFound(team, name), "read deployment of "+name)
}

// GetDeploymentState reads the job name of team with its deployments, in one query.
func (s *Store) GetDeploymentState(ctx context.Context, team, name string) (job.JobState, error) {
	return scanState(s.pool.QueryRow(ctx, stateQuery, name), team, name)
}

// lockState is GetDeploymentState inside a transaction, with the job row locked. The lock
// is taken first, by a statement of its own: a locking statement that waited for another
// transaction re-reads the locked row only, not the rows it joins, so the state is read
// by the next statement, whose snapshot includes what that transaction committed. A
// transaction that starts with it is better begun by inLockedTx, in one round trip.
func lockState(ctx context.Context, tx Tx, team, name string) (job.JobState, error) {
	var p pipeline
	var st job.JobState
	p.lockState(team, name, &st, nil)
	return st, p.send(ctx, tx)
}

// ChangeDeployment writes a job's desired deployment in one transaction: it locks the job
// row (so concurrent changes apply one after the other, each on the result of the
// previous), stores what change returns with status pending, bumps the job generation and
// notifies the synchronizer. It returns the stored deployment. A change that leaves the
// configuration as it is (job.Deployment.SameConfig) writes nothing and returns the
// current deployment: an unchanged redeploy costs no write anywhere, unless the deployment
// failed on a user error (e.g. its image build): then the redeploy is the user's retry.
//
// The change is recorded as the job's next revision (deploy), in the same transaction.
func (s *Store) ChangeDeployment(ctx context.Context, team, name string, change job.DeploymentUpdate) (job.Deployment, error) {
	return s.changeDeployment(ctx, team, name, func(_ context.Context, _ Tx, st job.JobState) (job.Deployment, int, error) {
		d, err := change(st.Job, st.Desired)
		return d, 0, err
	})
}

// deploymentChange computes the next desired deployment from the locked state, inside the
// change's transaction; rollbackOf names the revision it restores (0: not a rollback).
type deploymentChange func(ctx context.Context, tx Tx, st job.JobState) (next job.Deployment, rollbackOf int, err error)

// changeDeployment is ChangeDeployment and RollbackDeployment: three round trips (the
// BEGIN with the lock and the read; the writes; the commit).
func (s *Store) changeDeployment(ctx context.Context, team, name string, change deploymentChange) (job.Deployment, error) {
	var out job.Deployment
	err := s.inLockedTx(ctx, team, name, func(tx Tx, st job.JobState) (err error) {
		out, err = changeDeploymentIn(ctx, tx, st, change, unmarked)
		return err
	})
	return out, err
}

// marked is how far the transaction marked the job changed already (TeamTx): a write of
// its deployment bumps its generation and notifies the synchronizer only as far as still
// needed, so that the job's row has one new version, not two.
type marked uint8

const (
	unmarked  marked = iota // bump the generation and notify
	newRow                  // created in the transaction, a generation no one saw: notify
	bumpedRow               // bumped and notified in the transaction: nothing more
)

// changeDeploymentIn is changeDeployment in tx, on the state st read under the job's lock
// (and mark, its job's changes in tx). A job a file owns is changed only by an apply of
// that file (job.CheckOwner). A change of the execution profile it selects checks the
// grant in the same transaction (checkGrant).
func changeDeploymentIn(ctx context.Context, tx Tx, st job.JobState, change deploymentChange, mark marked) (job.Deployment, error) {
	name := st.Job.Name
	if err := job.CheckOwner(ctx, "data job", name, st.Job.ManagedBy); err != nil {
		return job.Deployment{}, err
	}
	next, rollbackOf, err := change(ctx, tx, st)
	if err != nil {
		return job.Deployment{}, err
	}
	if st.Desired != nil && next.SameConfig(*st.Desired) && st.Desired.Status != job.StatusUserError {
		return *st.Desired, nil
	}
	next.JobName = name
	var writes pipeline
	if st.Desired == nil || st.Desired.ProfileName() != next.ProfileName() {
		writes.checkGrant(job.ActorFrom(ctx).User, st.Job.Team, next.ProfileName())
	}
	moved := st.Desired != nil && st.Desired.ExecutionTarget != next.ExecutionTarget
	if next.ExecutionTarget != "" && (st.Desired == nil || moved) {
		writes.checkTarget(st.Job.Team, next.ExecutionTarget)
	}
	writes.upsertDesired(&next, func(err error) error {
		return writeError(fmt.Sprintf("write deployment of %s", name), err)
	})
	kind := job.RevisionDeploy
	if rollbackOf != 0 {
		kind = job.RevisionRollback
	}
	if err := writes.revisionOf(ctx, kind, rollbackOf, st.Job, st.Desired, st.Job, &next); err != nil {
		return job.Deployment{}, err
	}
	switch mark {
	case unmarked:
		writes.bumpGeneration(name)
	case newRow:
		writes.notify(DesiredChannel, name)
	}
	if err := writes.send(ctx, tx); err != nil {
		return job.Deployment{}, err
	}
	if moved { // its runs end where their Jobs are (invariant 11)
		err := cancelExecutions(ctx, tx, `job_uid = $1::uuid AND target <> datajobs_job_target(job_name)`, st.Job.UID, MsgTargetMoved)
		if err != nil {
			return job.Deployment{}, err
		}
	}
	return next, nil
}

// upsertDesired queues the write of d as the desired deployment of d.JobName, pending,
// and the read of the sync state it keeps (status generation, last sync) back into d. An
// adoption is kept. Its failure is reported as failed(err).
func (p *pipeline) upsertDesired(d *job.Deployment, failed func(error) error) {
	const q = `
INSERT INTO desired_data_job_deployment AS d (data_job_name, git_commit_sha, vdk_version,
	python_version, schedule, resources_cpu_request_millis, resources_cpu_limit_millis,
	resources_memory_request_bytes, resources_memory_limit_bytes, enabled, last_deployed_by,
	last_deployed_date, status, message, run_policy, hashed_schedule, execution_profile, execution_target)
VALUES ($1, $2, $3, $4, $5, NULLIF($6::bigint, 0), NULLIF($7::bigint, 0), NULLIF($8::bigint, 0), NULLIF($9::bigint, 0), $10, $11, $12, 'pending', '', $13::jsonb, $14, $15, NULLIF($16, ''))
ON CONFLICT (data_job_name) DO UPDATE SET git_commit_sha = excluded.git_commit_sha,
	vdk_version = excluded.vdk_version, python_version = excluded.python_version,
	schedule = excluded.schedule,
	resources_cpu_request_millis = excluded.resources_cpu_request_millis,
	resources_cpu_limit_millis = excluded.resources_cpu_limit_millis,
	resources_memory_request_bytes = excluded.resources_memory_request_bytes,
	resources_memory_limit_bytes = excluded.resources_memory_limit_bytes,
	enabled = excluded.enabled, last_deployed_by = excluded.last_deployed_by,
	last_deployed_date = excluded.last_deployed_date, status = 'pending', message = '',
	run_policy = excluded.run_policy, hashed_schedule = excluded.hashed_schedule, execution_profile = excluded.execution_profile,
	execution_target = excluded.execution_target
RETURNING status_generation, last_sync_at`
	r := d.Resources
	d.Status, d.Message = job.StatusPending, ""
	d.ExecutionProfile = d.ProfileName()
	p.queryRow(func(row pgx.Row) error {
		err := row.Scan(&d.StatusGeneration, &d.LastSyncAt)
		if sqlState(err) == foreignKeyViolation { // the profile or target is gone (a rollback to it)
			if d.ExecutionTarget != "" && constraintOf(err) == "desired_data_job_deployment_execution_target_fkey" {
				return job.TargetNotFound(d.ExecutionTarget)
			}
			return job.ProfileNotFound(d.ExecutionProfile)
		}
		if err != nil {
			return failed(err)
		}
		return nil
	}, q, d.JobName, d.JobVersion, d.VDKVersion, d.PythonVersion, d.Schedule,
		r.CPURequestMillis, r.CPULimitMillis, r.MemoryRequestBytes, r.MemoryLimitBytes,
		d.Enabled, d.DeployedBy, d.DeployedDate, d.Policy, d.HashedSchedule, d.ExecutionProfile, d.ExecutionTarget)
}

// DeleteDeployment deletes the desired deployment of the job name of team, bumps the job
// generation, asks for the cancel of its submitted and running executions and notifies
// the synchronizer, which deletes the CronJob and then the actual row. Deleting a deployment whose deletion is already under way (no desired row, an
// actual row left) succeeds and changes nothing; with neither, it is not found.
func (s *Store) DeleteDeployment(ctx context.Context, team, name string) error {
	return s.inLockedTx(ctx, team, name, func(tx Tx, st job.JobState) error {
		return deleteDeployment(ctx, tx, st)
	})
}

// deleteDeployment is DeleteDeployment in tx, on the state st read under the job's lock.
// A job a file owns is changed only by an apply of that file (job.CheckOwner).
func deleteDeployment(ctx context.Context, tx Tx, st job.JobState) error {
	name := st.Job.Name
	if err := job.CheckOwner(ctx, "data job", name, st.Job.ManagedBy); err != nil {
		return err
	}
	if st.Desired == nil {
		if st.Actual != nil {
			return nil
		}
		return job.DeploymentNotFound(name)
	}
	if _, err := tx.Exec(ctx, `DELETE FROM desired_data_job_deployment WHERE data_job_name = $1`, name); err != nil {
		return fmt.Errorf("delete deployment of %s: %w", name, err)
	}
	if err := cancelJobExecutions(ctx, tx, st.Job.UID, MsgDeploymentDeleted); err != nil {
		return err
	}
	if err := revisionOf(ctx, tx, job.RevisionUndeploy, 0, st.Job, st.Desired, st.Job, nil); err != nil {
		return err
	}
	return bumpGeneration(ctx, tx, name)
}
