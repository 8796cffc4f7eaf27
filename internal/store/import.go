package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"

	"github.com/datajobs/datajobs/internal/job"
)

// ImportedDeployment is a data job and its deployment read from a CronJob that datajobs
// did not create (`datajobs import`). The CronJob already runs, so the deployment is
// stored as synced and the actual row as applied: the synchronizer's next pass only
// adopts the CronJob (adds datajobs' labels and annotations) and changes nothing else.
type ImportedDeployment struct {
	// Job is the data job to store; its UID and generation are assigned by the store.
	Job job.Job
	// Deployment is the desired deployment; Deployment.Adopted names the CronJob and its spec.
	Deployment job.Deployment
	// Actual builds the actual row from the job as stored (its UID and generation are
	// known only then, and the rendered hash depends on them).
	Actual func(j job.Job) job.ActualDeployment
}

// ImportOptions say what ImportDeployment may do.
type ImportOptions struct {
	// Overwrite replaces a job of the same name that was not imported from this CronJob
	// (or was, before the CronJob changed). Default: leave it alone and report a conflict.
	Overwrite bool
	// DryRun makes every check and every write of the import, then rolls it back.
	DryRun bool
}

// ImportOutcome is what ImportDeployment did with one job.
type ImportOutcome string

// The outcomes of an import.
const (
	// ImportCreated: the job, its deployment and its actual row were inserted.
	ImportCreated ImportOutcome = "created"
	// ImportReplaced: a conflicting job of that name was replaced (Overwrite).
	ImportReplaced ImportOutcome = "replaced"
	// ImportExists: the job was already imported from this very CronJob; nothing was written.
	ImportExists ImportOutcome = "exists"
	// ImportConflict: another job of that name is in the database; nothing was written.
	ImportConflict ImportOutcome = "conflict"
)

// ImportResult is the outcome of importing one job, and why.
type ImportResult struct {
	Outcome ImportOutcome
	// Reason explains a conflict or a replacement.
	Reason string
	// Job is the job as stored (created or replaced), or as found (exists, conflict).
	Job job.Job
}

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
func (s *Store) ImportDeployment(ctx context.Context, in ImportedDeployment, opts ImportOptions) (ImportResult, error) {
	if in.Deployment.Adopted == nil || in.Actual == nil {
		return ImportResult{}, fmt.Errorf("import job %s: the deployment must name the adopted CronJob", in.Job.Name)
	}
	name := in.Job.Name
	var res ImportResult
	err := s.InTx(ctx, func(tx Tx) error {
		st, err := lockImport(ctx, tx, name)
		if err != nil {
			return err
		}
		cur, desired, actual := st.Job, st.Desired, st.Actual
		var j job.Job
		switch {
		case cur == nil && actual != nil && !opts.Overwrite:
			res = ImportResult{Outcome: ImportConflict, Reason: "the database still records a CronJob of a deleted job of this name (the synchronizer has not finished deleting it)"}
			return nil
		case cur == nil:
			if j, err = insertJob(ctx, tx, in.Job); err != nil {
				return err
			}
			res = ImportResult{Outcome: ImportCreated}
		default:
			why := importConflict(*cur, desired, in)
			if why == "" {
				res = ImportResult{Outcome: ImportExists, Reason: "already imported from this CronJob", Job: *cur}
				return nil
			}
			if !opts.Overwrite {
				res = ImportResult{Outcome: ImportConflict, Reason: why, Job: *cur}
				return nil
			}
			if j, err = updateJob(ctx, tx, derived(*cur, in.Job), true); err != nil {
				return err
			}
			res = ImportResult{Outcome: ImportReplaced, Reason: "replaced: " + why}
		}
		res.Job = j
		if err := upsertImportedDeployment(ctx, tx, j, in.Deployment); err != nil {
			return err
		}
		if err := upsertImportedActual(ctx, tx, in.Actual(j)); err != nil {
			return err
		}
		if err := notifyDesired(ctx, tx, name); err != nil {
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
		return ImportResult{}, writeError("import job "+name, err)
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
	states, err := loadSyncStates(ctx, tx, " WHERE j.name = $1", " WHERE data_job_name = $1", name)
	return states[name], err
}

// importConflict says why the stored job is not the import of in, or "" when it is:
// imported from the same CronJob, with the same spec, team and configuration.
func importConflict(cur job.Job, d *job.Deployment, in ImportedDeployment) string {
	switch {
	case d == nil:
		return fmt.Sprintf("a job of this name (team %s) exists without a deployment", cur.Team)
	case d.Adopted == nil:
		return fmt.Sprintf("a job of this name (team %s) exists, deployed by datajobs", cur.Team)
	case d.Adopted.CronJobUID != in.Deployment.Adopted.CronJobUID:
		return fmt.Sprintf("a job of this name (team %s) was imported from another CronJob (UID %s)", cur.Team, d.Adopted.CronJobUID)
	case cur.Team != in.Job.Team:
		return fmt.Sprintf("imported from this CronJob for team %s, now read as team %s", cur.Team, in.Job.Team)
	case !sameJSON(d.Adopted.Spec, in.Deployment.Adopted.Spec) || !d.SameConfig(in.Deployment) || !cur.SameConfig(derived(cur, in.Job)):
		return "imported from this CronJob, which has changed since"
	}
	return ""
}

// derived is the job an import of in makes of cur: what an import does not derive from
// a CronJob (description, keytab and notification delay) stays as it is.
func derived(cur, in job.Job) job.Job {
	in.Description, in.GenerateKeytab, in.NotificationDelayPeriodMinutes = cur.Description, cur.GenerateKeytab, cur.NotificationDelayPeriodMinutes
	return in
}

// sameJSON compares two JSON documents by value: jsonb gives back its own key order and spacing.
func sameJSON(a, b []byte) bool {
	var va, vb any
	if json.Unmarshal(a, &va) != nil || json.Unmarshal(b, &vb) != nil {
		return false
	}
	return reflect.DeepEqual(va, vb)
}

// upsertImportedDeployment writes the desired row as the API does, then marks it synced at
// the job's generation, with the adoption.
func upsertImportedDeployment(ctx context.Context, tx Tx, j job.Job, d job.Deployment) error {
	d.JobName = j.Name
	if err := upsertDesired(ctx, tx, &d); err != nil {
		return fmt.Errorf("write deployment of %s: %w", j.Name, err)
	}
	const q = `UPDATE desired_data_job_deployment SET status = 'synced', status_generation = $2, last_sync_at = NULL,
	adopt_cronjob_uid = $3, adopted_spec = $4::jsonb WHERE data_job_name = $1`
	if _, err := tx.Exec(ctx, q, j.Name, j.Generation, d.Adopted.CronJobUID, string(d.Adopted.Spec)); err != nil {
		return fmt.Errorf("write deployment of %s: %w", j.Name, err)
	}
	return nil
}

// upsertImportedActual records the CronJob as applied for the job's UID and generation.
func upsertImportedActual(ctx context.Context, tx Tx, a job.ActualDeployment) error {
	if _, err := tx.Exec(ctx, upsertActual(""), actualValues(a)...); err != nil {
		return fmt.Errorf("write actual deployment of %s: %w", a.JobName, err)
	}
	return nil
}
