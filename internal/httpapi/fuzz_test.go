package httpapi_test

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// fuzzTargets are the endpoints whose bodies the fuzzer sends, by op % len.
var fuzzTargets = []struct{ method, path string }{
	{"POST", "/data-jobs/for-team/team-a/jobs"},
	{"PUT", "/data-jobs/for-team/team-a/jobs/fuzz-job"},
	{"POST", "/data-jobs/for-team/team-a/jobs/fuzz-job/deployments"},
	{"PATCH", "/data-jobs/for-team/team-a/jobs/fuzz-job/deployments/release"},
	{"PUT", "/data-jobs/for-team/team-a/jobs/fuzz-job/deployments/release/properties"},
	{"POST", "/data-jobs/for-team/team-a/jobs/no-deploy/deployments"},
}

// FuzzRequestBodies sends arbitrary bodies to the endpoints that decode JSON, through
// HTTP to a real database: whatever the body, the answer is never a 5xx (a panic would be
// one, through the recovery middleware) and every error has VDK's body.
func FuzzRequestBodies(f *testing.F) {
	for op, body := range []string{
		`{"job_name":"new-job","team":"team-a","description":"d","config":{"schedule":{"schedule_cron":"0 * * * *"},"contacts":{"notified_on_job_deploy":["a@b.c"]},"generate_keytab":false,"notification_delay_period_minutes":10}}`,
		`{"job_name":"fuzz-job","config":{"schedule":{"schedule_cron":"@daily"},"db_default_type":"x"}}`,
		`{"job_version":"v2","python_version":"3.9","vdk_version":"1.0","enabled":false,"schedule":{"schedule_cron":"*/5 * * * *"},"resources":{"cpu_request":0.5,"cpu_limit":"1500m","memory_request":256,"memory_limit":"1Gi"}}`,
		`{"enabled":true,"resources":{"memory_limit":"2Gi"}}`,
		`{"a":{"b":[1,2.5,"x",null,true]}}`,
		`{"job_version":"v1"}`,
	} {
		f.Add(uint8(op), []byte(body))
	}
	e := newEnv(f)
	e.createJob("team-a", "fuzz-job")
	e.createJob("team-a", "no-deploy")
	e.deploy("/data-jobs/for-team/team-a/jobs/fuzz-job", `{"job_version":"v1"}`)

	f.Fuzz(func(t *testing.T, op uint8, body []byte) {
		target := fuzzTargets[int(op)%len(fuzzTargets)]
		r := e.with(t).do(target.method, target.path, string(body))
		require.Less(t, r.status, 500, "%s %s %q: %s", target.method, target.path, body, r.body)
		if r.status >= 400 {
			r.vdkError(t)
		}
	})
}

// with returns e for another test (a fuzz iteration has its own *testing.T).
func (e *env) with(t testing.TB) *env {
	c := *e
	c.t = t
	return &c
}
