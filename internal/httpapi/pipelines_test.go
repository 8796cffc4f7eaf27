package httpapi_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const pipelinesPath = "/data-jobs/for-team/team-a/pipelines"

// The PUT answers 201 then 200 with the defaults applied; every rule of the contract is a
// 400 (a VDK error body) with nothing stored; a job of another team needs its grant (403
// naming the job until then); the job a pipeline runs cannot be deleted (409 naming it).
func TestAPipelineIsStoredOnlyWhenValidAndItsJobsStay(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.createJob("team-a", "extract-job")
	e.createJob("team-a", "load-job")
	e.createJob("team-b", "shared-job")
	put := func(name, body string) response {
		return e.do("PUT", pipelinesPath+"/"+name, body, "Content-Type", "application/json")
	}
	node := func(name, jobName string, deps ...string) string {
		return fmt.Sprintf(`{"name":%q,"job_name":%q,"depends_on":["%s"]}`, name, jobName, strings.Join(deps, `","`))
	}
	for _, tt := range []struct{ name, body, want string }{
		{"a cycle", `{"nodes":[` + node("extract", "extract-job", "loading") + `,` + node("loading", "load-job", "extract") + `]}`, "extract -> loading -> extract"},
		{"an unknown depends_on", `{"nodes":[{"name":"extract","job_name":"extract-job","depends_on":["nowhere"]}]}`, `"nowhere"`},
		{"a duplicate node", `{"nodes":[{"name":"extract","job_name":"extract-job"},{"name":"extract","job_name":"load-job"}]}`, `two nodes named "extract"`},
		{"an empty node list", `{"nodes":[]}`, "at least one node"},
		{"an unknown job", `{"nodes":[{"name":"extract","job_name":"missing-job"}]}`, `"missing-job" of team "team-a" in node "extract"`},
		{"a bad cron", `{"schedule":{"schedule_cron":"every day"},"nodes":[{"name":"extract","job_name":"extract-job"}]}`, "schedule_cron"},
		{"a bad time zone", `{"schedule":{"schedule_cron":"0 3 * * *","time_zone":"Nowhere/City"},"nodes":[{"name":"extract","job_name":"extract-job"}]}`, "time_zone"},
		{"a bad node name", `{"nodes":[{"name":"X","job_name":"extract-job"}]}`, "nodes.name"},
		{"more than 200 nodes", `{"nodes":[` + manyNodes(201) + `]}`, "201 nodes"},
		{"a name twice in depends_on", `{"nodes":[{"name":"extract","job_name":"extract-job"},` + node("loading", "load-job", "extract", "extract") + `]}`, `"extract" twice`},
		{"an unknown trigger rule", `{"nodes":[{"name":"extract","job_name":"extract-job","trigger_rule":"sometimes"}]}`, "trigger_rule"},
		{"an unknown on_failure", `{"nodes":[{"name":"extract","job_name":"extract-job","on_failure":"shrug"}]}`, "on_failure"},
		{"max_active_runs over 100", `{"max_active_runs":101,"nodes":[{"name":"extract","job_name":"extract-job"}]}`, "max_active_runs"},
		{"arguments not an object", `{"nodes":[{"name":"extract","job_name":"extract-job","arguments":[1]}]}`, "args"},
		{"an empty contact", `{"contacts":{"notified_on_run_failure":[""]},"nodes":[{"name":"extract","job_name":"extract-job"}]}`, "contacts"},
	} {
		r := put("nightly-etl", tt.body)
		require.Equal(t, http.StatusBadRequest, r.status, "%s: %s", tt.name, r.body)
		ve := r.vdkError(t)
		require.NotEmpty(t, ve["countermeasures"], tt.name)
		require.Contains(t, ve["what"]+" "+ve["why"], tt.want, tt.name)
	}
	require.Equal(t, http.StatusBadRequest, put("X", `{"nodes":[{"name":"extract","job_name":"extract-job"}]}`).status, "a bad pipeline name")
	require.Equal(t, 0, e.count(`SELECT count(*) FROM pipeline`), "nothing stored")

	shared := `{"nodes":[{"name":"extract","job_name":"extract-job"},{"name":"shared-step","job_name":"shared-job","team":"team-b","depends_on":["extract"]}]}`
	r := put("nightly-etl", shared)
	require.Equal(t, http.StatusForbidden, r.status, r.body)
	require.Contains(t, r.vdkError(t)["what"], "shared-job")
	require.Equal(t, 0, e.count(`SELECT count(*) FROM pipeline`), "nothing stored")

	require.Equal(t, http.StatusOK, e.do("PUT", "/data-jobs/for-team/team-b/jobs/shared-job/grants/team-a", "").status)
	r = put("nightly-etl", shared)
	require.Equal(t, http.StatusCreated, r.status, r.body)
	require.Equal(t, pipelinesPath+"/nightly-etl", r.header.Get("Location"))
	var got map[string]any
	r.json(t, &got)
	require.EqualValues(t, 1, got["revision"])
	require.Equal(t, true, got["enabled"])
	require.EqualValues(t, 1, got["max_active_runs"])
	require.Nil(t, got["last_run"])
	require.Nil(t, got["next_run_time"])
	r = put("nightly-etl", `{"schedule":{"schedule_cron":"0 3 * * *","time_zone":"Europe/Sofia"},"nodes":[{"name":"extract","job_name":"extract-job"}]}`)
	require.Equal(t, http.StatusOK, r.status, r.body)
	r.json(t, &got)
	require.EqualValues(t, 2, got["revision"])
	require.NotNil(t, got["next_run_time"])
	r = put("nightly-etl", `{"nodes":[]}`)
	require.Equal(t, http.StatusBadRequest, r.status, "an invalid replacement")
	require.Equal(t, 2, e.count(`SELECT count(*) FROM pipeline_revision`), "nothing stored: no revision")
	require.Equal(t, 1, e.count(`SELECT count(*) FROM pipeline_node`), "the stored nodes stay")

	r = e.do("DELETE", "/data-jobs/for-team/team-a/jobs/extract-job", "")
	require.Equal(t, http.StatusConflict, r.status, r.body)
	require.Contains(t, r.vdkError(t)["why"], `"nightly-etl"`)

	r = e.do("GET", pipelinesPath+"?page_size=1", "")
	require.Equal(t, http.StatusOK, r.status, r.body)
	var page struct {
		Content    []map[string]any `json:"content"`
		TotalItems int              `json:"total_items"`
	}
	r.json(t, &page)
	require.Equal(t, 1, page.TotalItems)
	require.Equal(t, "nightly-etl", page.Content[0]["pipeline_name"])
	require.Equal(t, http.StatusBadRequest, e.do("GET", pipelinesPath+"?page_size=1000", "").status)
	r = e.do("GET", pipelinesPath+"?page_number=first", "")
	require.Equal(t, http.StatusBadRequest, r.status, "a page number that is no integer")
	require.Equal(t, "Parameter page_number is not valid.", r.vdkError(t)["what"])
	require.Equal(t, "It must be an integer, but was first.", r.vdkError(t)["why"])

	require.Equal(t, http.StatusOK, e.do("DELETE", pipelinesPath+"/nightly-etl", "").status)
	require.Equal(t, http.StatusNotFound, e.do("GET", pipelinesPath+"/nightly-etl", "").status)
	require.Equal(t, http.StatusOK, e.do("DELETE", "/data-jobs/for-team/team-a/jobs/extract-job", "").status, "no pipeline uses it now")
}

// manyNodes is a list of n valid nodes of extract-job.
func manyNodes(n int) string {
	nodes := make([]string, n)
	for i := range nodes {
		nodes[i] = fmt.Sprintf(`{"name":"node-%d","job_name":"extract-job"}`, i)
	}
	return strings.Join(nodes, ",")
}

// A run is accepted with its Location and id, a second one is a 409 at max_active_runs 1,
// and its nodes show what they wait for; a cancel ends it, a repair of a running run is a
// 409, and a backfill of a pipeline without a schedule is a 400.
func TestAPipelineRunIsStartedCancelledAndListed(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.createJob("team-a", "extract-job")
	e.createJob("team-a", "load-job")
	r := e.do("PUT", pipelinesPath+"/nightly-etl", `{"nodes":[{"name":"extract","job_name":"extract-job"},{"name":"loading","job_name":"load-job","depends_on":["extract"]}]}`,
		"Content-Type", "application/json")
	require.Equal(t, http.StatusCreated, r.status, r.body)

	r = e.do("POST", pipelinesPath+"/nightly-etl/runs", `{"arguments":{"day":"2026-12-01"},"logical_time":"2026-12-01T00:00:00Z"}`, "Content-Type", "application/json", "X-Datajobs-User", "alice")
	require.Equal(t, http.StatusAccepted, r.status, r.body)
	var started struct {
		ID int64 `json:"id"`
	}
	r.json(t, &started)
	run := fmt.Sprintf("%s/nightly-etl/runs/%d", pipelinesPath, started.ID)
	require.Equal(t, run, r.header.Get("Location"))
	r = e.do("POST", pipelinesPath+"/nightly-etl/runs", `{}`, "Content-Type", "application/json")
	require.Equal(t, http.StatusConflict, r.status, r.body)
	require.NotEmpty(t, r.vdkError(t)["countermeasures"])

	r = e.do("GET", run, "")
	require.Equal(t, http.StatusOK, r.status, r.body)
	var got struct {
		Status      string `json:"status"`
		LogicalTime string `json:"logical_time"`
		StartedBy   string `json:"started_by"`
		Nodes       []struct {
			Name, Status, Message string
			ExecutionID           *string `json:"execution_id"`
			Attempt               int
		} `json:"nodes"`
	}
	r.json(t, &got)
	require.Equal(t, "running", got.Status)
	require.Equal(t, "2026-12-01T00:00:00Z", got.LogicalTime)
	require.Equal(t, "alice", got.StartedBy)
	require.Len(t, got.Nodes, 2)
	require.Equal(t, "pending", got.Nodes[1].Status)
	require.Nil(t, got.Nodes[1].ExecutionID)
	require.Equal(t, 1, got.Nodes[1].Attempt)

	require.Equal(t, http.StatusConflict, e.do("POST", run+"/repair", "").status, "a running run is not repaired")
	require.Equal(t, http.StatusOK, e.do("DELETE", run, "").status)
	require.Equal(t, http.StatusNotFound, e.do("GET", pipelinesPath+"/nightly-etl/runs/999999", "").status)
	require.Equal(t, http.StatusNotFound, e.do("GET", pipelinesPath+"/nightly-etl/runs/abc", "").status)

	r = e.do("GET", pipelinesPath+"/nightly-etl/runs", "")
	require.Equal(t, http.StatusOK, r.status, r.body)
	require.Contains(t, string(r.body), `"total_items":1`)

	r = e.do("POST", pipelinesPath+"/nightly-etl/backfills", `{"from":"2026-01-01T00:00:00Z","to":"2026-01-05T00:00:00Z"}`, "Content-Type", "application/json")
	require.Equal(t, http.StatusBadRequest, r.status, r.body)
	require.Contains(t, r.vdkError(t)["what"], "schedule")
}
