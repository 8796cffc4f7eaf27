package graphapi_test

// The deployments, pages and shape of the jobs query's answers (jobs_test.go has the
// queries VDK sends, filters and sorts).

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestDeploymentsShowTheirSyncState(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	seed(e)
	r := e.query(`{ jobs(filter: [{property: "jobName", sort: ASC}]) { content { jobName deployments {
		id mode enabled jobVersion jobPythonVersion status syncStatus message desiredGeneration appliedGeneration lastSyncTime
		schedule { scheduleCron nextRunEpochSeconds } resources { cpuRequest cpuLimit memoryRequest memoryLimit empheralStorageLimit }
		contacts { notifiedOnJobDeploy } } } } }`, "")
	byName := map[string]map[string]any{}
	for _, j := range r.page(t).Content {
		deps := j["deployments"].([]any)
		if len(deps) == 0 {
			byName[j["jobName"].(string)] = nil
			continue
		}
		require.Len(t, deps, 1)
		byName[j["jobName"].(string)] = deps[0].(map[string]any)
	}
	require.Nil(t, byName["gamma-job"])

	alpha := byName["alpha-job"]
	require.Equal(t, "SUCCESS", alpha["status"])
	require.Equal(t, "synced", alpha["syncStatus"])
	require.Equal(t, alpha["desiredGeneration"], alpha["appliedGeneration"])
	require.NotNil(t, alpha["lastSyncTime"])
	require.Equal(t, "release", alpha["mode"])
	require.Equal(t, "alpha-job", alpha["id"])
	require.Equal(t, map[string]any{"cpuRequest": 0.5, "cpuLimit": 2.0, "memoryRequest": 500.0, "memoryLimit": 2048.0, "empheralStorageLimit": nil}, alpha["resources"])
	require.Equal(t, map[string]any{"notifiedOnJobDeploy": []any{"deploy@example.com"}}, alpha["contacts"])
	require.Equal(t, map[string]any{"scheduleCron": "0 * * * *", "nextRunEpochSeconds": float64(time.Date(2030, 1, 1, 1, 0, 0, 0, time.UTC).Unix())}, alpha["schedule"])

	beta := byName["beta-job"]
	require.Equal(t, "NONE", beta["status"])
	require.Equal(t, "pending", beta["syncStatus"])
	require.Equal(t, false, beta["enabled"])
	require.Zero(t, beta["appliedGeneration"])
	require.Nil(t, beta["lastSyncTime"])

	delta := byName["delta-job"]
	require.Equal(t, "deleting", delta["syncStatus"])
	require.Equal(t, "NONE", delta["status"])
	require.Equal(t, "v3", delta["jobVersion"])

	omega := byName["omega-job"]
	require.Equal(t, "PLATFORM_ERROR: quota exceeded", omega["status"], "VDK's status with the why: vdk list prints this field")
	require.Equal(t, "platform_error", omega["syncStatus"])
	require.Equal(t, "quota exceeded", omega["message"])
	require.Equal(t, map[string]any{"scheduleCron": "@daily", "nextRunEpochSeconds": float64(time.Date(2030, 1, 2, 0, 0, 0, 0, time.UTC).Unix())}, omega["schedule"])
}

func TestNextRunIsMinusOneForAScheduleThatNeverFires(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.createJob(jobSpec{team: "team-a", name: "no-schedule"})
	e.createJob(jobSpec{team: "team-a", name: "never-fires", schedule: "0 0 30 2 *"})
	r := e.query(`{ jobs { content { jobName config { schedule { nextRunEpochSeconds } } } } }`, "")
	for _, j := range r.page(t).Content {
		require.Equal(t, map[string]any{"nextRunEpochSeconds": -1.0}, j["config"].(map[string]any)["schedule"], "%v", j["jobName"])
	}
}

// pageWithDeployments is what the VDK UI asks for: a page with everything.
const pageWithDeployments = `{ jobs(pageNumber: 1, pageSize: 50) { content { jobName
	config { team description schedule { scheduleCron nextRunEpochSeconds } contacts { notifiedOnJobDeploy } }
	deployments { id enabled jobVersion jobPythonVersion status syncStatus lastDeployedDate resources { cpuLimit memoryLimit }
		lastExecutionStatus lastExecutionTime } } totalPages totalItems } }`

func TestAPageIsReadWithoutAQueryPerJob(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for i := range 60 {
		name := fmt.Sprintf("job-%03d", i)
		e.createJob(jobSpec{team: "team-" + strconv.Itoa(i%3), name: name, schedule: fmt.Sprintf("%d * * * *", i%60), contacts: true})
		e.deploy("team-"+strconv.Itoa(i%3), name, `{"job_version":"v1"}`)
		if i%2 == 0 {
			e.sync(name)
		}
		e.execution(name+"-1", name, "succeeded", t1)
	}
	e.stmts.take()

	r := e.query(pageWithDeployments, "")
	require.Len(t, r.names(t), 50)
	stmts := e.stmts.take()
	require.Len(t, stmts, 2, "one count and one page with the deployments joined in: %v", stmts)

	// Without totals, one statement; asking for names only reads no deployment.
	r = e.query(`{ jobs(pageSize: 50) { content { jobName } } }`, "")
	require.Len(t, r.names(t), 50)
	stmts = e.stmts.take()
	require.Len(t, stmts, 1)
	require.NotContains(t, stmts[0], "desired_data_job_deployment")

	// Executions and their counts: one more statement each for the whole page.
	r = e.query(`{ jobs(pageSize: 50) { content { jobName deployments { successfulExecutions failedExecutions
		executions(pageNumber: 1, pageSize: 5) { id } latest: executions(pageNumber: 1, pageSize: 1) { id } } } } }`, "")
	p := r.page(t)
	require.Len(t, p.Content, 50)
	dep := p.Content[0]["deployments"].([]any)[0].(map[string]any)
	require.EqualValues(t, 1, dep["successfulExecutions"])
	require.Equal(t, []any{map[string]any{"id": "job-000-1"}}, dep["executions"])
	require.Equal(t, []any{map[string]any{"id": "job-000-1"}}, dep["latest"])
	require.Len(t, e.stmts.take(), 4, "page, counts, and one per distinct executions arguments")

	// A sort on the next run alone reads the jobs per distinct schedule (which add up to the
	// total), then the page from the groups it overlaps, in one read-only snapshot.
	r = e.query(`{ jobs(pageSize: 50, filter: [{property: "config.schedule.nextRunEpochSeconds", sort: ASC}]) { content { jobName } totalItems } }`, "")
	require.Equal(t, "job-001", r.names(t)[0], "at 00:00:30, minute 1 comes first, minute 0 last")
	stmts = e.stmts.take()
	require.Len(t, stmts, 4, "begin, the jobs per schedule, the page, commit: %v", stmts)
	require.Equal(t, 60, *r.page(t).TotalItems, "the total, from the jobs per schedule")
}

// The statements of a jobs page follow its selection: the deployments are joined only when
// selected, the total is counted only when asked for, and executions are read only for an
// executions field. (Every page reads the whole data_job row, one column list and one
// scan: docs/graphql.md, "Statements per request", says why columns are not skipped.)
func TestAJobsPageSendsNothingItsSelectionDoesNotNeed(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, name := range []string{"first-job", "second-job"} {
		e.createJob(jobSpec{team: "team-a", name: name, schedule: "0 * * * *"})
		e.deploy("team-a", name, `{"job_version":"v1"}`)
		e.execution(name+"-1", name, "succeeded", t1)
	}
	e.stmts.take()
	reads := func(stmts []string, what string) bool {
		return slices.ContainsFunc(stmts, func(s string) bool { return strings.Contains(s, what) })
	}

	for _, c := range []struct {
		query                          string
		stmts                          int
		count, deployments, executions bool
	}{
		{query: `{ jobs { content { jobName config { team schedule { scheduleCron } } } } }`, stmts: 1},
		{query: `{ jobs { content { jobName } totalPages } }`, stmts: 2, count: true},
		{query: `{ jobs { content { deployments { enabled jobPythonVersion lastExecutionStatus } } } }`, stmts: 1, deployments: true},
		{query: `{ jobs { content { deployments { executions(pageNumber: 1, pageSize: 1) { id } } } } }`, stmts: 2, deployments: true, executions: true},
		{query: `{ jobs { content { deployments { failedExecutions } } } }`, stmts: 2, deployments: true, executions: true},
	} {
		r := e.query(c.query, "")
		require.Equal(t, http.StatusOK, r.status, "%s", r.body)
		stmts := e.stmts.take()
		require.Len(t, stmts, c.stmts, "%s: %v", c.query, stmts)
		// The count of an unfiltered page is a sum of the counts kept per team.
		require.Equal(t, c.count, reads(stmts, "SELECT count(*)") || reads(stmts, "FROM data_job_list_count"), "%s counts: %v", c.query, stmts)
		require.Equal(t, c.deployments, reads(stmts, "desired_data_job_deployment"), "%s joins deployments: %v", c.query, stmts)
		require.Equal(t, c.deployments, reads(stmts, "actual_data_job_deployment"), "%s joins applied deployments: %v", c.query, stmts)
		require.Equal(t, c.executions, reads(stmts, "FROM data_job_execution"), "%s reads executions: %v", c.query, stmts)
	}
}

func TestOnlySelectedFieldsAreReturned(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	seed(e)
	r := e.query(`{ jobs(pageSize: 1) { totalItems } }`, "")
	require.JSONEq(t, `{"data":{"totalItems":5},"errors":[]}`, string(r.body))
	r = e.query(`{ jobs(pageSize: 1) { content { jobName } } }`, "")
	require.JSONEq(t, `{"data":{"content":[{"jobName":"alpha-job"}]},"errors":[]}`, string(r.body))
}

func TestIntrospectionKeepsItsShape(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.query(`{ __schema { queryType { name } } }`, "")
	require.Equal(t, http.StatusOK, r.status)
	require.JSONEq(t, `{"__schema":{"queryType":{"name":"Query"}}}`, string(r.Data))
	// Two root fields keep their names.
	r = e.query(`{ a: jobs { totalItems } b: executions { totalItems } }`, "")
	require.JSONEq(t, `{"a":{"totalItems":0},"b":{"totalItems":0}}`, string(r.Data))
}

func TestALargeBodyIsRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.do("POST", "/data-jobs/for-team/team-a/jobs", `{"query":"`+strings.Repeat(" ", 2<<20)+`{ jobs { totalItems } }"}`)
	require.Equal(t, http.StatusRequestEntityTooLarge, r.status, "%s", r.body)
}

func TestTheAnswerIsFlattenedWhateverTheStringsHold(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tricky := `a "quoted" } { [ ] , \ value \" ,"x":1}`
	e.createJob(jobSpec{team: "team-a", name: "tricky-job", description: tricky})
	r := e.query(`{ jobs { content { config { description } } totalItems } }`, "")
	p := r.page(t)
	require.Equal(t, 1, *p.TotalItems)
	require.Equal(t, tricky, p.Content[0]["config"].(map[string]any)["description"])
}

func TestAliasesFragmentsDirectivesAndTypenamesShapeTheAnswer(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	seed(e)
	r := e.query(`query($withTeam: Boolean!) {
		jobs(pageSize: 1) { __typename page: content { ...names config { team @include(if: $withTeam) owner: team @skip(if: $withTeam) }
			deployments { ... on DataJobDeployment { mode } cpu: resources { cpuRequest } } } }
	}
	fragment names on DataJob { __typename name: jobName jobName }`, `{"withTeam":true}`)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	require.JSONEq(t, `{"__typename":"DataJobPage","page":[{"__typename":"DataJob","name":"alpha-job","jobName":"alpha-job",
		"config":{"team":"team-a"},"deployments":[{"mode":"release","cpu":{"cpuRequest":0.5}}]}]}`, string(r.Data))
}

func TestAnErrorInADeploymentSaysWhere(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	seed(e)
	r := e.query(`{ jobs(pageSize: 1) { content { deployments { executions(filter: {jobNameIn: ["x"]}) { id } } } } }`, "")
	require.Contains(t, r.errorMessage(t, http.StatusBadRequest), "Parameter filter.jobNameIn is not valid.")
	require.Equal(t, []any{"jobs", "content", float64(0), "deployments", float64(0), "executions"}, r.Errors[0].Path)
	require.NotEmpty(t, r.Errors[0].Locations)
}

// TestEveryFieldOfTheSchemaIsAnswered selects every field of every type the queries reach,
// as the schema lists them, so that a field added to the schema without a writer fails.
func TestEveryFieldOfTheSchemaIsAnswered(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	seed(e)
	e.execution("alpha-job-1", "alpha-job", "succeeded", t1)
	r := e.query(`{ __schema { types { name kind fields { name type { name ofType { name ofType { name ofType { name } } } } } } } }`, "")
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	var schema struct {
		Schema struct {
			Types []struct {
				Name, Kind string
				Fields     []struct {
					Name string
					Type typeRef
				}
			}
		} `json:"__schema"`
	}
	require.NoError(t, json.Unmarshal(r.Data, &schema))
	objects := map[string][][2]string{} // type: field name, field type when an object
	for _, ty := range schema.Schema.Types {
		if ty.Kind == "OBJECT" && !strings.HasPrefix(ty.Name, "__") {
			for _, f := range ty.Fields {
				objects[ty.Name] = append(objects[ty.Name], [2]string{f.Name, f.Type.named()})
			}
		}
	}
	var selection func(typ string) string
	selection = func(typ string) string {
		var b strings.Builder
		b.WriteString("{ __typename")
		for _, f := range objects[typ] {
			b.WriteString(" " + f[0])
			if _, ok := objects[f[1]]; ok {
				b.WriteString(" " + selection(f[1]))
			}
		}
		return b.String() + " }"
	}
	r = e.query(selection("Query"), "")
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	require.Empty(t, r.Errors)
	for typ, fields := range objects {
		require.Contains(t, string(r.body), `"__typename":"`+typ+`"`)
		for _, f := range fields {
			require.Contains(t, string(r.body), `"`+f[0]+`":`, "%s.%s", typ, f[0])
		}
	}
}

type typeRef struct {
	Name   *string
	OfType *typeRef
}

func (t typeRef) named() string {
	if t.Name != nil {
		return *t.Name
	}
	if t.OfType != nil {
		return t.OfType.named()
	}
	return ""
}

// TestDeploymentsShowTheirRunPolicy guards the run policy in GraphQL: what a deployment
// set, with the defaults (today's behaviour) for what it did not.
func TestDeploymentsShowTheirRunPolicy(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.createJob(jobSpec{team: "team-a", name: "policy-job", schedule: "0 * * * *"})
	e.deploy("team-a", "policy-job", `{"job_version":"v1","retries":0,"time_zone":"Europe/Sofia","catch_up":3}`)
	r := e.query(`{ jobs { content { jobName deployments { runPolicy {
		retries timeoutSeconds concurrencyPolicy timeZone startingDeadlineSeconds catchUp } } } } }`, "")
	content := r.page(t).Content
	require.Len(t, content, 1)
	dep := content[0]["deployments"].([]any)[0].(map[string]any)
	require.Equal(t, map[string]any{
		"retries": 0.0, "timeoutSeconds": 43200.0, "concurrencyPolicy": "Forbid", "timeZone": "Europe/Sofia",
		"startingDeadlineSeconds": 1800.0, "catchUp": 3.0,
	}, dep["runPolicy"])
}

// A deployment's next run is when its CronJob fires in the run policy's time zone; the
// job configuration's (which has no zone) stays UTC, as VDK computes it (guards: a next run
// hours off for a job scheduled in another zone).
func TestDeploymentNextRunIsInItsTimeZone(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.createJob(jobSpec{team: "team-a", name: "sofia-job", schedule: "0 9 * * *"})
	e.deploy("team-a", "sofia-job", `{"job_version":"v1","time_zone":"Europe/Sofia"}`)
	r := e.query(`{ jobs { content { config { schedule { nextRunEpochSeconds } } deployments { schedule { scheduleCron nextRunEpochSeconds } } } } }`, "")
	content := r.page(t).Content
	require.Len(t, content, 1)
	dep := content[0]["deployments"].([]any)[0].(map[string]any)
	// The fixture's clock is 2030-01-01 00:00:30 UTC; Sofia is UTC+2 in January.
	require.Equal(t, map[string]any{"scheduleCron": "0 9 * * *", "nextRunEpochSeconds": float64(time.Date(2030, 1, 1, 7, 0, 0, 0, time.UTC).Unix())}, dep["schedule"])
	config := content[0]["config"].(map[string]any)["schedule"].(map[string]any)
	require.InDelta(t, float64(time.Date(2030, 1, 1, 9, 0, 0, 0, time.UTC).Unix()), config["nextRunEpochSeconds"], 0)
}
