package httpapi_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const applyPath = "/data-jobs/for-team/team-a/apply"

// planBody is the answer of an apply.
type planBody struct {
	BaseRevision string `json:"base_revision"`
	Applied      bool   `json:"applied"`
	Changes      []struct {
		Kind, Name, Action, Reason string
		Diff                       []struct{ Field string }
	} `json:"changes"`
	Summary      map[string]int `json:"summary"`
	PruneRefused string         `json:"prune_refused"`
}

func (p planBody) actions() map[string]string {
	out := map[string]string{}
	for _, c := range p.Changes {
		out[c.Kind+"/"+c.Name] = c.Action
	}
	return out
}

// apply posts file (YAML) to the team-a apply with query q and headers.
func (e *env) apply(file, q string, headers ...string) response {
	e.t.Helper()
	return e.do("POST", applyPath+"?"+q, file, append([]string{"Content-Type", "application/yaml"}, headers...)...)
}

func (e *env) plan(file, q string, headers ...string) planBody {
	e.t.Helper()
	r := e.apply(file, q, headers...)
	require.Equal(e.t, http.StatusOK, r.status, "%s", r.body)
	var p planBody
	r.json(e.t, &p)
	return p
}

// teamFile is a file of team-a with the jobs named, each deployed, and a pipeline over the
// first two.
func teamFile(jobs ...string) string {
	var b strings.Builder
	b.WriteString("apiVersion: datajobs.io/v1\nteam: team-a\njobs:\n")
	for _, j := range jobs {
		fmt.Fprintf(&b, "  - job_name: %s\n    config: {schedule: {schedule_cron: \"0 3 * * *\"}}\n    deployment: {job_version: v1, retries: 1}\n", j)
	}
	if len(jobs) >= 2 {
		fmt.Fprintf(&b, "pipelines:\n  - name: nightly-etl\n    nodes: [{name: first-step, job_name: %s}, {name: second-step, job_name: %s, depends_on: [first-step]}]\n", jobs[0], jobs[1])
	}
	return b.String()
}

const source = "X-Datajobs-Source"

func TestAnApplyWritesTheFileInOneGoAndEveryRevisionNamesTheCommit(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	file := teamFile("extract-job", "load-job")
	p := e.plan(file, "dry_run=true")
	require.Equal(t, map[string]string{"job/extract-job": "create", "job/load-job": "create", "pipeline/nightly-etl": "create"}, p.actions())
	require.Equal(t, 0, e.count(`SELECT count(*) FROM data_job`), "a dry run writes nothing")

	p = e.plan(file, "base_revision="+p.BaseRevision, source, "github.com/acme/jobs@abc123")
	require.True(t, p.Applied)
	d := e.deployment("/data-jobs/for-team/team-a/jobs/extract-job")
	require.Equal(t, "v1", d["job_version"])
	require.EqualValues(t, 1, d["retries"])
	r := e.do("GET", "/data-jobs/for-team/team-a/jobs/extract-job/deployments/release/revisions", "")
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	var revs struct {
		Revisions []struct {
			Kind, Source string
		} `json:"revisions"`
	}
	r.json(t, &revs)
	require.Len(t, revs.Revisions, 2, "create, deploy")
	for _, rv := range revs.Revisions {
		require.Equal(t, "github.com/acme/jobs@abc123", rv.Source, rv.Kind)
	}
	var pipeSource string
	e.query(`SELECT r.source FROM pipeline_revision r JOIN pipeline p ON p.id = r.pipeline_id WHERE p.name = 'nightly-etl'`, nil, &pipeSource)
	require.Equal(t, "github.com/acme/jobs@abc123", pipeSource)

	// The next commit changes one job: its plan names the fields; a stale base is refused.
	next := strings.Replace(file, "deployment: {job_version: v1, retries: 1}", "deployment: {job_version: v2, retries: 1}", 1)
	p2 := e.plan(next, "dry_run=true", source, "github.com/acme/jobs@def456")
	require.Equal(t, map[string]string{"job/extract-job": "update", "job/load-job": "unchanged", "pipeline/nightly-etl": "unchanged"}, p2.actions(), "%+v", p2.Changes)
	require.Equal(t, "deployment.job_version", p2.Changes[0].Diff[0].Field)
	r = e.apply(next, "base_revision="+p.BaseRevision, source, "github.com/acme/jobs@def456")
	require.Equal(t, http.StatusConflict, r.status, "%s", r.body)
	require.Contains(t, r.vdkError(t)["what"], "moved")
	p2 = e.plan(next, "base_revision="+p2.BaseRevision, source, "github.com/acme/jobs@def456")
	require.True(t, p2.Applied)
	require.Equal(t, "v2", e.deployment("/data-jobs/for-team/team-a/jobs/extract-job")["job_version"])

	// An apply leaves the revisions the API's calls leave (a job created, deployed, deployed
	// again); it writes a job and its deployment in one row version of the job, one
	// generation for both (created at 1 and deployed: still 1, the API's calls: 2), and
	// bumps it for each apply that changes it. Before, the apply wrote the job's row three
	// times (its insert, the deploy's bump, the owner) and left generation 3 here.
	e.createJob("team-a", "hand-job")
	e.deploy("/data-jobs/for-team/team-a/jobs/hand-job", `{"job_version":"v1"}`)
	e.deploy("/data-jobs/for-team/team-a/jobs/hand-job", `{"job_version":"v2"}`)
	history := func(name string) (revs string, generation int) {
		e.query(`SELECT (SELECT string_agg(revision || ':' || kind, ',' ORDER BY revision) FROM data_job_revision WHERE job_name = $1),
	(SELECT generation FROM data_job WHERE name = $1)`, []any{name}, &revs, &generation)
		return revs, generation
	}
	fileRevs, fileGen := history("extract-job")
	handRevs, handGen := history("hand-job")
	require.Equal(t, handRevs, fileRevs)
	require.Equal(t, "1:create,2:deploy,3:deploy", fileRevs)
	require.Equal(t, 3, handGen)
	require.Equal(t, 2, fileGen)
}

func TestAnExportAppliesWithAnEmptyPlanAndNoWrite(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.createJob("team-a", "hand-job")
	e.deploy("/data-jobs/for-team/team-a/jobs/hand-job", `{"job_version":"v7","resources":{"cpu_request":0.25,"memory_limit":700},"schedule":{"schedule_cron":"H 5 * * *"},"time_zone":"Europe/Sofia","enabled":false}`)
	e.createJob("team-a", "other-job")
	r := e.do("PUT", "/data-jobs/for-team/team-a/pipelines/hand-pipeline", `{"nodes":[{"name":"only-step","job_name":"other-job"}],"max_active_runs":3}`)
	require.Equal(t, http.StatusCreated, r.status, "%s", r.body)
	e.plan(teamFile("file-job"), "", source, "github.com/acme/jobs@abc123")

	r = e.do("GET", "/data-jobs/for-team/team-a/export", "")
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	require.Equal(t, "application/yaml", r.header.Get("Content-Type"))
	revisions, generations := e.count(`SELECT count(*) FROM data_job_revision`), e.count(`SELECT sum(generation) FROM data_job`)
	p := e.plan(string(r.body), "prune=true", source, "github.com/acme/jobs@abc123")
	require.False(t, p.Applied)
	require.Equal(t, map[string]int{"unchanged": 4}, p.Summary, "%+v", p.Changes)
	require.Equal(t, revisions, e.count(`SELECT count(*) FROM data_job_revision`), "no revision")
	require.Equal(t, generations, e.count(`SELECT sum(generation) FROM data_job`), "no generation bumped")
}

func TestAnInvalidObjectInTheMiddleCommitsNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	bad := strings.Replace(teamFile("first-job", "second-job", "third-job"), "job_name: second-job\n    config: {schedule: {schedule_cron: \"0 3 * * *\"}}",
		"job_name: second-job\n    config: {schedule: {schedule_cron: \"every day\"}}", 1)
	r := e.apply(bad, "")
	require.Equal(t, http.StatusBadRequest, r.status, "%s", r.body)
	require.Contains(t, r.vdkError(t)["what"], `jobs[1] ("second-job")`)
	r = e.apply(strings.Replace(teamFile("first-job"), "deployment:", "deploymnet:", 1), "")
	require.Equal(t, http.StatusBadRequest, r.status, "%s", r.body)
	require.Contains(t, r.vdkError(t)["why"], `unknown field "deploymnet"`)

	// A failure only the writes meet (a name another team holds) rolls back the writes before it.
	e.createJob("team-b", "second-job")
	r = e.apply(teamFile("first-job", "second-job", "third-job"), "")
	require.Equal(t, http.StatusConflict, r.status, "%s", r.body)
	require.Contains(t, r.vdkError(t)["what"], `jobs[1] ("second-job")`)
	require.Equal(t, 0, e.count(`SELECT count(*) FROM data_job WHERE team = 'team-a'`), "nothing committed")
	require.Equal(t, 0, e.count(`SELECT count(*) FROM pipeline`))
}

func TestPruneDeletesOnlyOwnedObjectsUnderTheMassPruneGuard(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.createJob("team-a", "hand-job")
	names := []string{"job-one", "job-two", "job-three", "job-four", "job-five"}
	e.plan(teamFile(names...), "", source, "github.com/acme/jobs@c1")
	require.Equal(t, 6, e.count(`SELECT count(*) FROM data_job WHERE team = 'team-a'`))

	p := e.plan(teamFile(names[:4]...), "prune=true", source, "github.com/acme/jobs@c2")
	require.Equal(t, "delete", p.actions()["job/job-five"])
	require.NotContains(t, p.actions(), "job/hand-job", "a job the file never applied is no prune's")
	require.Equal(t, 0, e.count(`SELECT count(*) FROM data_job WHERE name = 'job-five'`))
	require.Equal(t, 1, e.count(`SELECT count(*) FROM data_job WHERE name = 'hand-job'`))

	// Another repository owns nothing here: its empty file prunes nothing.
	p = e.plan("apiVersion: datajobs.io/v1\nteam: team-a\n", "prune=true", source, "github.com/other/jobs@c1")
	require.Empty(t, p.Changes)

	// An empty file of the owner would delete all five: the guard keeps them.
	p = e.plan("apiVersion: datajobs.io/v1\nteam: team-a\n", "prune=true", source, "github.com/acme/jobs@c3")
	require.Contains(t, p.PruneRefused, "5 of the 5")
	require.False(t, p.Applied)
	require.Equal(t, 5, e.count(`SELECT count(*) FROM data_job WHERE team = 'team-a'`))
	p = e.plan("apiVersion: datajobs.io/v1\nteam: team-a\n", "prune=true&allow_mass_prune=true", source, "github.com/acme/jobs@c3")
	require.Equal(t, 5, p.Summary["delete"])
	require.Equal(t, 1, e.count(`SELECT count(*) FROM data_job WHERE team = 'team-a'`), "hand-job stays")
}

func TestAHandWriteOfAnOwnedObjectIs409UntilReleased(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.plan(teamFile("file-job", "second-job"), "", source, "github.com/acme/jobs@abc123")
	jobPath := "/data-jobs/for-team/team-a/jobs/file-job"
	for _, w := range []struct{ method, path, body string }{
		{"PATCH", jobPath + "/deployments/release", `{"enabled":false}`},
		{"POST", jobPath + "/deployments", `{"job_version":"v9"}`},
		{"PUT", jobPath, `{"job_name":"file-job","description":"by hand"}`},
		{"DELETE", jobPath + "/deployments/release", ""},
		{"PUT", "/data-jobs/for-team/team-a/pipelines/nightly-etl", `{"nodes":[{"name":"only-step","job_name":"file-job"}]}`},
		{"DELETE", "/data-jobs/for-team/team-a/pipelines/nightly-etl", ""},
		{"DELETE", "/data-jobs/for-team/team-a/jobs/second-job", ""},
	} {
		r := e.do(w.method, w.path, w.body)
		require.Equal(t, http.StatusConflict, r.status, "%s %s: %s", w.method, w.path, r.body)
		require.Contains(t, r.vdkError(t)["what"], "github.com/acme/jobs", "%s %s", w.method, w.path)
	}
	require.Equal(t, "v1", e.deployment(jobPath)["job_version"], "nothing changed")

	// Another file conflicts too, and commits nothing.
	r := e.apply(teamFile("file-job"), "", source, "github.com/other/jobs@1")
	require.Equal(t, http.StatusConflict, r.status, "%s", r.body)

	r = e.do("POST", "/data-jobs/for-team/team-a/release-from-file?job=file-job", "")
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	require.JSONEq(t, `{"released":1}`, string(r.body))
	require.Equal(t, http.StatusOK, e.do("PUT", jobPath, `{"job_name":"file-job","description":"by hand"}`).status)
	require.Equal(t, http.StatusConflict, e.do("DELETE", "/data-jobs/for-team/team-a/pipelines/nightly-etl", "").status, "the pipeline is still owned")
}

func TestTheSchemaIsServed(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.do("GET", "/data-jobs/schema/datajobs.yaml.json", "")
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	var s map[string]any
	r.json(t, &s)
	require.Equal(t, "/data-jobs/schema/datajobs.yaml.json", s["$id"])
}

func TestAFileWithASourceFolderIsRefusedTheCLIResolvesIt(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	file := strings.Replace(teamFile("extract-job", "load-job"), "deployment: {job_version: v1, retries: 1}", "deployment: {source: ./load-job}", 2)
	r := e.apply(file, "dry_run=true")
	require.Equal(t, http.StatusBadRequest, r.status, "%s", r.body)
	body := r.vdkError(t)
	require.Contains(t, body["what"], `jobs[0] ("extract-job")`)
	require.Contains(t, body["what"]+" "+body["why"], "datajobs apply -f")
	require.Equal(t, 0, e.count(`SELECT count(*) FROM data_job`))
}
