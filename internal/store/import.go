package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/datajobs/datajobs/internal/job"
)

var errRollback = errors.New("dry run: roll back")

// ImportDeployment stores an imported job, its desired deployment (status synced at the
// job's generation, with the adoption columns set) and its actual row, in one
// transaction, and notifies the synchronizer. It is idempotent: a job already imported
// from the same CronJob (same UID and spec, same configuration) is reported as existing
// and nothing is written. Any other job of that name, or an actual row left by a deleted
// job whose CronJob is still being removed, is a conflict unless opts.Overwrite: then the
// job keeps its UID, creation time, properties and executions, and everything the import
// derives (team, schedule, notification settings, deployment, actual row) is replaced
// under a new generation.
func (s *Store) ImportDeployment(ctx context.Context, in job.ImportedDeployment, opts job.ImportOptions) (job.ImportResult, error) {
	if in.Deployment.Adopted == nil || in.Actual == nil {
		return job.ImportResult{}, fmt.Errorf("import job %s: the deployment must name the adopted CronJob", in.Job.Name)
	}
	name := in.Job.Name
	var res job.ImportResult
	err := s.InTx(ctx, func(tx Tx) error {
		st, err := lockImport(ctx, tx, name)
		if err != nil {
			return err
		}
		cur, desired, actual := st.Job, st.Desired, st.Actual
		var j job.Job
		switch {
		case cur == nil && actual != nil && !opts.Overwrite:
			res = job.ImportResult{Outcome: job.ImportConflict, Reason: "the database still records a CronJob of a deleted job of this name (the synchronizer has not finished deleting it)"}
			return nil
		case cur == nil:
			if j, err = insertJob(ctx, tx, in.Job); err != nil {
				return err
			}
			res = job.ImportResult{Outcome: job.ImportCreated}
		default:
			why := in.Conflict(*cur, desired)
			if why == "" {
				res = job.ImportResult{Outcome: job.ImportExists, Reason: "already imported from this CronJob", Job: *cur}
				return nil
			}
			if !opts.Overwrite {
				res = job.ImportResult{Outcome: job.ImportConflict, Reason: why, Job: *cur}
				return nil
			}
			if j, err = updateJob(ctx, tx, in.Over(*cur), true); err != nil {
				return err
			}
			res = job.ImportResult{Outcome: job.ImportReplaced, Reason: "replaced: " + why}
		}
		res.Job = j
		if err := upsertImportedDeployment(ctx, tx, j, in.Deployment); err != nil {
			return err
		}
		if err := upsertImportedActual(ctx, tx, in.Actual(j)); err != nil {
			return err
		}
		if err := notify(ctx, tx, DesiredChannel, name); err != nil {
			return err
		}
		if opts.DryRun {
			return errRollback
		}
		return nil
	})
	if errors.Is(err, errRollback) {
		return res, nil
	}
	if err != nil {
		return job.ImportResult{}, writeError("import job "+name, err)
	}
	return res, nil
}

// lockImport locks the job row and the actual row of name (when they exist) and reads
// them with the desired deployment, as the synchronizer does.
func lockImport(ctx context.Context, tx Tx, name string) (job.SyncState, error) {
	for _, row := range []string{"data_job WHERE name", "actual_data_job_deployment WHERE data_job_name"} {
		if _, err := tx.Exec(ctx, `SELECT FROM `+row+` = $1 FOR UPDATE`, name); err != nil {
			return job.SyncState{}, fmt.Errorf("lock %s: %w", name, err)
		}
	}
	states, err := loadSyncStates(ctx, tx, DefaultTarget, []string{name})
	return states[name], err
}

// upsertImportedDeployment writes the desired row as the API does, then marks it synced at
// the job's generation, with the adoption.
func upsertImportedDeployment(ctx context.Context, tx Tx, j job.Job, d job.Deployment) error {
	d.JobName = j.Name
	var p pipeline
	failed := wrapped("write deployment of " + j.Name)
	p.upsertDesired(&d, failed)
	const q = `UPDATE desired_data_job_deployment SET status = 'synced', status_generation = $2, last_sync_at = NULL,
	adopt_cronjob_uid = $3, adopted_spec = $4::jsonb WHERE data_job_name = $1`
	p.exec(failed, q, j.Name, j.Generation, d.Adopted.CronJobUID, string(d.Adopted.Spec))
	return p.send(ctx, tx)
}

// upsertImportedActual records the CronJob as applied for the job's UID and generation.
func upsertImportedActual(ctx context.Context, tx Tx, a job.ActualDeployment) error {
	if _, err := tx.Exec(ctx, upsertActual, actualValues(a)...); err != nil {
		return fmt.Errorf("write actual deployment of %s: %w", a.JobName, err)
	}
	return nil
}
