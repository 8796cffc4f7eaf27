package httpapi_test

import (
	"archive/zip"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/testzip"
)

// policyOf is the run policy fields of a deployment as GET shows them.
func policyOf(d map[string]any) map[string]any {
	out := map[string]any{}
	for _, k := range []string{"retries", "timeout_seconds", "concurrency_policy", "time_zone", "starting_deadline_seconds", "catch_up"} {
		out[k] = d[k]
	}
	return out
}

// TestRunPolicyRoundTripsAndAVDKRedeployKeepsIt guards the run policy extension: every
// field set is stored and shown (defaults filled in before), a PATCH changes only what it
// gives, and a VDK client's POST, which never sends these fields, does not reset them.
func TestRunPolicyRoundTripsAndAVDKRedeployKeepsIt(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	path := e.createJob("team-a", "my-job")
	e.deploy(path, `{"job_version":"v1"}`)
	require.Equal(t, map[string]any{
		"retries": 3.0, "timeout_seconds": 43200.0, "concurrency_policy": "Forbid", "time_zone": "UTC",
		"starting_deadline_seconds": 1800.0, "catch_up": 0.0,
	}, policyOf(e.deployment(path)), "the defaults are today's behaviour")

	e.deploy(path, `{"retries":0,"timeout_seconds":90,"concurrency_policy":"Allow","time_zone":"Europe/Sofia","starting_deadline_seconds":60,"catch_up":2}`)
	want := map[string]any{
		"retries": 0.0, "timeout_seconds": 90.0, "concurrency_policy": "Allow", "time_zone": "Europe/Sofia",
		"starting_deadline_seconds": 60.0, "catch_up": 2.0,
	}
	require.Equal(t, want, policyOf(e.deployment(path)))

	e.deploy(path, `{"job_version":"v2","mode":"release"}`) // what vdk deploy sends
	require.Equal(t, want, policyOf(e.deployment(path)), "a VDK redeploy keeps the policy")

	r := e.do("PATCH", path+"/deployments/release", `{"retries":5,"concurrency_policy":"Replace"}`)
	require.Equal(t, http.StatusAccepted, r.status, "%s", r.body)
	want["retries"], want["concurrency_policy"] = 5.0, "Replace"
	require.Equal(t, want, policyOf(e.deployment(path)))
	require.Equal(t, "v2", e.deployment(path)["job_version"])
}

// TestRunPolicyValidationFailuresAreClear400s guards each bound with a VDK error body
// naming the field, and that a refused request changes nothing.
func TestRunPolicyValidationFailuresAreClear400s(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	path := e.createJob("team-a", "my-job")
	e.deploy(path, `{"job_version":"v1"}`)
	before := e.deployment(path)
	tests := []struct{ name, body, field string }{
		{"negative retries", `{"retries":-1}`, "retries"},
		{"too many retries", `{"retries":11}`, "retries"},
		{"a negative timeout", `{"timeout_seconds":-5}`, "timeout_seconds"},
		{"a timeout over --max-execution-timeout", `{"timeout_seconds":86401}`, "timeout_seconds"},
		{"an unknown concurrency policy", `{"concurrency_policy":"forbid"}`, "concurrency_policy"},
		{"an unknown time zone", `{"time_zone":"Mars/Olympus_Mons"}`, "time_zone"},
		{"the local time zone", `{"time_zone":"Local"}`, "time_zone"},
		{"a starting deadline under 10 s", `{"starting_deadline_seconds":5}`, "starting_deadline_seconds"},
		{"a negative catch-up", `{"catch_up":-1}`, "catch_up"},
		{"a catch-up over the bound", `{"catch_up":11}`, "catch_up"},
		{"retries of the wrong type", `{"retries":"3"}`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := e.do("PATCH", path+"/deployments/release", tt.body)
			require.Equal(t, http.StatusBadRequest, r.status, "%s", r.body)
			body := r.vdkError(t)
			require.Contains(t, body["what"], tt.field)
		})
	}
	require.Equal(t, before, e.deployment(path))
}

// TestConcurrencyPolicyDecidesASecondManualStart guards the policy for runs started
// through the API, as the CronJob controller applies it to scheduled ones: Allow starts a
// second run beside the first, Replace starts it and asks for the first one's cancel
// (Forbid, the default, is TestSecondStartWhileOneIsUnderWayIs409).
func TestConcurrencyPolicyDecidesASecondManualStart(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	path := e.createJob("team-a", "my-job")
	e.deploy(path, `{"job_version":"v1","concurrency_policy":"Allow"}`)
	require.Equal(t, http.StatusAccepted, e.startExecution(path, `{}`).status)
	e.sql(`UPDATE data_job_execution SET status = 'running'`)
	require.Equal(t, http.StatusAccepted, e.startExecution(path, `{}`).status, "Allow runs two at once")
	e.sql(`UPDATE data_job_execution SET status = 'running'`)

	r := e.do("PATCH", path+"/deployments/release", `{"concurrency_policy":"Replace"}`)
	require.Equal(t, http.StatusAccepted, r.status, "%s", r.body)
	r = e.startExecution(path, `{}`)
	require.Equal(t, http.StatusAccepted, r.status, "%s", r.body)
	var started map[string]any
	r.json(t, &started)
	var replaced, kept int
	e.query(`SELECT count(*) FILTER (WHERE cancel_requested_at IS NOT NULL AND cancel_message LIKE '%Replace%'),
		count(*) FILTER (WHERE cancel_requested_at IS NULL AND id = $1) FROM data_job_execution`, []any{started["id"]}, &replaced, &kept)
	require.Equal(t, 2, replaced, "both running runs are asked to stop")
	require.Equal(t, 1, kept, "the new run is not")
}

// jobWithConfig is a job directory as vdk deploy zips it, with config.ini ini.
func jobWithConfig(t *testing.T, ini string) string {
	t.Helper()
	return makeZip(t, time.Unix(1e9, 0), zip.Deflate,
		testzip.File{Name: "my-job/config.ini", Body: ini},
		testzip.File{Name: "my-job/10_step.py", Body: "def run(job_input):\n    pass\n"})
}

// TestConfigINISetsTheRunPolicyTheVDKWay guards issue 48, item 2: vdkcli cannot send the
// policy fields, so the [job] section of the uploaded config.ini sets them when its
// version is deployed; a request's own fields win, a version whose config.ini sets none
// keeps what is stored, and a wrong key is refused at upload, naming config.ini.
func TestConfigINISetsTheRunPolicyTheVDKWay(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	path := e.createJob("team-a", "my-job")
	v1 := e.version(path, jobWithConfig(t, "[owner]\nteam = team-a\n\n[job]\nschedule_cron = 7 * * * *\nretries = 0\ntimeout_seconds = 600\ntime_zone = Europe/Sofia\n"))
	e.deploy(path, `{"job_version":"`+v1+`","mode":"release"}`) // what vdk deploy sends
	want := map[string]any{
		"retries": 0.0, "timeout_seconds": 600.0, "concurrency_policy": "Forbid", "time_zone": "Europe/Sofia",
		"starting_deadline_seconds": 1800.0, "catch_up": 0.0,
	}
	require.Equal(t, want, policyOf(e.deployment(path)))

	e.deploy(path, `{"job_version":"`+v1+`","retries":2}`)
	want["retries"] = 2.0
	require.Equal(t, want, policyOf(e.deployment(path)), "the request's own field wins")

	v2 := e.version(path, jobWithConfig(t, "[owner]\nteam = team-a\n\n[job]\nschedule_cron = 7 * * * *\n"))
	e.deploy(path, `{"job_version":"`+v2+`"}`)
	require.Equal(t, want, policyOf(e.deployment(path)), "a config.ini without the keys keeps the stored policy")

	for _, ini := range []string{"[job]\nretries = 11\n", "[job]\ntimeout_seconds = ten\n", "[job]\ntime_zone = Mars/Olympus_Mons\n"} {
		r := e.upload(path, jobWithConfig(t, ini))
		require.Equal(t, http.StatusBadRequest, r.status, "%s: %s", ini, r.body)
		require.Contains(t, r.vdkError(t)["what"], "config.ini", ini)
	}
	require.Equal(t, want, policyOf(e.deployment(path)), "a refused upload changes nothing")
}
