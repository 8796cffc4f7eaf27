package httpapi_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// A re-run repeats an execution of the same job: its arguments, and its logical time when
// it had one (a backfill or catch-up run), recorded with rerun_of. The guard: a re-run
// that lost the arguments would run the job on the wrong input, and one that took another
// job's execution would leak its arguments across jobs.
func TestRerunKeepsTheArgumentsAndLogicalTimeAndRefusesForeignOrBadRequests(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	path := e.createJob("team-a", "rerun-job")
	e.deploy(path, `{"job_version":"v1"}`)
	r := e.startExecution(path, `{"args":{"day":"2026-11-30","n":3}}`)
	require.Equal(t, http.StatusAccepted, r.status, "%s", r.body)
	var first map[string]any
	r.json(t, &first)
	id := first["id"].(string)
	e.sql(`UPDATE data_job_execution SET status = 'user_error', end_time = now(), logical_time = '2026-11-30T09:00:00Z' WHERE id = $1`, id)

	r = e.startExecution(path, fmt.Sprintf(`{"rerun_of":%q}`, id), "X-Datajobs-User", "bob")
	require.Equal(t, http.StatusAccepted, r.status, "%s", r.body)
	var again map[string]any
	r.json(t, &again)
	require.NotEqual(t, id, again["id"])
	require.JSONEq(t, `{"day":"2026-11-30","n":3}`, mustJSON(t, again["args"]), "the same arguments")
	require.Equal(t, "2026-11-30T09:00:00Z", again["logical_time"], "the same logical time")
	require.Equal(t, id, again["rerun_of"])
	require.Equal(t, "bob", again["started_by"])
	require.Nil(t, first["rerun_of"], "a plain start re-runs nothing")

	// Concurrency policy applies as to any start: the re-run is still submitted.
	r = e.startExecution(path, fmt.Sprintf(`{"rerun_of":%q}`, id))
	require.Equal(t, http.StatusConflict, r.status, "%s", r.body)

	other := e.createJob("team-a", "other-job")
	e.deploy(other, `{"job_version":"v1"}`)
	for _, tt := range []struct {
		name, path, body string
		status           int
	}{
		{"an unknown execution", other, `{"rerun_of":"no-such-execution"}`, http.StatusNotFound},
		{"another job's execution", other, fmt.Sprintf(`{"rerun_of":%q}`, id), http.StatusNotFound},
		{"rerun_of with args of its own", other, `{"rerun_of":"x","args":{"a":"b"}}`, http.StatusBadRequest},
		{"rerun_of not a string", other, `{"rerun_of":7}`, http.StatusBadRequest},
	} {
		r := e.startExecution(tt.path, tt.body)
		require.Equal(t, tt.status, r.status, "%s: %s", tt.name, r.body)
		require.NotEmpty(t, r.vdkError(t)["countermeasures"], tt.name)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}

// A backfill is recorded with its schedule times read in the policy's time zone (09:00 in
// New York is 14:00 UTC in January), listed with its progress, and cancelled as a whole:
// the times not started count as cancelled. Its runs are started by the leader (the
// synchronizer's tests); here none runs.
func TestBackfillRecordsTheScheduleTimesInTheTimeZoneAndCancelsAsAWhole(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	path := e.createJob("team-a", "backfill-job")
	e.deploy(path, `{"job_version":"v1","schedule":{"schedule_cron":"0 9 * * *"},"time_zone":"America/New_York"}`)
	r := e.do("POST", path+"/deployments/release/backfills",
		`{"from":"2026-01-10T14:00:00Z","to":"2026-01-14T23:00:00Z","max_parallel":2,"args":{"region":"eu"}}`, "X-Datajobs-User", "alice")
	require.Equal(t, http.StatusCreated, r.status, "%s", r.body)
	var b map[string]any
	r.json(t, &b)
	loc := r.header.Get("Location")
	require.Equal(t, fmt.Sprintf("%s/deployments/release/backfills/%v", path, b["id"]), loc)
	require.Equal(t, "alice", b["created_by"])
	require.InDelta(t, 2, b["max_parallel"], 0)
	require.Equal(t, map[string]any{"total": 5.0, "pending": 5.0, "running": 0.0, "succeeded": 0.0, "failed": 0.0, "cancelled": 0.0}, b["progress"],
		"from itself is a schedule time: Jan 10 to 14, 09:00 New York")
	var joined string
	e.query(`SELECT array_to_string(ARRAY(SELECT to_char(t AT TIME ZONE 'UTC', 'MM-DD"T"HH24:MI') FROM unnest(times) t), ',') FROM data_job_backfill WHERE id = $1`,
		[]any{int64(b["id"].(float64))}, &joined)
	times := strings.Split(joined, ",")
	require.Equal(t, []string{"01-10T14:00", "01-11T14:00", "01-12T14:00", "01-13T14:00", "01-14T14:00"}, times)

	var list []map[string]any
	e.do("GET", path+"/deployments/release/backfills", "").json(t, &list)
	require.Len(t, list, 1)
	require.Equal(t, b["id"], list[0]["id"])

	r = e.do("DELETE", loc, "", "X-Datajobs-User", "bob")
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	r.json(t, &b)
	require.Equal(t, "bob", b["cancelled_by"])
	require.Equal(t, map[string]any{"total": 5.0, "pending": 0.0, "running": 0.0, "succeeded": 0.0, "failed": 0.0, "cancelled": 5.0}, b["progress"])
	require.Equal(t, http.StatusOK, e.do("DELETE", loc, "").status, "asking twice is one request")

	// Another job's or team's backfill is not found.
	other := e.createJob("team-a", "other-job")
	e.deploy(other, `{"job_version":"v1","schedule":{"schedule_cron":"0 9 * * *"}}`)
	for _, p := range []string{
		strings.Replace(loc, "/backfill-job/", "/other-job/", 1),
		strings.Replace(loc, "/team-a/", "/team-b/", 1),
		path + "/deployments/release/backfills/not-a-number",
	} {
		r := e.do("GET", p, "")
		require.Equal(t, http.StatusNotFound, r.status, "%s: %s", p, r.body)
		require.Equal(t, http.StatusNotFound, e.do("DELETE", p, "").status, p)
	}
}

// Every bad backfill request is a clear 400 (or 404 without a deployment), and records
// nothing.
func TestBadBackfillRequestsAreClear400s(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	path := e.createJob("team-a", "bad-backfill")
	e.deploy(path, `{"job_version":"v1","schedule":{"schedule_cron":"* * * * *"}}`)
	unscheduled := "/data-jobs/for-team/team-a/jobs/no-schedule"
	require.Equal(t, http.StatusCreated, e.do("POST", "/data-jobs/for-team/team-a/jobs", `{"job_name":"no-schedule","description":"d"}`).status)
	e.deploy(unscheduled, `{"job_version":"v1"}`)
	undeployed := e.createJob("team-a", "no-deploy")
	for _, tt := range []struct {
		name, path, body, inWhy string
		status                  int
	}{
		{"no from", path, `{"to":"2026-01-01T00:00:00Z"}`, "RFC 3339", 400},
		{"a date that is not RFC 3339", path, `{"from":"2026-01-01","to":"2026-01-02T00:00:00Z"}`, "RFC 3339", 400},
		{"to before from", path, `{"from":"2026-01-02T00:00:00Z","to":"2026-01-01T00:00:00Z"}`, "at or after from", 400},
		{"max_parallel 0 is the default, 11 too many", path, `{"from":"2026-01-01T00:00:00Z","to":"2026-01-01T00:04:00Z","max_parallel":11}`, "from 1 to 10", 400},
		{"a negative max_parallel", path, `{"from":"2026-01-01T00:00:00Z","to":"2026-01-01T00:04:00Z","max_parallel":-1}`, "from 1 to 10", 400},
		{"more than 1000 runs", path, `{"from":"2026-01-01T00:00:00Z","to":"2026-01-02T00:00:00Z"}`, "at most 1000 schedule times", 400},
		{"no schedule time in the range", path, `{"from":"2026-01-01T00:00:10Z","to":"2026-01-01T00:00:50Z"}`, "holds none", 400},
		{"args that set logical_time", path, `{"from":"2026-01-01T00:00:00Z","to":"2026-01-01T00:04:00Z","args":{"logical_time":"x"}}`, "without logical_time", 400},
		{"args not an object", path, `{"from":"2026-01-01T00:00:00Z","to":"2026-01-01T00:04:00Z","args":[1]}`, "JSON object", 400},
		{"a body that is not JSON", path, `{"from":`, "", 400},
		{"a deployment without a schedule", unscheduled, `{"from":"2026-01-01T00:00:00Z","to":"2026-01-01T00:04:00Z"}`, "no schedule", 400},
		{"a job without a deployment", undeployed, `{"from":"2026-01-01T00:00:00Z","to":"2026-01-01T00:04:00Z"}`, "", 404},
	} {
		r := e.do("POST", tt.path+"/deployments/release/backfills", tt.body)
		require.Equal(t, tt.status, r.status, "%s: %s", tt.name, r.body)
		body := r.vdkError(t)
		require.Contains(t, body["why"]+body["what"], tt.inWhy, tt.name)
	}
	var n int
	e.query(`SELECT count(*) FROM data_job_backfill`, nil, &n)
	require.Zero(t, n, "nothing recorded")

	// At most 10 backfills of a job are open at once.
	ok := `{"from":"2026-01-01T00:00:00Z","to":"2026-01-01T00:04:00Z"}`
	for range 10 {
		require.Equal(t, http.StatusCreated, e.do("POST", path+"/deployments/release/backfills", ok).status)
	}
	r := e.do("POST", path+"/deployments/release/backfills", ok)
	require.Equal(t, http.StatusConflict, r.status, "%s", r.body)
	require.Contains(t, r.vdkError(t)["why"], "10 backfills not finished")
}
