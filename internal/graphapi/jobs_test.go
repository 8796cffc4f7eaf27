package graphapi_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/job"
)

// Times of the last executions of the fixture.
var (
	t1 = time.Date(2029, 12, 30, 10, 0, 0, 0, time.UTC)
	t2 = time.Date(2029, 12, 31, 10, 0, 0, 0, time.UTC)
	t3 = time.Date(2029, 12, 31, 20, 0, 0, 0, time.UTC)
)

// seed creates five jobs in every state a deployment can be in:
//
//	alpha-job  team-a   hourly        deployed, enabled, synced         succeeded at t1 in 60 s
//	beta-job   team-a   02:30 daily   deployed, disabled, pending       user_error at t2 in 120 s
//	gamma-job  team-b   no schedule   not deployed                      never ran
//	delta-job  team-b   yearly        deployment deleted, CronJob still there (deleting)
//	omega-job  team-bc  @daily        deployed, enabled, platform_error succeeded at t3 in 30 s
func seed(e *env) {
	e.createJob(jobSpec{team: "team-a", name: "alpha-job", description: "counts ALPHA things", schedule: "0 * * * *", contacts: true})
	e.createJob(jobSpec{team: "team-a", name: "beta-job", description: "beta numbers", schedule: "30 2 * * *"})
	e.createJob(jobSpec{team: "team-b", name: "gamma-job", description: "100%_off sale"})
	e.createJob(jobSpec{team: "team-b", name: "delta-job", schedule: "0 0 1 1 *", contacts: true})
	e.createJob(jobSpec{team: "team-bc", name: "omega-job", description: "the last", schedule: "@daily"})
	e.deploy("team-a", "alpha-job", `{"job_version":"v1","python_version":"3.11","vdk_version":"0.9","resources":{"cpu_request":0.5,"memory_limit":2048}}`)
	e.sync("alpha-job")
	e.deploy("team-a", "beta-job", `{"job_version":"v2","python_version":"3.9","enabled":false}`)
	e.deploy("team-b", "delta-job", `{"job_version":"v3","python_version":"3.9"}`)
	e.sync("delta-job")
	e.undeploy("team-b", "delta-job")
	e.deploy("team-bc", "omega-job", `{"job_version":"v4","python_version":"3.9"}`)
	e.fail("omega-job", job.StatusPlatformError, "quota exceeded")
	e.lastExecution("alpha-job", "succeeded", t1, 60)
	e.lastExecution("beta-job", "user_error", t2, 120)
	e.lastExecution("omega-job", "succeeded", t3, 30)
}

// vdkExampleQuery is the example of the reference, verbatim.
const vdkExampleQuery = `query($filter: [Predicate], $search: String, $pageNumber: Int, $pageSize: Int) {
  jobs(pageNumber: $pageNumber, pageSize: $pageSize, filter: $filter, search: $search) {
    content {
      jobName
      config { team description schedule { scheduleCron nextRunEpochSeconds } sourceUrl
               contacts { notifiedOnJobDeploy notifiedOnJobFailureUserError } }
      deployments {
        id enabled jobVersion jobPythonVersion vdkVersion lastDeployedBy lastDeployedDate
        resources { cpuRequest cpuLimit memoryRequest memoryLimit }
        lastExecutionStatus lastExecutionTime lastExecutionDuration successfulExecutions failedExecutions
        executions(pageNumber: 1, pageSize: 5, order: {property: "startTime", direction: DESC}) { id status startTime endTime opId }
      }
    }
    totalPages totalItems
  }
}`

func TestTheReferenceExampleQueryWorksVerbatim(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	seed(e)
	e.execution("alpha-job-1", "alpha-job", "succeeded", t1)
	e.execution("alpha-job-2", "alpha-job", "user_error", t1.Add(time.Hour))

	r := e.query(vdkExampleQuery, `{"filter":[{"property":"config.team","pattern":"team-a"},
           {"property":"deployments.enabled","pattern":"enabled","sort":"DESC"}],
 "search": null, "pageNumber": 1, "pageSize": 20}`)
	p := r.page(t)
	require.Equal(t, 1, *p.TotalPages)
	require.Equal(t, 1, *p.TotalItems)
	got, err := json.Marshal(p.Content)
	require.NoError(t, err)
	hourly := time.Date(2030, 1, 1, 1, 0, 0, 0, time.UTC).Unix()
	require.JSONEq(t, fmt.Sprintf(`[{"jobName":"alpha-job",
		"config":{"team":"team-a","description":"counts ALPHA things",
			"schedule":{"scheduleCron":"0 * * * *","nextRunEpochSeconds":%d},
			"sourceUrl":"https://git.example.com/jobs/tree/main/alpha-job",
			"contacts":{"notifiedOnJobDeploy":["deploy@example.com"],"notifiedOnJobFailureUserError":["oncall@example.com"]}},
		"deployments":[{"id":"alpha-job","enabled":true,"jobVersion":"v1","jobPythonVersion":"3.11","vdkVersion":"0.9",
			"lastDeployedBy":"unknown","lastDeployedDate":%q,
			"resources":{"cpuRequest":0.5,"cpuLimit":2,"memoryRequest":500,"memoryLimit":2048},
			"lastExecutionStatus":"SUCCEEDED","lastExecutionTime":%q,"lastExecutionDuration":60,
			"successfulExecutions":1,"failedExecutions":1,
			"executions":[
				{"id":"alpha-job-2","status":"USER_ERROR","startTime":%q,"endTime":%q,"opId":"op-alpha-job-2"},
				{"id":"alpha-job-1","status":"SUCCEEDED","startTime":%q,"endTime":%q,"opId":"op-alpha-job-1"}]}]}]`,
		hourly, p.Content[0]["deployments"].([]any)[0].(map[string]any)["lastDeployedDate"], local(t1),
		local(t1.Add(time.Hour)), local(t1.Add(time.Hour+time.Minute)), local(t1), local(t1.Add(time.Minute))),
		string(got))
}

// local formats a time as the API does (read back from the database in the local zone).
func local(t time.Time) string { return t.Local().Format(time.RFC3339Nano) }

func TestTheQueriesOfVDKListWork(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	seed(e)
	// What vdk-control-cli's `vdk list -t team-a` sends: an anonymous query with inline
	// arguments and two sorts.
	r := e.query(`{ jobs(pageNumber: 1, pageSize: 100, filter: [{ property: "config.team", pattern: "team-a", sort: ASC }, { property: "jobName", sort: ASC }]) { content { jobName config { team description schedule { scheduleCron }  }  deployments { enabled status }  }  } }`, "")
	p := r.page(t)
	got, err := json.Marshal(p.Content)
	require.NoError(t, err)
	require.JSONEq(t, `[
		{"jobName":"alpha-job","config":{"team":"team-a","description":"counts ALPHA things","schedule":{"scheduleCron":"0 * * * *"}},
		 "deployments":[{"enabled":true,"status":"SUCCESS"}]},
		{"jobName":"beta-job","config":{"team":"team-a","description":"beta numbers","schedule":{"scheduleCron":"30 2 * * *"}},
		 "deployments":[{"enabled":false,"status":"NONE"}]}]`, string(got))

	// `vdk list -a -mmm`: every team, sorted by team then name, with contacts and executions.
	r = e.query(`{ jobs(pageNumber: 1, pageSize: 100, filter: [{ property: "config.team", sort: ASC }, { property: "jobName", sort: ASC }]) { content { jobName config { team description schedule { scheduleCron }  contacts { notifiedOnJobDeploy notifiedOnJobSuccess notifiedOnJobFailurePlatformError notifiedOnJobFailureUserError }  }  deployments { enabled status jobVersion lastDeployedBy lastDeployedDate executions { id type status startTime endTime opId startedBy }  }  }  } }`, "")
	require.Equal(t, []string{"alpha-job", "beta-job", "delta-job", "gamma-job", "omega-job"}, r.names(t))
	gamma := r.page(t).Content[3]
	require.Equal(t, []any{}, gamma["deployments"], "an undeployed job has [] deployments, not null")
	require.Equal(t, map[string]any{
		"notifiedOnJobDeploy": []any{}, "notifiedOnJobSuccess": []any{},
		"notifiedOnJobFailurePlatformError": []any{}, "notifiedOnJobFailureUserError": []any{},
	},
		gamma["config"].(map[string]any)["contacts"])
}

func TestWithoutAQueryTheDefaultOneAnswers(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	seed(e)
	r := e.get("/data-jobs/for-team/team-a/jobs")
	p := r.page(t)
	require.Equal(t, 5, *p.TotalItems)
	require.Equal(t, 1, *p.TotalPages)
	require.Equal(t, map[string]any{"jobName": "alpha-job", "config": map[string]any{"team": "team-a"}}, p.Content[0])
	require.JSONEq(t, `{"data":{"content":[
		{"jobName":"alpha-job","config":{"team":"team-a"}},{"jobName":"beta-job","config":{"team":"team-a"}},
		{"jobName":"delta-job","config":{"team":"team-b"}},{"jobName":"gamma-job","config":{"team":"team-b"}},
		{"jobName":"omega-job","config":{"team":"team-bc"}}],"totalPages":1,"totalItems":5},"errors":[]}`, string(r.body))
}

func TestTheTeamOfThePathIsIgnoredAsInVDK(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	seed(e)
	q := url.Values{"query": {`{ jobs { content { jobName } } }`}}.Encode()
	for _, team := range []string{"team-a", "no-such-team"} {
		r := e.get("/data-jobs/for-team/" + team + "/jobs?" + q)
		require.Len(t, r.names(t), 5, "team %s", team)
	}
}

func TestPOSTRunsTheQueryAndStillCreatesJobs(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	seed(e)
	r := e.do("POST", "/data-jobs/for-team/team-a/jobs",
		`{"query":"query Q($n: String) { jobs(filter: [{property: \"jobName\", pattern: $n}]) { content { jobName } totalItems } }",
		  "variables":{"n":"beta*"},"operationName":"Q"}`)
	require.Equal(t, []string{"beta-job"}, r.names(t))
	// Variables as a JSON string, as in the GET form, and operation_name.
	r = e.do("POST", "/data-jobs/for-team/team-a/jobs",
		`{"query":"query Q($n: String) { jobs(filter: [{property: \"jobName\", pattern: $n}]) { content { jobName } } }",
		  "variables":"{\"n\":\"gamma*\"}","operation_name":"Q"}`)
	require.Equal(t, []string{"gamma-job"}, r.names(t))

	// A DataJob body still creates a job.
	e.createJob(jobSpec{team: "team-a", name: "posted-job"})
	r = e.get("/data-jobs/for-team/team-a/jobs/posted-job")
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
}

func TestPaging(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	seed(e)
	const q = `query($n: Int, $s: Int, $f: [Predicate]) { jobs(pageNumber: $n, pageSize: $s, filter: $f) { content { jobName } totalPages totalItems } }`
	tests := []struct {
		name        string
		vars        string
		want        []string
		pages, jobs int
	}{
		{"no page number means the first page", `{"s":2}`, []string{"alpha-job", "beta-job"}, 3, 5},
		{"a null page number means the first page", `{"n":null,"s":2}`, []string{"alpha-job", "beta-job"}, 3, 5},
		{"no page size means 20", `{"n":1}`, []string{"alpha-job", "beta-job", "delta-job", "gamma-job", "omega-job"}, 1, 5},
		{"the second page", `{"n":2,"s":2}`, []string{"delta-job", "gamma-job"}, 3, 5},
		{"the last, short page", `{"n":3,"s":2}`, []string{"omega-job"}, 3, 5},
		{"a page past the end is empty", `{"n":4,"s":2}`, []string{}, 3, 5},
		{"an exact multiple", `{"n":1,"s":5}`, []string{"alpha-job", "beta-job", "delta-job", "gamma-job", "omega-job"}, 1, 5},
		{"the maximum page size", `{"n":1,"s":1000}`, []string{"alpha-job", "beta-job", "delta-job", "gamma-job", "omega-job"}, 1, 5},
		{"no match has 0 pages (VDK says 1)", `{"n":1,"s":2,"f":[{"property":"jobName","pattern":"nothing"}]}`, []string{}, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := e.query(q, tt.vars)
			require.Equal(t, tt.want, r.names(t))
			p := r.page(t)
			require.Equal(t, tt.pages, *p.TotalPages)
			require.Equal(t, tt.jobs, *p.TotalItems)
		})
	}

	for _, tt := range []struct{ name, vars, message string }{
		{"page 0", `{"n":0}`, "Parameter pageNumber is not valid. It must be at least 1, but was 0."},
		{"a negative page", `{"n":-3}`, "Parameter pageNumber is not valid. It must be at least 1, but was -3."},
		{"page size 0", `{"s":0}`, "Parameter pageSize is not valid. It must be between 1 and 1000, but was 0."},
		{"a page size over the maximum", `{"s":1001}`, "Parameter pageSize is not valid. It must be between 1 and 1000, but was 1001."},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := e.query(q, tt.vars)
			require.Equal(t, tt.message, r.errorMessage(t, http.StatusBadRequest))
			require.Equal(t, []any{"jobs"}, r.Errors[0].Path)
		})
	}
}

func TestTheMaximumPageSizeIsConfigurable(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(o *options) { o.cfg.MaxPageSize = 3 })
	seed(e)
	r := e.query(`{ jobs(pageSize: 4) { content { jobName } } }`, "")
	require.Contains(t, r.errorMessage(t, http.StatusBadRequest), "between 1 and 3")
	require.Len(t, e.query(`{ jobs(pageSize: 3) { content { jobName } } }`, "").names(t), 3)
}

// filterQuery selects names only, so that filters on other fields prove they need not be
// selected.
const filterQuery = `query($f: [Predicate], $s: String) { jobs(pageSize: 100, filter: $f, search: $s) { content { jobName } totalItems } }`

func predicates(kv ...string) string {
	var ps []map[string]string
	for i := 0; i+1 < len(kv); i += 2 {
		ps = append(ps, map[string]string{"property": kv[i], "pattern": kv[i+1]})
	}
	b, _ := json.Marshal(map[string]any{"f": ps})
	return string(b)
}

func TestFiltersMatchAsVDKDocumentsThem(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	seed(e)
	epoch := func(t time.Time) string { return strconv.FormatInt(t.Unix(), 10) }
	at := func(h, m int) time.Time { return time.Date(2030, 1, 1, h, m, 0, 0, time.UTC) }
	tests := []struct {
		name string
		kv   []string
		want []string
	}{
		{"a job name matches whole", []string{"jobName", "alpha"}, []string{}},
		{"a job name ignores case", []string{"jobName", "ALPHA-Job"}, []string{"alpha-job"}},
		{"* in a job name is any characters", []string{"jobName", "*ta-job"}, []string{"beta-job", "delta-job"}},
		{"a job name prefix", []string{"jobName", "a*"}, []string{"alpha-job"}},
		{"_ and % in a job name are literal", []string{"jobName", "alpha_job"}, []string{}},
		{"% alone matches no job name", []string{"jobName", "%"}, []string{}},
		{"a team matches whole, not as a prefix", []string{"config.team", "team-b"}, []string{"delta-job", "gamma-job"}},
		{"a team is trimmed and ignores case", []string{"config.team", " TEAM-A "}, []string{"alpha-job", "beta-job"}},
		{"% in a team is any characters", []string{"config.team", "team-b%"}, []string{"delta-job", "gamma-job", "omega-job"}},
		{"a team suffix", []string{"config.team", "%-a"}, []string{"alpha-job", "beta-job"}},
		{"a description contains, ignoring case", []string{"config.description", "Alpha"}, []string{"alpha-job"}},
		{"% and _ in a description are literal", []string{"config.description", "0%_o"}, []string{"gamma-job"}},
		{"enabled deployments, one being deleted included", []string{"deployments.enabled", "enabled"}, []string{"alpha-job", "delta-job", "omega-job"}},
		{"disabled deployments", []string{"deployments.enabled", "DISABLED"}, []string{"beta-job"}},
		{"jobs without a deployment", []string{"deployments.enabled", "not_deployed"}, []string{"gamma-job"}},
		{"a sync status", []string{"deployments.syncStatus", "synced"}, []string{"alpha-job"}},
		{"a sync status ignores case", []string{"deployments.syncStatus", "PENDING"}, []string{"beta-job"}},
		{"a deployment being deleted", []string{"deployments.syncStatus", "deleting"}, []string{"delta-job"}},
		{"a python version contains", []string{"deployments.jobPythonVersion", "3.9"}, []string{"beta-job", "delta-job", "omega-job"}},
		{"a last execution status", []string{"deployments.lastExecutionStatus", "SUCCEEDED"}, []string{"alpha-job", "omega-job"}},
		{"a last execution status in lower case", []string{"deployments.lastExecutionStatus", "user_error"}, []string{"beta-job"}},
		{"a last execution time range, inclusive", []string{"deployments.lastExecutionTime", epoch(t1) + "-" + epoch(t2)}, []string{"alpha-job", "beta-job"}},
		{"a time range past the year 9999", []string{"deployments.lastExecutionTime", "0-99999999999999"}, []string{"alpha-job", "beta-job", "omega-job"}},
		{"a next run range", []string{"config.schedule.nextRunEpochSeconds", epoch(at(1, 0)) + "-" + epoch(at(2, 30))}, []string{"alpha-job", "beta-job"}},
		{"a next run range that only a yearly job reaches", []string{"config.schedule.nextRunEpochSeconds", epoch(at(3, 0)) + "-4102444800"}, []string{"delta-job", "omega-job"}},
		{"a schedule contains", []string{"config.schedule.scheduleCron", "* *"}, []string{"alpha-job", "beta-job"}},
		{"a source URL contains", []string{"config.sourceUrl", "main/omega"}, []string{"omega-job"}},
		{"filters combine", []string{"config.team", "team-%", "deployments.enabled", "enabled", "deployments.jobPythonVersion", "3.9"}, []string{"delta-job", "omega-job"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := e.query(filterQuery, predicates(tt.kv...))
			require.Equal(t, tt.want, r.names(t))
			require.Equal(t, len(tt.want), *r.page(t).TotalItems)
		})
	}
}

func TestSearchLooksInTheSelectedFields(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	seed(e)
	tests := []struct {
		name, selection, search string
		want                    []string
	}{
		{"the name", `jobName`, "ALPHA", []string{"alpha-job"}},
		{"a description that is not selected", `jobName`, "numbers", []string{}},
		{"a selected description", `jobName config { description }`, "numbers", []string{"beta-job"}},
		{"a selected team", `jobName config { team }`, "bc", []string{"omega-job"}},
		{"a selected schedule", `jobName config { schedule { scheduleCron } }`, "@dai", []string{"omega-job"}},
		{"a selected python version", `jobName deployments { jobPythonVersion }`, "3.11", []string{"alpha-job"}},
		{"any of the selected fields", `jobName config { team description }`, "a", []string{"alpha-job", "beta-job", "delta-job", "gamma-job", "omega-job"}},
		{"% is literal", `jobName config { description }`, "%", []string{"gamma-job"}},
		{"an empty search is none", `jobName`, "", []string{"alpha-job", "beta-job", "delta-job", "gamma-job", "omega-job"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			vars, _ := json.Marshal(map[string]string{"s": tt.search})
			r := e.query(`query($s: String) { jobs(search: $s) { content { `+tt.selection+` } } }`, string(vars))
			require.Equal(t, tt.want, r.names(t))
		})
	}
}

func TestSortsPutMissingValuesLast(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	seed(e)
	tests := []struct {
		name  string
		sorts [][2]string // property, direction
		want  []string
	}{
		{"by name by default", nil, []string{"alpha-job", "beta-job", "delta-job", "gamma-job", "omega-job"}},
		{"by name, descending", [][2]string{{"jobName", "DESC"}}, []string{"omega-job", "gamma-job", "delta-job", "beta-job", "alpha-job"}},
		{"by team, then name", [][2]string{{"config.team", "ASC"}}, []string{"alpha-job", "beta-job", "delta-job", "gamma-job", "omega-job"}},
		{"by team descending, then name descending", [][2]string{{"config.team", "DESC"}, {"jobName", "DESC"}}, []string{"omega-job", "gamma-job", "delta-job", "beta-job", "alpha-job"}},
		{"by description", [][2]string{{"config.description", "ASC"}}, []string{"delta-job", "gamma-job", "beta-job", "alpha-job", "omega-job"}},
		{"enabled first, then disabled, then not deployed", [][2]string{{"deployments.enabled", "DESC"}}, []string{"alpha-job", "delta-job", "omega-job", "beta-job", "gamma-job"}},
		{"disabled first, not deployed still last", [][2]string{{"deployments.enabled", "ASC"}}, []string{"beta-job", "alpha-job", "delta-job", "omega-job", "gamma-job"}},
		{"by python version, as text", [][2]string{{"deployments.jobPythonVersion", "DESC"}}, []string{"beta-job", "delta-job", "omega-job", "alpha-job", "gamma-job"}},
		{"most recent execution first, never run last", [][2]string{{"deployments.lastExecutionTime", "DESC"}}, []string{"omega-job", "beta-job", "alpha-job", "delta-job", "gamma-job"}},
		{"oldest execution first, never run last", [][2]string{{"deployments.lastExecutionTime", "ASC"}}, []string{"alpha-job", "beta-job", "omega-job", "delta-job", "gamma-job"}},
		{"by last execution status", [][2]string{{"deployments.lastExecutionStatus", "ASC"}}, []string{"alpha-job", "omega-job", "beta-job", "delta-job", "gamma-job"}},
		{"by last execution duration", [][2]string{{"deployments.lastExecutionDuration", "ASC"}}, []string{"omega-job", "alpha-job", "beta-job", "delta-job", "gamma-job"}},
		{"soonest next run first, never last", [][2]string{{"config.schedule.nextRunEpochSeconds", "ASC"}}, []string{"alpha-job", "beta-job", "omega-job", "delta-job", "gamma-job"}},
		{"latest next run first, never last", [][2]string{{"config.schedule.nextRunEpochSeconds", "DESC"}}, []string{"delta-job", "omega-job", "beta-job", "alpha-job", "gamma-job"}},
		{"with contacts first", [][2]string{{"config.contacts.present", "DESC"}}, []string{"alpha-job", "delta-job", "beta-job", "gamma-job", "omega-job"}},
		{"by schedule", [][2]string{{"config.schedule.scheduleCron", "DESC"}}, []string{"omega-job", "beta-job", "delta-job", "alpha-job", "gamma-job"}},
		{"by source URL", [][2]string{{"config.sourceUrl", "DESC"}}, []string{"omega-job", "gamma-job", "delta-job", "beta-job", "alpha-job"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var ps []map[string]string
			for _, s := range tt.sorts {
				ps = append(ps, map[string]string{"property": s[0], "sort": s[1]})
			}
			vars, _ := json.Marshal(map[string]any{"f": ps})
			r := e.query(filterQuery, string(vars))
			require.Equal(t, tt.want, r.names(t))
		})
	}
	// A sort pages: the second page of the most recent executions.
	r := e.query(`{ jobs(pageNumber: 2, pageSize: 2, filter: [{property: "deployments.lastExecutionTime", sort: DESC}]) { content { jobName } } }`, "")
	require.Equal(t, []string{"alpha-job", "delta-job"}, r.names(t))
}

func TestBadFiltersAnswer400WithAClearMessage(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tests := []struct{ name, filter, message string }{
		{"an unknown property", `[{property: "config.nothing", pattern: "x"}]`, `Parameter filter property is not valid. It must be one of config.contacts.present, config.description, config.schedule.nextRunEpochSeconds, config.schedule.scheduleCron, config.sourceUrl, config.team, deployments.enabled, deployments.jobPythonVersion, deployments.lastExecutionDuration, deployments.lastExecutionStatus, deployments.lastExecutionTime, deployments.syncStatus, jobName, but was "config.nothing".`},
		{"no property", `[{pattern: "x"}]`, `Parameter filter property is not valid.`},
		{"a property twice", `[{property: "jobName", pattern: "a*"}, {property: "jobName", sort: ASC}]`, `Parameter filter is not valid. It must be a list naming each property at most once, but was jobName twice.`},
		{"neither pattern nor sort", `[{property: "jobName"}]`, `Parameter filter of jobName is not valid. It must be a pattern, a sort or both, but was neither.`},
		{"a pattern on a sort-only property", `[{property: "config.contacts.present", pattern: "true"}]`, `Parameter filter of config.contacts.present is not valid. It must be a sort only (the property cannot be matched), but was a pattern "true".`},
		{"an unknown deployment state", `[{property: "deployments.enabled", pattern: "on"}]`, `Parameter filter pattern of deployments.enabled is not valid. It must be enabled, disabled or not_deployed, but was "on".`},
		{"an unknown execution status", `[{property: "deployments.lastExecutionStatus", pattern: "FINISHED"}]`, `Parameter filter pattern of deployments.lastExecutionStatus is not valid. It must be one of SUBMITTED, RUNNING, SUCCEEDED, CANCELLED, SKIPPED, USER_ERROR, PLATFORM_ERROR, but was "FINISHED".`},
		{"an unknown sync status", `[{property: "deployments.syncStatus", pattern: "ok"}]`, `Parameter filter pattern of deployments.syncStatus is not valid. It must be one of synced, pending, building, user_error, platform_error, deleting, but was "ok".`},
		{"a range that is not one", `[{property: "deployments.lastExecutionTime", pattern: "yesterday"}]`, `Parameter filter pattern of deployments.lastExecutionTime is not valid. It must be a range of epoch seconds "<from>-<to>" with from <= to, but was "yesterday".`},
		{"a reversed range", `[{property: "config.schedule.nextRunEpochSeconds", pattern: "20-10"}]`, `Parameter filter pattern of config.schedule.nextRunEpochSeconds is not valid.`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := e.query(`{ jobs(filter: `+tt.filter+`) { content { jobName } } }`, "")
			require.Contains(t, r.errorMessage(t, http.StatusBadRequest), tt.message)
		})
	}
}

func TestGraphQLErrorsAnswer400InTheEnvelope(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tests := []struct {
		name, query, vars, message string
	}{
		{"a syntax error", `{ jobs(pageSize: ) { content { jobName } } }`, "", "Unexpected )"},
		{"an unknown field", `{ jobs { content { jobName owner } } }`, "", `Cannot query field "owner" on type "DataJob".`},
		{"a variable of the wrong type", `query($n: Int) { jobs(pageNumber: $n) { content { jobName } } }`, `{"n":"one"}`, "cannot use string as Int"},
		{"variables that are not JSON", `{ jobs { content { jobName } } }`, `{"n":`, "variables must be a JSON object"},
		{"variables that are not an object", `{ jobs { content { jobName } } }`, `[1]`, "variables must be a JSON object"},
		{"a mutation", `mutation { deleteJob }`, "", `Schema does not support operation type "mutation"`},
		{"an unknown operation", `query A { jobs { content { jobName } } }`, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := url.Values{"query": {tt.query}, "variables": {tt.vars}}
			if tt.name == "an unknown operation" {
				p.Set("operation_name", "B")
			}
			r := e.get("/data-jobs/for-team/team-a/jobs?" + p.Encode())
			require.Contains(t, r.errorMessage(t, http.StatusBadRequest), tt.message)
		})
	}
	r := e.query(`{ jobs { content { jobName owner } } }`, "")
	require.NotEmpty(t, r.Errors[0].Locations, "a validation error says where")
}

func TestADatabaseThatIsDownAnswers503InTheEnvelope(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(o *options) { o.storeURL = "postgres://postgres@127.0.0.1:1/none?connect_timeout=2" })
	r := e.query(`{ jobs { content { jobName } } }`, "")
	require.Equal(t, "The database is not reachable. datajobs could not reach a service it depends on.", r.errorMessage(t, http.StatusServiceUnavailable))
}
