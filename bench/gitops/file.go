package main

import (
	"encoding/json"
	"fmt"

	"github.com/datajobs/datajobs/internal/gitops"
)

// version is which of the two versions of the file: 0 creates the jobs, 1 changes every
// one of them (its description, schedule, a contact, its deployment's version, retries
// and memory).
type version int

// jobs is the file's n jobs of team, their names prefixed: each with a configuration (a
// daily schedule, contacts) and a deployment of a version (a name, as the other benches
// deploy: the synchronizer's build is not measured), its resources and a retry.
func jobs(prefix string, n int, v version) []gitops.Job {
	out := make([]gitops.Job, n)
	for i := range out {
		version, retries, memory := "v1", int32(1), 1024.0
		desc, minute := fmt.Sprintf("job %d of the benchmark", i), i%60
		contacts := []string{fmt.Sprintf("owner-%d@example.com", i)}
		if v == 1 {
			version, retries, memory = "v2", 2, 2048
			desc, minute = desc+", changed", (i+7)%60
			contacts = append(contacts, "oncall@example.com")
		}
		out[i] = gitops.Job{
			JobName:     fmt.Sprintf("%s-job-%04d", prefix, i),
			Description: desc,
			Config: &gitops.JobConfig{
				Schedule: &gitops.Schedule{ScheduleCron: fmt.Sprintf("%d %d * * *", minute, i%24)},
				Contacts: &gitops.Contacts{NotifiedOnJobFailureUserError: contacts},
			},
			Deployment: &gitops.Deployment{
				JobVersion: version,
				Resources:  &gitops.Resources{CPURequest: 0.5, MemoryLimit: memory},
			},
		}
		out[i].Deployment.Retries = &retries
	}
	return out
}

// fileOf is the datajobs.yaml (as JSON: the apply takes both) of team with js.
func fileOf(team string, js []gitops.Job) ([]byte, error) {
	b, err := json.Marshal(gitops.File{APIVersion: gitops.APIVersion, Team: team, Jobs: js})
	if err != nil {
		return nil, fmt.Errorf("encode the file: %w", err)
	}
	return b, nil
}

// jobBody is the job j as the API's DataJob body (POST .../jobs, PUT .../jobs/{job}).
func jobBody(team string, j gitops.Job) ([]byte, error) {
	j.Deployment = nil
	b, err := json.Marshal(struct {
		gitops.Job
		Team string `json:"team"`
	}{j, team})
	if err != nil {
		return nil, fmt.Errorf("encode job %s: %w", j.JobName, err)
	}
	return b, nil
}

// deploymentBody is j's deployment as the body of POST .../deployments.
func deploymentBody(j gitops.Job) ([]byte, error) {
	b, err := json.Marshal(j.Deployment)
	if err != nil {
		return nil, fmt.Errorf("encode the deployment of %s: %w", j.JobName, err)
	}
	return b, nil
}
