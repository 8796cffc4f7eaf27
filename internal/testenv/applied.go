package testenv

import (
	"context"
	"testing"
	"time"

	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/store"
)

// DeployApplied creates the job name of team on db, deploys its version v1 and records
// the deployment applied under fence, as the synchronizer records a CronJob it wrote: the
// job then runs (a manual start or a pipeline's node may start it).
func DeployApplied(t testing.TB, db *store.Store, fence job.Fence, team, name string) {
	t.Helper()
	ctx := context.Background()
	if _, err := db.CreateJob(ctx, job.Job{Name: name, Team: team}); err != nil {
		t.Fatalf("testenv: create job %s: %v", name, err)
	}
	_, err := db.ChangeDeployment(ctx, team, name, func(_ job.Job, _ *job.Deployment) (job.Deployment, error) {
		return job.Deployment{JobVersion: "v1", PythonVersion: "3.9", Enabled: true, DeployedBy: "me", DeployedDate: time.Now()}, nil
	})
	if err != nil {
		t.Fatalf("testenv: deploy job %s: %v", name, err)
	}
	s, err := db.LoadSyncState(ctx, name)
	if err != nil {
		t.Fatalf("testenv: read job %s: %v", name, err)
	}
	wrote, err := db.RecordAppliedAll(ctx, fence, []job.ActualDeployment{{
		JobName: name, JobUID: s.Job.UID, Generation: s.Job.Generation, Team: team, DeploymentVersionSHA: "h",
		JobVersion: "v1", PythonVersion: "3.9", Enabled: true, DeployedBy: "me", DeployedDate: time.Now(),
	}})
	if err != nil || len(wrote) != 1 || !wrote[0] {
		t.Fatalf("testenv: record job %s applied: %v %v", name, wrote, err)
	}
}
