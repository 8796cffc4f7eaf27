package httpapi_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestHashedSchedulesAnswerAsSentWithTheirResolution: a schedule with H is answered as its
// user sent it, with the job's own resolution beside it (team-a/nightly-load's minute is
// 48, job.TestHashedFieldsResolveToFixedValues); one without H is answered as before,
// with no new field, so that a VDK client reads what it always read.
func TestHashedSchedulesAnswerAsSentWithTheirResolution(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.do("POST", "/data-jobs/for-team/team-a/jobs",
		`{"job_name":"nightly-load","description":"d","config":{"schedule":{"schedule_cron":"H(0-29) 2 * * *"}}}`)
	require.Equal(t, http.StatusCreated, r.status, "%s", r.body)
	path := "/data-jobs/for-team/team-a/jobs/nightly-load"
	var got struct {
		Config struct {
			Schedule map[string]string `json:"schedule"`
		} `json:"config"`
	}
	r = e.do("GET", path, "")
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	r.json(t, &got)
	require.Equal(t, map[string]string{"schedule_cron": "H(0-29) 2 * * *", "schedule_cron_resolved": "18 2 * * *"}, got.Config.Schedule)

	// A deploy without a schedule takes the job's as sent, resolved again.
	e.deploy(path, `{"job_version":"v1"}`)
	require.Equal(t, map[string]any{"schedule_cron": "H(0-29) 2 * * *", "schedule_cron_resolved": "18 2 * * *"}, e.deployment(path)["schedule"])
	e.deploy(path, `{"schedule":{"schedule_cron":"H/15 * * * *"}}`)
	require.Equal(t, map[string]any{"schedule_cron": "H/15 * * * *", "schedule_cron_resolved": "3-59/15 * * * *"}, e.deployment(path)["schedule"])
	// A PATCH of something else keeps the schedule as sent.
	r = e.do("PATCH", path+"/deployments/release", `{"enabled":false}`)
	require.Equal(t, http.StatusAccepted, r.status, "%s", r.body)
	require.Equal(t, map[string]any{"schedule_cron": "H/15 * * * *", "schedule_cron_resolved": "3-59/15 * * * *"}, e.deployment(path)["schedule"])
	// Back to plain cron: the resolution is gone from the answer.
	e.deploy(path, `{"schedule":{"schedule_cron":"48 * * * *"}}`)
	require.Equal(t, map[string]any{"schedule_cron": "48 * * * *"}, e.deployment(path)["schedule"])
}

func TestInvalidHashedSchedulesAre400NamingTheField(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	path := e.createJob("team-a", "my-job")
	e.deploy(path, `{"job_version":"v1"}`)
	tests := []struct {
		name, cron, why string
	}{
		{"a range beyond the minutes", "H(0-60) * * * *", `Minute field "H(0-60)": a range within 0-59, lowest first (0-60).`},
		{"a step wider than the hours", "0 H/25 * * *", `Hour field "H/25": a step between 1 and 24 after H/.`},
		{"a day of the month out of range", "0 0 H(0-10) * *", `Day-of-month field "H(0-10)": a range within 1-31, lowest first (0-10).`},
		{"something after H", "0 0 * * H5", `Day-of-week field "H5": one of H, H(lo-hi), H/step or H(lo-hi)/step.`},
		{"a month with a bad range", "0 0 * H(a-b) *", `Month field "H(a-b)": one of H, H(lo-hi), H/step or H(lo-hi)/step: "a-b" is no range lo-hi.`},
		{"six fields", "H * * * * *", "A schedule with H has five fields (minute hour day-of-month month day-of-week), this one 6."},
	}
	for _, tt := range tests {
		for _, method := range []string{"PATCH", "POST"} {
			r := e.do(method, path+"/deployments/release", `{"schedule":{"schedule_cron":"`+tt.cron+`"}}`)
			if method == "POST" {
				r = e.do(method, path+"/deployments", `{"schedule":{"schedule_cron":"`+tt.cron+`"}}`)
			}
			require.Equal(t, http.StatusBadRequest, r.status, "%s %s: %s", tt.name, method, r.body)
			body := r.vdkError(t)
			require.Contains(t, body["what"], "schedule_cron", tt.name)
			require.Contains(t, body["why"], tt.why, tt.name)
		}
		r := e.do("PUT", path, `{"job_name":"my-job","config":{"schedule":{"schedule_cron":"`+tt.cron+`"}}}`)
		require.Equal(t, http.StatusBadRequest, r.status, "%s PUT: %s", tt.name, r.body)
	}
	require.Equal(t, map[string]any{"schedule_cron": "15 10 * * *"}, e.deployment(path)["schedule"], "nothing changed")
}
