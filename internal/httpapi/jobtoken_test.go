package httpapi_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/auth"
	"github.com/datajobs/datajobs/internal/job"
)

// jobTokens stands in for internal/jobidentity (whose tokens need a running pod, see
// internal/server's all-routes test): "Bearer job:TEAM/NAME@UID" is the running job NAME
// of TEAM, its pod made for the job incarnation UID, as the verifier would answer for its
// pod's token.
type jobTokens struct{}

func (jobTokens) Owns(r *http.Request) bool {
	return strings.HasPrefix(r.Header.Get("Authorization"), "Bearer job:")
}

func (jobTokens) Authenticate(r *http.Request) (auth.Identity, error) {
	who := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	who, uid, _ := strings.Cut(who, "@")
	team, name, ok := strings.Cut(strings.TrimPrefix(who, "job:"), "/")
	if !ok {
		return auth.Identity{}, job.Unauthenticated("a job token that names no job")
	}
	return auth.Identity{Username: who, Verified: true, Job: &auth.JobCaller{Team: team, Name: name, UID: uid, Pod: name + "-pod"}}, nil
}

// jobToken is the header of the token of a pod of the job name of team as it is now.
func (e *env) jobToken(team, name string) []string {
	e.t.Helper()
	j, err := e.store.GetJob(e.t.Context(), team, name)
	require.NoError(e.t, err)
	return []string{"Authorization", "Bearer job:" + team + "/" + name + "@" + j.UID}
}

// TestADAGJobsTokenStartsAndReadsTheExecutionsOfItsTeamsJobsOnly is what vdk-dag does from
// a DAG job's pod (docs/compatibility.md): list a job's executions, start one, read it. With
// JobTokenTeamExecutions the token of team-a's DAG job may do exactly that on team-a's jobs,
// and nothing more: not on team-b's jobs, not cancel, not logs, not a job's definition.
// Without it (the default) the token reaches its own properties and secrets only.
func TestADAGJobsTokenStartsAndReadsTheExecutionsOfItsTeamsJobsOnly(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(o *options) { o.api.Jobs, o.api.JobTokenTeamExecutions = jobTokens{}, true })
	off := newEnv(t, func(o *options) { o.api.Jobs = jobTokens{} })
	for _, env := range []*env{e, off} {
		env.createJob("team-a", "the-dag")
		env.deploy(env.createJob("team-a", "extract"), `{"job_version":"v1"}`)
		env.deploy(env.createJob("team-b", "of-team-b"), `{"job_version":"v1"}`)
	}
	extract := "/data-jobs/for-team/team-a/jobs/extract"
	dag, offDag := e.jobToken("team-a", "the-dag"), off.jobToken("team-a", "the-dag")

	// vdk-dag's three requests (remote_data_job.py): the list, the start, the read.
	r := e.do("GET", extract+"/executions", "", dag...)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	r = e.startExecution(extract, `{"started_by":"manual/the-dag","args":{"day":"2026-12-01"}}`, dag...)
	require.Equal(t, http.StatusAccepted, r.status, "%s", r.body)
	var started map[string]any
	r.json(t, &started)
	assert.Equal(t, "manual/the-dag/job:team-a/the-dag", started["started_by"], "the DAG's label, then the job that started it")
	id, _ := started["id"].(string)
	r = e.do("GET", extract+"/executions/"+id, "", dag...)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)

	refused := []struct{ method, path, body string }{
		{"GET", "/data-jobs/for-team/team-b/jobs/of-team-b/executions", ""},
		{"POST", "/data-jobs/for-team/team-b/jobs/of-team-b/deployments/release/executions", `{}`},
		{"GET", "/data-jobs/for-team/team-b/jobs/of-team-b/executions/" + id, ""},
		{"DELETE", extract + "/executions/" + id, ""},
		{"GET", extract + "/executions/" + id + "/logs", ""},
		{"GET", extract + "/deployments/release/executions", ""},
		{"GET", extract, ""},
		{"GET", extract + "/deployments/release/properties", ""},
		{"POST", extract + "/deployments", `{"job_version":"v2"}`},
	}
	for _, c := range refused {
		r := e.do(c.method, c.path, c.body, dag...)
		assert.Equal(t, http.StatusForbidden, r.status, "%s %s: %s", c.method, c.path, r.body)
	}
	assert.Equal(t, 1, e.count(`SELECT count(*) FROM data_job_execution`), "the one start above, nothing else")

	// Off: the same requests are refused, and say what a job's token may do.
	for _, c := range []struct{ method, path, body string }{
		{"GET", extract + "/executions", ""},
		{"POST", extract + "/deployments/release/executions", `{}`},
	} {
		r := off.do(c.method, c.path, c.body, offDag...)
		require.Equal(t, http.StatusForbidden, r.status, "%s %s: %s", c.method, c.path, r.body)
		assert.Contains(t, r.vdkError(t)["why"], "its own deployment's properties and secrets")
	}
	assert.Equal(t, 0, off.count(`SELECT count(*) FROM data_job_execution`))
}

// Issue 41, L3: a job token was its job by team and name: the pod of a job deleted and
// created again under its name, still running, read the new job's secrets. The token of
// a pod made for a previous incarnation is refused (403); the new job's pods read them.
func TestATokenOfAPreviousJobOfTheNameReachesNothingOfTheNewOne(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(o *options) { o.api.Jobs = jobTokens{} })
	path := e.createJob("team-a", "reborn")
	old := e.jobToken("team-a", "reborn")
	e.putSecrets(path, `{"k":"of-the-first"}`)
	r := e.do("GET", path+"/deployments/release/secrets", "", old...)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)

	r = e.do("DELETE", path, "")
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	e.createJob("team-a", "reborn")
	e.putSecrets(path, `{"k":"of-the-second"}`)
	r = e.do("GET", path+"/deployments/release/secrets", "", old...)
	require.Equal(t, http.StatusForbidden, r.status, "%s", r.body)
	assert.NotContains(t, string(r.body), "of-the-second")
	assert.Contains(t, r.vdkError(t)["why"], "previous data job named reborn")
	r = e.do("GET", path+"/deployments/release/secrets", "", e.jobToken("team-a", "reborn")...)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
}
