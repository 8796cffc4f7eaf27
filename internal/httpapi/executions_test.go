package httpapi_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/job"
)

// startExecution posts a manual start and returns the response.
func (e *env) startExecution(jobPath, body string, headers ...string) response {
	e.t.Helper()
	return e.do("POST", jobPath+"/deployments/release/executions", body, headers...)
}

func TestStartRecordsASubmittedExecutionWithItsLocation(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	path := e.createJob("team-a", "my-job")
	e.deploy(path, `{"job_version":"v1","resources":{"cpu_request":0.5}}`, "X-Datajobs-User", "alice")

	r := e.startExecution(path, `{"started_by":"vdk-control-cli","args":{"day":"2026-11-30","n":3,"dry":true}}`,
		"X-Datajobs-User", "bob", "X-OPID", "op-start-1")
	require.Equal(t, http.StatusAccepted, r.status, "%s", r.body)
	var ex map[string]any
	r.json(t, &ex)
	id := ex["id"].(string)
	require.Regexp(t, `^my-job-\d{10}$`, id)
	require.Equal(t, path+"/executions/"+id, r.header.Get("Location"))
	require.Equal(t, "submitted", ex["status"])
	require.Equal(t, "manual", ex["type"])
	require.Equal(t, "vdk-control-cli/bob", ex["started_by"], "the client's label, then the caller (as VDK)")
	require.Equal(t, "op-start-1", ex["op_id"])
	dep := ex["deployment"].(map[string]any)
	require.Equal(t, "v1", dep["job_version"])
	require.InDelta(t, 0.5, dep["resources"].(map[string]any)["cpu_request"], 1e-9)

	// The same execution through GET, and in both lists.
	got := e.do("GET", r.header.Get("Location"), "")
	require.Equal(t, http.StatusOK, got.status, "%s", got.body)
	var one map[string]any
	got.json(t, &one)
	require.Equal(t, ex, one)
	for _, list := range []string{path + "/executions", path + "/deployments/release/executions"} {
		var all []map[string]any
		e.do("GET", list, "").json(t, &all)
		require.Len(t, all, 1)
		require.Equal(t, id, all[0]["id"])
	}

	// Without started_by, the caller is recorded.
	e.sql(`UPDATE data_job_execution SET status = 'succeeded', end_time = now()`)
	r = e.startExecution(path, ``, "X-Datajobs-User", "carol")
	require.Equal(t, http.StatusAccepted, r.status, "%s", r.body)
	r.json(t, &ex)
	require.Equal(t, "carol", ex["started_by"])
	require.NotEqual(t, id, ex["id"], "a second start in the same second gets another id")
}

func TestSecondStartWhileOneIsUnderWayIs409(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	path := e.createJob("team-a", "my-job")
	e.deploy(path, `{"job_version":"v1"}`)
	require.Equal(t, http.StatusAccepted, e.startExecution(path, `{}`).status)
	for _, status := range []string{"submitted", "running"} {
		e.sql(`UPDATE data_job_execution SET status = $1`, status)
		r := e.startExecution(path, `{}`)
		require.Equal(t, http.StatusConflict, r.status, "%s", r.body)
		require.Contains(t, r.vdkError(t)["what"], "already executing")
	}
	e.sql(`UPDATE data_job_execution SET status = 'user_error', end_time = now()`)
	require.Equal(t, http.StatusAccepted, e.startExecution(path, `{}`).status)
}

func TestStartOfADisabledDeploymentIsAllowed(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	path := e.createJob("team-a", "my-job")
	e.deploy(path, `{"job_version":"v1","enabled":false}`)
	r := e.startExecution(path, `{}`)
	require.Equal(t, http.StatusAccepted, r.status, "%s", r.body)
}

func TestStartRejectsBadArgsAndUnknownJobs(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	path := e.createJob("team-a", "my-job")

	r := e.startExecution(path, `{}`)
	require.Equal(t, http.StatusNotFound, r.status, "no deployment: %s", r.body)
	require.Contains(t, r.vdkError(t)["what"], "has no deployment")

	e.deploy(path, `{"job_version":"v1"}`)
	for _, body := range []string{`{"args":[1]}`, `{"args":"x"}`, `{"args":{"a":{"b":1}}}`, `{"args":{"a":null}}`, `{"args":{"a":[1]}}`, `{`} {
		r := e.startExecution(path, body)
		require.Equal(t, http.StatusBadRequest, r.status, "%s: %s", body, r.body)
		r.vdkError(t)
	}
	for _, p := range []string{"/data-jobs/for-team/team-a/jobs/no-such-job", "/data-jobs/for-team/team-b/jobs/my-job"} {
		r := e.startExecution(p, `{}`)
		require.Equal(t, http.StatusNotFound, r.status, "%s", p)
		r.vdkError(t)
	}
	var all []map[string]any
	e.do("GET", path+"/executions", "").json(t, &all)
	require.Empty(t, all, "a rejected start records nothing")
}

func TestExecutionOfAnotherJobOrTeamIsNotFound(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.createJob("team-a", "job-one")
	b := e.createJob("team-a", "job-two")
	e.deploy(a, `{"job_version":"v1"}`)
	r := e.startExecution(a, `{}`)
	require.Equal(t, http.StatusAccepted, r.status)
	id := r.header.Get("Location")[strings.LastIndex(r.header.Get("Location"), "/")+1:]

	for _, p := range []string{
		b + "/executions/" + id,
		"/data-jobs/for-team/team-b/jobs/job-one/executions/" + id,
		a + "/executions/job-one-1",
	} {
		for _, m := range []string{"GET", "DELETE"} {
			r := e.do(m, p, "")
			require.Equal(t, http.StatusNotFound, r.status, "%s %s", m, p)
			r.vdkError(t)
		}
		r := e.do("GET", p+"/logs", "")
		require.Equal(t, http.StatusNotFound, r.status, "%s logs", p)
	}
}

func TestCancelRecordsTheRequestAndAFinishedExecutionIs400(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	path := e.createJob("team-a", "my-job")
	e.deploy(path, `{"job_version":"v1"}`)
	loc := e.startExecution(path, `{}`).header.Get("Location")

	r := e.do("DELETE", loc, "", "X-Datajobs-User", "dave")
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	var ex map[string]any
	e.do("GET", loc, "").json(t, &ex)
	require.Equal(t, "submitted", ex["status"], "cancelled only once Kubernetes confirms the Job gone")
	require.Equal(t, http.StatusOK, e.do("DELETE", loc, "").status, "asking twice is fine")

	e.sql(`UPDATE data_job_execution SET status = 'cancelled', end_time = now()`)
	r = e.do("DELETE", loc, "")
	require.Equal(t, http.StatusBadRequest, r.status, "%s", r.body)
	require.Contains(t, r.vdkError(t)["why"], "cancelled")
}

func TestListFiltersByStatusAndRejectsUnknownOnes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	path := e.createJob("team-a", "my-job")
	e.deploy(path, `{"job_version":"v1"}`)
	e.sql(`INSERT INTO data_job_execution (id, job_name, type, status, op_id, start_time) VALUES
		('my-job-1', 'my-job', 'scheduled', 'succeeded', 'o1', now() - interval '3 hours'),
		('my-job-2', 'my-job', 'scheduled', 'user_error', 'o2', now() - interval '2 hours'),
		('my-job-3', 'my-job', 'manual', 'running', 'o3', now() - interval '1 hour')`)
	ids := func(q string) []string {
		r := e.do("GET", path+"/executions"+q, "")
		require.Equal(t, http.StatusOK, r.status, "%s", r.body)
		var all []map[string]any
		r.json(t, &all)
		var out []string
		for _, x := range all {
			out = append(out, x["id"].(string))
		}
		return out
	}
	require.Equal(t, []string{"my-job-3", "my-job-2", "my-job-1"}, ids(""))
	require.Equal(t, []string{"my-job-2", "my-job-1"}, ids("?execution_status=succeeded,user_error"))
	require.Equal(t, []string{"my-job-3", "my-job-1"}, ids("?execution_status=RUNNING&execution_status=succeeded"))
	r := e.do("GET", path+"/executions?execution_status=finished", "")
	require.Equal(t, http.StatusBadRequest, r.status)
	r.vdkError(t)
}

func TestLogsAreTheStoredCopyTailedByLines(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	path := e.createJob("team-a", "my-job")
	e.sql(`INSERT INTO data_job_execution (id, job_name, type, status, op_id) VALUES ('my-job-1', 'my-job', 'manual', 'succeeded', 'o')`)
	e.sql(`INSERT INTO data_job_execution (id, job_name, type, status, op_id) VALUES ('my-job-2', 'my-job', 'manual', 'running', 'o')`)
	e.sql(`INSERT INTO data_job_execution_log (execution_id, logs) VALUES ('my-job-1', E'one\ntwo\nthree\n')`)
	logs := func(p string) string {
		r := e.do("GET", p, "")
		require.Equal(t, http.StatusOK, r.status, "%s", r.body)
		var body map[string]string
		r.json(t, &body)
		return body["logs"]
	}
	require.Equal(t, "one\ntwo\nthree\n", logs(path+"/executions/my-job-1/logs"))
	require.Equal(t, "one\ntwo\nthree\n", logs(path+"/executions/my-job-1/logs?tail_lines=0"))
	require.Equal(t, "two\nthree\n", logs(path+"/executions/my-job-1/logs?tail_lines=2"))
	require.Empty(t, logs(path+"/executions/my-job-2/logs"), "no stored copy and no cluster to ask: empty")
	r := e.do("GET", path+"/executions/my-job-1/logs?tail_lines=x", "")
	require.Equal(t, http.StatusBadRequest, r.status)
}

// A start of a job whose deployment can have no CronJob yet (its image build failed, is
// still running, or its deployment failed) was accepted and failed minutes later, when the
// leader gave up waiting for the CronJob: it is a 409 at once, saying why. A deployment
// the synchronizer has merely not reached yet is accepted: the leader waits for its CronJob.
func TestStartOfADeploymentWithoutACronJobThatFailedOrIsBuildingIsA409WithItsMessage(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	path := e.createJob("team-a", "not-runnable")
	e.deploy(path, `{"job_version":"v1"}`)
	status := func(status, message string) {
		e.sql(`UPDATE desired_data_job_deployment SET status = $1, message = $2,
			status_generation = (SELECT generation FROM data_job WHERE name = 'not-runnable')`, status, message)
	}
	for _, c := range []struct{ status, message, why string }{
		{"user_error", "the image of version v1 could not be built: no wheel for tinypkg", "no wheel for tinypkg"},
		{"platform_error", "the image registry.test/x:v1 could not be looked up", "could not be looked up"},
		{"building", "building the image of version v1", "still being built"},
	} {
		status(c.status, c.message)
		r := e.startExecution(path, ``)
		require.Equal(t, http.StatusConflict, r.status, "%s: %s", c.status, r.body)
		body := r.vdkError(t)
		require.Contains(t, body["why"], c.why, c.status)
		require.Contains(t, body["what"], "not-runnable")
	}
	var list []map[string]any
	e.do("GET", path+"/executions", "").json(t, &list)
	require.Empty(t, list, "no execution recorded")

	// A status of an older generation says nothing of the current deployment.
	e.sql(`UPDATE desired_data_job_deployment SET status = 'user_error', status_generation = 0`)
	require.Equal(t, http.StatusAccepted, e.startExecution(path, ``).status)
}

// podGone is a cluster in which the execution's Job has no pod any more (the real path,
// a Job deleted by hand at once, is e2e's TestTheLogOfAnExecutionWhoseJobIsDeleted...).
type podGone struct{}

func (podGone) ExecutionLog(context.Context, job.Target, string, int) (string, bool, error) {
	return "", false, nil
}

// A Job deleted by hand the moment it finished took its pod, and the log with it, before
// the leader read it; the API answered {"logs":""} as if the run had printed nothing. A
// pending log whose pod is gone is a 410 with a VDK error body; a run that never had a
// pod still has an empty log.
func TestALogThatWasNotKeptBeforeItsPodWentIsA410NotAnEmptyLog(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(o *options) { o.logs = podGone{} })
	path := e.createJob("team-a", "my-job")
	e.sql(`INSERT INTO data_job_execution (id, job_name, type, status, op_id) VALUES ('my-job-1', 'my-job', 'manual', 'succeeded', 'o')`)
	e.sql(`INSERT INTO data_job_execution_log (execution_id, logs, pending) VALUES ('my-job-1', '', true)`)
	e.sql(`INSERT INTO data_job_execution (id, job_name, type, status, op_id) VALUES ('my-job-2', 'my-job', 'manual', 'platform_error', 'o')`)

	r := e.do("GET", path+"/executions/my-job-1/logs", "")
	require.Equal(t, http.StatusGone, r.status, "%s", r.body)
	body := r.vdkError(t)
	require.Contains(t, body["what"], `The log of execution "my-job-1" of data job "my-job" (team "team-a") was not kept.`)
	require.Contains(t, body["why"], "pod was deleted before datajobs read its log")

	r = e.do("GET", path+"/executions/my-job-2/logs", "")
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	require.JSONEq(t, `{"logs":""}`, string(r.body), "no pod ever ran: nothing was printed")
}
