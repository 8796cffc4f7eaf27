package httpapi_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestInfo(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.do("GET", "/data-jobs/for-team/any-team/info", "")
	require.Equal(t, http.StatusOK, r.status)
	require.JSONEq(t, `{"api_version":"datajobs/test","supported_python_versions":["3.9","3.11"]}`, string(r.body))
}

func TestCreateJobAnswers201WithLocationAndTheJobReadsBack(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.do("POST", "/data-jobs/for-team/team-a/jobs?name=my-job", `{
		"job_name": "my-job", "description": "counts things", "unknown_field": {"x": 1},
		"config": {"schedule": {"schedule_cron": "@hourly"}, "db_default_type": "postgres",
			"contacts": {"notified_on_job_success": ["a@example.com"]},
			"generate_keytab": false, "notification_delay_period_minutes": 30}}`)
	require.Equal(t, http.StatusCreated, r.status, "%s", r.body)
	require.Equal(t, "/data-jobs/for-team/team-a/jobs/my-job", r.header.Get("Location"))

	r = e.do("GET", "/data-jobs/for-team/team-a/jobs/my-job", "")
	require.Equal(t, http.StatusOK, r.status)
	require.JSONEq(t, `{"job_name":"my-job","description":"counts things","team":"team-a",
		"config":{"db_default_type":"postgres",
			"contacts":{"notified_on_job_failure_user_error":[],"notified_on_job_failure_platform_error":[],
				"notified_on_job_success":["a@example.com"],"notified_on_job_deploy":[]},
			"schedule":{"schedule_cron":"@hourly"},"generate_keytab":false,
			"enable_execution_notifications":true,"notification_delay_period_minutes":30}}`, string(r.body))
}

func TestCreateJobRejectsBadInputWithAVDKBody(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.createJob("team-a", "taken-job")
	tests := []struct {
		name   string
		path   string
		body   string
		status int
	}{
		{"a name starting with a digit", "/data-jobs/for-team/team-a/jobs", `{"job_name":"1_job_with_starting_number"}`, 400},
		{"a name with capitals", "/data-jobs/for-team/team-a/jobs", `{"job_name":"NameWithCapitalLetters"}`, 400},
		{"a name with spaces", "/data-jobs/for-team/team-a/jobs", `{"job_name":"job name with spaces"}`, 400},
		{"a name with underscores", "/data-jobs/for-team/team-a/jobs", `{"job_name":"job_name_with_underscore"}`, 400},
		{"a name of 51 characters", "/data-jobs/for-team/team-a/jobs", `{"job_name":"` + strings.Repeat("a", 51) + `"}`, 400},
		{"a name of 5 characters", "/data-jobs/for-team/team-a/jobs", `{"job_name":"aaaaa"}`, 400},
		{"a name ending with a dash (not a Kubernetes name)", "/data-jobs/for-team/team-a/jobs", `{"job_name":"my-job-"}`, 400},
		{"a name of 6 characters ending with a dash", "/data-jobs/for-team/team-a/jobs", `{"job_name":"abcde-"}`, 400},
		{"job-", "/data-jobs/for-team/team-a/jobs", `{"job_name":"job-"}`, 400},
		{"a schedule over 512 bytes", "/data-jobs/for-team/team-a/jobs", `{"job_name":"my-job","config":{"schedule":{"schedule_cron":"0` + strings.Repeat(",0", 300) + ` * * * *"}}}`, 400},
		{"no name", "/data-jobs/for-team/team-a/jobs", `{}`, 400},
		{"an empty body", "/data-jobs/for-team/team-a/jobs", ``, 400},
		{"a body team other than the path's", "/data-jobs/for-team/team-a/jobs", `{"job_name":"my-job","team":"team-b"}`, 400},
		{"a path team that is not a DNS label", "/data-jobs/for-team/Team_A/jobs", `{"job_name":"my-job"}`, 400},
		{"a path team over 63 characters", "/data-jobs/for-team/" + strings.Repeat("t", 64) + "/jobs", `{"job_name":"my-job"}`, 400},
		{"a ?name= other than the body's", "/data-jobs/for-team/team-a/jobs?name=other-job", `{"job_name":"my-job"}`, 400},
		{"a bad cron", "/data-jobs/for-team/team-a/jobs", `{"job_name":"my-job","config":{"schedule":{"schedule_cron":"* * *"}}}`, 400},
		{"a cron with a time zone", "/data-jobs/for-team/team-a/jobs", `{"job_name":"my-job","config":{"schedule":{"schedule_cron":"TZ=UTC 0 * * * *"}}}`, 400},
		{"an @every macro", "/data-jobs/for-team/team-a/jobs", `{"job_name":"my-job","config":{"schedule":{"schedule_cron":"@every 1m"}}}`, 400},
		{"a negative notification delay", "/data-jobs/for-team/team-a/jobs", `{"job_name":"my-job","config":{"notification_delay_period_minutes":-1}}`, 400},
		{"a notification delay over an int32", "/data-jobs/for-team/team-a/jobs", `{"job_name":"my-job","config":{"notification_delay_period_minutes":99999999999}}`, 400},
		{"a NUL in the description", "/data-jobs/for-team/team-a/jobs", `{"job_name":"my-job","description":"a\u0000b"}`, 400},
		{"malformed JSON", "/data-jobs/for-team/team-a/jobs", `{"job_name":`, 400},
		{"a JSON array", "/data-jobs/for-team/team-a/jobs", `[]`, 400},
		{"two JSON values", "/data-jobs/for-team/team-a/jobs", `{"job_name":"my-job"} {}`, 400},
		{"a wrong type", "/data-jobs/for-team/team-a/jobs", `{"job_name":"my-job","config":{"generate_keytab":"yes"}}`, 400},
		{"a body over 1 MiB", "/data-jobs/for-team/team-a/jobs", `{"job_name":"my-job","description":"` + strings.Repeat("x", 1<<20) + `"}`, 413},
		{"a name that exists", "/data-jobs/for-team/team-a/jobs", `{"job_name":"taken-job"}`, 409},
		{"a name that exists in another team", "/data-jobs/for-team/team-b/jobs", `{"job_name":"taken-job"}`, 409},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := e.do("POST", tt.path, tt.body)
			require.Equal(t, tt.status, r.status, "%s", r.body)
			r.vdkError(t)
		})
	}
	// Nothing was persisted by any failed request.
	require.Equal(t, http.StatusNotFound, e.do("GET", "/data-jobs/for-team/team-a/jobs/my-job", "").status)
	require.Equal(t, http.StatusNotFound, e.do("GET", "/data-jobs/for-team/team-b/jobs/taken-job", "").status)
}

func TestAJobNameEndingWithADashNamesTheKubernetesRule(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.do("POST", "/data-jobs/for-team/team-a/jobs", `{"job_name":"my-job-"}`)
	require.Equal(t, http.StatusBadRequest, r.status, "%s", r.body)
	body := r.vdkError(t)
	require.Contains(t, body["what"], "job_name")
	require.Contains(t, body["why"], "must consist of lower case alphanumeric characters or '-'", "Kubernetes's own message")
}

func TestSchedulesAreStoredTrimmed(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.do("POST", "/data-jobs/for-team/team-a/jobs", `{"job_name":"my-job","config":{"schedule":{"schedule_cron":"  15 10 * * *\t"}}}`)
	require.Equal(t, http.StatusCreated, r.status, "%s", r.body)
	var j struct {
		Config struct {
			Schedule struct {
				Cron string `json:"schedule_cron"`
			} `json:"schedule"`
		} `json:"config"`
	}
	e.do("GET", "/data-jobs/for-team/team-a/jobs/my-job", "").json(t, &j)
	require.Equal(t, "15 10 * * *", j.Config.Schedule.Cron)

	r = e.do("PUT", "/data-jobs/for-team/team-a/jobs/my-job", `{"config":{"schedule":{"schedule_cron":" @daily "}}}`)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	e.do("GET", "/data-jobs/for-team/team-a/jobs/my-job", "").json(t, &j)
	require.Equal(t, "@daily", j.Config.Schedule.Cron)

	path := "/data-jobs/for-team/team-a/jobs/my-job"
	e.deploy(path, `{"job_version":"v1","schedule":{"schedule_cron":"   5 4 * * *"}}`)
	require.Equal(t, map[string]any{"schedule_cron": "5 4 * * *"}, e.deployment(path)["schedule"])
	r = e.do("PATCH", path+"/deployments/release", `{"schedule":{"schedule_cron":"0 1 * * * "}}`)
	require.Equal(t, http.StatusAccepted, r.status, "%s", r.body)
	require.Equal(t, map[string]any{"schedule_cron": "0 1 * * *"}, e.deployment(path)["schedule"])
}

func TestJobNamesAtTheBoundsAreAccepted(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, name := range []string{strings.Repeat("a", 6), strings.Repeat("a", 45), strings.Repeat("a", 50), "job-name-with-dash"} {
		e.createJob("team-a", name)
	}
}

func TestMissingJobsAndOtherTeamsAnswer404WithABody(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.createJob("team-a", "my-job")
	for _, tt := range []struct{ method, path, body string }{
		{"GET", "/data-jobs/for-team/team-a/jobs/no-such-job", ""},
		{"GET", "/data-jobs/for-team/team-b/jobs/my-job", ""},
		{"PUT", "/data-jobs/for-team/team-b/jobs/my-job", `{"job_name":"my-job"}`},
		{"DELETE", "/data-jobs/for-team/team-b/jobs/my-job", ""},
		{"PUT", "/data-jobs/for-team/team-b/jobs/my-job/team/team-c", ""},
		{"GET", "/data-jobs/for-team/team-b/jobs/my-job/deployments", ""},
		{"POST", "/data-jobs/for-team/team-b/jobs/my-job/deployments", `{"job_version":"v1"}`},
		{"GET", "/data-jobs/for-team/team-b/jobs/my-job/deployments/release", ""},
		{"PATCH", "/data-jobs/for-team/team-b/jobs/my-job/deployments/release", `{"enabled":false}`},
		{"DELETE", "/data-jobs/for-team/team-b/jobs/my-job/deployments/release", ""},
		{"GET", "/data-jobs/for-team/team-b/jobs/my-job/deployments/release/properties", ""},
		{"PUT", "/data-jobs/for-team/team-b/jobs/my-job/deployments/release/properties", `{}`},
		{"GET", "/data-jobs/for-team/team-a/jobs/Not%20A%20Name", ""},
		{"GET", "/data-jobs/for-team/team-a/jobs/bad%00name", ""},
	} {
		r := e.do(tt.method, tt.path, tt.body)
		require.Equal(t, http.StatusNotFound, r.status, "%s %s: %s", tt.method, tt.path, r.body)
		r.vdkError(t)
	}
	// The job was not touched.
	r := e.do("GET", "/data-jobs/for-team/team-a/jobs/my-job", "")
	require.Equal(t, http.StatusOK, r.status)
	require.Equal(t, int64(1), e.generation("my-job"))
}

func TestUpdateJobReplacesTheConfiguration(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	path := e.createJob("team-a", "my-job")

	r := e.do("PUT", path, `{"job_name":"my-job","team":"team-a","description":"new","config":{"schedule":{"schedule_cron":"0 1 * * *"}}}`)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	r = e.do("GET", path, "")
	require.JSONEq(t, `{"job_name":"my-job","description":"new","team":"team-a",
		"config":{"db_default_type":"",
			"contacts":{"notified_on_job_failure_user_error":[],"notified_on_job_failure_platform_error":[],
				"notified_on_job_success":[],"notified_on_job_deploy":[]},
			"schedule":{"schedule_cron":"0 1 * * *"},"generate_keytab":true,
			"enable_execution_notifications":true,"notification_delay_period_minutes":240}}`, string(r.body))

	for _, tt := range []struct{ name, body string }{
		{"another job name", `{"job_name":"other-job"}`},
		{"another team (use the team API)", `{"job_name":"my-job","team":"team-b"}`},
		{"a bad cron", `{"job_name":"my-job","config":{"schedule":{"schedule_cron":"61 * * * *"}}}`},
		{"malformed JSON", `{`},
	} {
		r := e.do("PUT", path, tt.body)
		require.Equal(t, http.StatusBadRequest, r.status, "%s: %s", tt.name, r.body)
		r.vdkError(t)
	}
	r = e.do("GET", path, "")
	require.Contains(t, string(r.body), `"description":"new"`)
}

func TestUpdateJobBumpsTheGenerationOnlyForRenderedChanges(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	path := e.createJob("team-a", "my-job")
	base := `"job_name":"my-job","config":{"schedule":{"schedule_cron":"15 10 * * *"},"contacts":{"notified_on_job_deploy":["a@example.com"]}}`
	require.Equal(t, http.StatusOK, e.do("PUT", path, `{"description":"only the description",`+base+`}`).status)
	require.Equal(t, int64(1), e.generation("my-job"))
	require.Equal(t, http.StatusOK, e.do("PUT", path, `{"job_name":"my-job","config":{"schedule":{"schedule_cron":"0 * * * *"}}}`).status)
	require.Equal(t, int64(2), e.generation("my-job"))
}

func TestDeleteJobThenRecreateGetsANewUID(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	path := e.createJob("team-a", "my-job")
	first, err := e.store.GetJob(t.Context(), "team-a", "my-job")
	require.NoError(t, err)

	r := e.do("DELETE", path, "")
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	r = e.do("GET", path, "")
	require.Equal(t, http.StatusNotFound, r.status)
	r.vdkError(t)
	r = e.do("DELETE", path, "")
	require.Equal(t, http.StatusNotFound, r.status)
	r.vdkError(t)

	e.createJob("team-b", "my-job")
	second, err := e.store.GetJob(t.Context(), "team-b", "my-job")
	require.NoError(t, err)
	require.NotEqual(t, first.UID, second.UID)
}

func TestChangeTeamMovesTheJob(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	path := e.createJob("team-a", "my-job")

	r := e.do("PUT", path+"/team/team-a", "")
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	require.Equal(t, int64(1), e.generation("my-job"), "a move to the same team changes nothing")

	r = e.do("PUT", path+"/team/Bad_Team", "")
	require.Equal(t, http.StatusBadRequest, r.status)
	r.vdkError(t)

	r = e.do("PUT", path+"/team/team-b", "")
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	require.Equal(t, int64(2), e.generation("my-job"))
	require.Equal(t, http.StatusNotFound, e.do("GET", path, "").status)
	r = e.do("GET", "/data-jobs/for-team/team-b/jobs/my-job", "")
	require.Equal(t, http.StatusOK, r.status)
	require.Contains(t, string(r.body), `"team":"team-b"`)

	r = e.do("GET", path+"/team/team-b", "")
	require.Equal(t, http.StatusMethodNotAllowed, r.status)
	r.vdkError(t)
}
