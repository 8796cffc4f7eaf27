package job

import (
	"encoding/json"
	"fmt"
	"reflect"
)

// ImportedDeployment is a data job and its deployment read from a CronJob that datajobs
// did not create (`datajobs import`). The CronJob already runs, so the deployment is
// stored as synced and the actual row as applied: the synchronizer's next pass only
// adopts the CronJob (adds datajobs' labels and annotations) and changes nothing else.
type ImportedDeployment struct {
	// Job is the data job to store; its UID and generation are assigned by the store.
	Job Job
	// Deployment is the desired deployment; Deployment.Adopted names the CronJob and its spec.
	Deployment Deployment
	// Actual builds the actual row from the job as stored (its UID and generation are
	// known only then, and the rendered hash depends on them).
	Actual func(j Job) ActualDeployment
}

// ImportOptions say what an import may do.
type ImportOptions struct {
	// Overwrite replaces a job of the same name that was not imported from this CronJob
	// (or was, before the CronJob changed). Default: leave it alone and report a conflict.
	Overwrite bool
	// DryRun makes every check and every write of the import, then rolls it back.
	DryRun bool
}

// ImportOutcome is what an import did with one job.
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
	Job Job
}

// Conflict says why the stored job cur, with its desired deployment d, is not the import
// in, or "" when it is: imported from the same CronJob, with the same spec, team and
// configuration.
func (in ImportedDeployment) Conflict(cur Job, d *Deployment) string {
	switch {
	case d == nil:
		return fmt.Sprintf("a job of this name (team %s) exists without a deployment", cur.Team)
	case d.Adopted == nil:
		return fmt.Sprintf("a job of this name (team %s) exists, deployed by datajobs", cur.Team)
	case d.Adopted.CronJobUID != in.Deployment.Adopted.CronJobUID:
		return fmt.Sprintf("a job of this name (team %s) was imported from another CronJob (UID %s)", cur.Team, d.Adopted.CronJobUID)
	case cur.Team != in.Job.Team:
		return fmt.Sprintf("imported from this CronJob for team %s, now read as team %s", cur.Team, in.Job.Team)
	case !sameJSON(d.Adopted.Spec, in.Deployment.Adopted.Spec) || !d.SameConfig(in.Deployment) || !cur.SameConfig(in.Over(cur)):
		return "imported from this CronJob, which has changed since"
	}
	return ""
}

// Over is the job the import makes of the stored job cur: what an import does not derive
// from a CronJob (description, keytab and notification delay) stays as it is.
func (in ImportedDeployment) Over(cur Job) Job {
	j := in.Job
	j.Description, j.GenerateKeytab, j.NotificationDelayPeriodMinutes = cur.Description, cur.GenerateKeytab, cur.NotificationDelayPeriodMinutes
	return j
}

// sameJSON compares two JSON documents by value: jsonb gives back its own key order and spacing.
func sameJSON(a, b []byte) bool {
	var va, vb any
	if json.Unmarshal(a, &va) != nil || json.Unmarshal(b, &vb) != nil {
		return false
	}
	return reflect.DeepEqual(va, vb)
}
