package graphapi_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// seedExecutions adds executions to the fixture of seed:
//
//	alpha-job-1  succeeded       t1
//	alpha-job-2  user_error      t1+1h
//	beta-job-1   platform_error  t2
//	omega-job-1  running         t3
func seedExecutions(e *env) {
	e.execution("alpha-job-1", "alpha-job", "succeeded", t1)
	e.execution("alpha-job-2", "alpha-job", "user_error", t1.Add(time.Hour))
	e.execution("beta-job-1", "beta-job", "platform_error", t2)
	e.execution("omega-job-1", "omega-job", "running", t3)
}

func executionIDs(t *testing.T, r response) []string {
	t.Helper()
	return r.values(t, "id")
}

func TestTheExecutionsQuery(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	seed(e)
	seedExecutions(e)
	const q = `query($n: Int, $s: Int, $f: DataJobExecutionFilter, $o: DataJobExecutionOrder) {
		executions(pageNumber: $n, pageSize: $s, filter: $f, order: $o) { content { id } totalPages totalItems } }`
	ts := func(t time.Time) string { return t.Format(time.RFC3339) }
	tests := []struct {
		name string
		vars map[string]any
		want []string
	}{
		{"newest first by default", nil, []string{"omega-job-1", "beta-job-1", "alpha-job-2", "alpha-job-1"}},
		{"by status", map[string]any{"f": map[string]any{"statusIn": []string{"SUCCEEDED", "RUNNING"}}}, []string{"omega-job-1", "alpha-job-1"}},
		{"by job", map[string]any{"f": map[string]any{"jobNameIn": []string{"alpha-job"}}}, []string{"alpha-job-2", "alpha-job-1"}},
		{"by team", map[string]any{"f": map[string]any{"teamNameIn": []string{"team-a"}}}, []string{"beta-job-1", "alpha-job-2", "alpha-job-1"}},
		{"started since", map[string]any{"f": map[string]any{"startTimeGte": ts(t2)}}, []string{"omega-job-1", "beta-job-1"}},
		{"started until", map[string]any{"f": map[string]any{"startTimeLte": ts(t1.Add(time.Hour))}}, []string{"alpha-job-2", "alpha-job-1"}},
		{"ended within", map[string]any{"f": map[string]any{"endTimeGte": ts(t1.Add(30 * time.Second)), "endTimeLte": ts(t2)}}, []string{"alpha-job-2", "alpha-job-1"}},
		{"ordered by id", map[string]any{"o": map[string]any{"property": "id", "direction": "ASC"}}, []string{"alpha-job-1", "alpha-job-2", "beta-job-1", "omega-job-1"}},
		{"ordered by team, then id", map[string]any{"o": map[string]any{"property": "jobTeam", "direction": "DESC"}}, []string{"omega-job-1", "beta-job-1", "alpha-job-2", "alpha-job-1"}},
		{"ordered by status", map[string]any{"o": map[string]any{"property": "status"}}, []string{"beta-job-1", "omega-job-1", "alpha-job-1", "alpha-job-2"}},
		{"a page", map[string]any{"n": 2, "s": 3}, []string{"alpha-job-1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			vars, _ := json.Marshal(tt.vars)
			r := e.query(q, string(vars))
			require.Equal(t, tt.want, executionIDs(t, r))
		})
	}
	r := e.query(q, `{"n":1,"s":3}`)
	p := r.page(t)
	require.Equal(t, 2, *p.TotalPages)
	require.Equal(t, 4, *p.TotalItems)

	for _, tt := range []struct{ name, vars, message string }{
		{"a page number without a size", `{"n":1}`, "Parameter pageNumber and pageSize is not valid. It must be given together or not at all"},
		{"an unknown order", `{"o":{"property":"owner"}}`, `Parameter order.property is not valid.`},
		{"a status that is not one", `{"f":{"statusIn":["FINISHED"]}}`, `FINISHED is not a valid DataJobExecutionStatus`},
		{"a time that is not one", `{"f":{"startTimeGte":"yesterday"}}`, `RFC 3339`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Contains(t, e.query(q, tt.vars).errorMessage(t, http.StatusBadRequest), tt.message)
		})
	}
}

func TestAnExecutionShowsEveryField(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	seed(e)
	e.execution("alpha-job-1", "alpha-job", "succeeded", t1)
	r := e.query(`{ executions { content { id type jobName status startTime endTime startedBy message opId logsUrl
		jobVersion jobSchedule jobPythonVersion vdkVersion vkdVersion resourcesCpuRequest resourcesCpuLimit
		resourcesMemoryRequest resourcesMemoryLimit deployedDate deployedBy
		deployment { id mode enabled jobVersion jobPythonVersion vdkVersion schedule { scheduleCron nextRunEpochSeconds }
			resources { cpuRequest memoryLimit } deployedDate deployedBy } } } }`, "")
	got, err := json.Marshal(r.page(t).Content)
	require.NoError(t, err)
	require.JSONEq(t, `[{"id":"alpha-job-1","type":"SCHEDULED","jobName":"alpha-job","status":"SUCCEEDED",
		"startTime":"`+local(t1)+`","endTime":"`+local(t1.Add(time.Minute))+`","startedBy":"scheduler","message":"m",
		"opId":"op-alpha-job-1","logsUrl":"https://logs.example.com//alpha-job?execution=alpha-job-1",
		"jobVersion":"v1","jobSchedule":"0 * * * *","jobPythonVersion":"3.11","vdkVersion":"0.1","vkdVersion":"0.1",
		"resourcesCpuRequest":0.5,"resourcesCpuLimit":null,"resourcesMemoryRequest":null,"resourcesMemoryLimit":1024,
		"deployedDate":"`+local(t1.Add(-24*time.Hour))+`","deployedBy":"deployer",
		"deployment":{"id":"release","mode":"release","enabled":true,"jobVersion":"v1","jobPythonVersion":"3.11","vdkVersion":"0.1",
			"schedule":{"scheduleCron":"0 * * * *","nextRunEpochSeconds":`+jsonInt(time.Date(2030, 1, 1, 1, 0, 0, 0, time.UTC).Unix())+`},
			"resources":{"cpuRequest":0.5,"memoryLimit":1024},"deployedDate":"`+local(t1.Add(-24*time.Hour))+`","deployedBy":"deployer"}}]`,
		string(got))
}

func jsonInt(v int64) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func TestTheExecutionsOfADeployment(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	seed(e)
	seedExecutions(e)
	r := e.query(`{ jobs(filter: [{property: "deployments.enabled", pattern: "enabled"}]) { content { jobName deployments {
		successfulExecutions failedExecutions
		all: executions { id }
		first: executions(pageNumber: 1, pageSize: 1, order: {property: "startTime", direction: ASC}) { id }
		second: executions(pageNumber: 2, pageSize: 1) { id }
		failed: executions(filter: {statusIn: [USER_ERROR, PLATFORM_ERROR]}) { id } } } } }`, "")
	got, err := json.Marshal(r.page(t).Content)
	require.NoError(t, err)
	require.JSONEq(t, `[
		{"jobName":"alpha-job","deployments":[{"successfulExecutions":1,"failedExecutions":1,
			"all":[{"id":"alpha-job-2"},{"id":"alpha-job-1"}],"first":[{"id":"alpha-job-1"}],"second":[{"id":"alpha-job-1"}],"failed":[{"id":"alpha-job-2"}]}]},
		{"jobName":"delta-job","deployments":[{"successfulExecutions":0,"failedExecutions":0,"all":[],"first":[],"second":[],"failed":[]}]},
		{"jobName":"omega-job","deployments":[{"successfulExecutions":0,"failedExecutions":0,
			"all":[{"id":"omega-job-1"}],"first":[{"id":"omega-job-1"}],"second":[],"failed":[]}]}]`, string(got))

	r = e.query(`{ jobs { content { deployments { executions(filter: {jobNameIn: ["x"]}) { id } } } } }`, "")
	require.Contains(t, r.errorMessage(t, http.StatusBadRequest), "Parameter filter.jobNameIn is not valid.")
}

func TestTheRESTListOfExecutions(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	seed(e)
	seedExecutions(e)
	ids := func(r response) []string {
		t.Helper()
		require.Equal(t, http.StatusOK, r.status, "%s", r.body)
		var execs []map[string]any
		require.NoError(t, json.Unmarshal(r.body, &execs))
		out := []string{}
		for _, x := range execs {
			out = append(out, x["id"].(string))
		}
		return out
	}
	const alpha = "/data-jobs/for-team/team-a/jobs/alpha-job"
	require.Equal(t, []string{"alpha-job-2", "alpha-job-1"}, ids(e.get(alpha+"/executions")))
	require.Equal(t, []string{"alpha-job-2", "alpha-job-1"}, ids(e.get(alpha+"/deployments/release/executions")))
	require.Equal(t, []string{"alpha-job-1"}, ids(e.get(alpha+"/executions?execution_status=succeeded")))
	require.Equal(t, []string{"alpha-job-2", "alpha-job-1"}, ids(e.get(alpha+"/executions?execution_status=succeeded&execution_status=USER_ERROR")))
	require.Equal(t, []string{"alpha-job-2", "alpha-job-1"}, ids(e.get(alpha+"/executions?execution_status=succeeded,user_error")))
	require.Equal(t, []string{}, ids(e.get(alpha+"/executions?execution_status=running")))
	require.Equal(t, []string{}, ids(e.get("/data-jobs/for-team/team-b/jobs/gamma-job/executions")))

	r := e.get(alpha + "/executions")
	var execs []map[string]any
	require.NoError(t, json.Unmarshal(r.body, &execs))
	require.JSONEq(t, `{"id":"alpha-job-1","job_name":"alpha-job","status":"succeeded","type":"scheduled",
		"start_time":"`+local(t1)+`","end_time":"`+local(t1.Add(time.Minute))+`","started_by":"scheduler","logs_url":null,
		"message":"m","op_id":"op-alpha-job-1","args":null,"exit_code":null,"termination_reason":"","logical_time":null,"backfill_id":null,"rerun_of":null,
		"deployment":{"id":"release","mode":"release","enabled":true,"vdk_version":"0.1","job_version":"v1","python_version":"3.11",
			"schedule":{"schedule_cron":"0 * * * *"},"resources":{"cpu_request":0.5,"cpu_limit":0,"memory_request":0,"memory_limit":1024},
			"deployed_by":"deployer","deployed_date":"`+local(t1.Add(-24*time.Hour))+`"}}`, mustJSON(t, execs[1]))

	r = e.get(alpha + "/executions?execution_status=finished")
	require.Equal(t, http.StatusBadRequest, r.status, "%s", r.body)
	require.Contains(t, string(r.body), `"what":"Parameter execution_status is not valid."`)

	for _, p := range []string{"/data-jobs/for-team/team-b/jobs/alpha-job/executions", "/data-jobs/for-team/team-a/jobs/no-such-job/executions"} {
		r = e.get(p)
		require.Equal(t, http.StatusNotFound, r.status, "%s: %s", p, r.body)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}
