package httpapi_test

import (
	"fmt"
	"net"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestPropertiesAreReplacedWholeAndNeedTheJob(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	path := e.createJob("team-a", "my-job")
	props := path + "/deployments/release/properties"

	r := e.do("GET", props, "")
	require.Equal(t, http.StatusOK, r.status)
	require.JSONEq(t, `{}`, string(r.body))

	require.Equal(t, http.StatusNoContent, e.do("PUT", props, `{"a":1,"b":{"c":[true,null]}}`).status)
	require.JSONEq(t, `{"a":1,"b":{"c":[true,null]}}`, string(e.do("GET", props, "").body))
	require.Equal(t, http.StatusNoContent, e.do("PUT", props, `{"z":"new"}`).status)
	require.JSONEq(t, `{"z":"new"}`, string(e.do("GET", props, "").body))
	require.Equal(t, int64(1), e.generation("my-job"), "properties do not affect the CronJob")

	for _, body := range []string{`[]`, `"x"`, `null`, `{`, ``, `{"a":"\u0000"}`} {
		r := e.do("PUT", props, body)
		require.Equal(t, http.StatusBadRequest, r.status, "%q: %s", body, r.body)
		r.vdkError(t)
	}
	require.JSONEq(t, `{"z":"new"}`, string(e.do("GET", props, "").body))

	for _, m := range []string{"GET", "PUT"} {
		r := e.do(m, "/data-jobs/for-team/team-a/jobs/no-such-job/deployments/release/properties", `{}`)
		require.Equal(t, http.StatusNotFound, r.status)
		r.vdkError(t)
	}
}

func TestLaterFeaturesAnswer501(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.do("GET", "/data-jobs/for-team/team-a/jobs", "")
	require.Equal(t, http.StatusNotImplemented, r.status, r.body)
	require.Contains(t, r.vdkError(t)["what"], "not available yet")
}

func TestUnknownPathsAndMethodsAnswerWithAVDKBody(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.do("GET", "/data-jobs/nothing-here", "")
	require.Equal(t, http.StatusNotFound, r.status)
	r.vdkError(t)
	r = e.do("PATCH", "/data-jobs/for-team/team-a/jobs/my-job", "")
	require.Equal(t, http.StatusMethodNotAllowed, r.status)
	require.Contains(t, r.header.Get("Allow"), "GET")
	r.vdkError(t)
}

func TestOpIDIsEchoedOrGeneratedAndLogged(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.do("GET", "/data-jobs/for-team/team-a/jobs/no-such-job", "", "X-OPID", "my-op-42")
	require.Equal(t, "my-op-42", r.header.Get("X-OPID"))
	r = e.do("GET", "/data-jobs/for-team/team-a/info", "")
	generated := r.header.Get("X-OPID")
	require.NotEmpty(t, generated)
	r = e.do("GET", "/data-jobs/for-team/team-a/info", "", "X-OPID", "has space")
	require.NotEqual(t, "has space", r.header.Get("X-OPID"))
	require.NotEmpty(t, r.header.Get("X-OPID"))

	byOp := map[string]map[string]any{}
	for _, l := range e.logs.lines(t) {
		if l["msg"] == "http_request" {
			byOp[fmt.Sprint(l["op_id"])] = l
		}
	}
	require.Equal(t, "GET", byOp["my-op-42"]["method"])
	require.Equal(t, "GET /data-jobs/for-team/{team}/jobs/{job}", byOp["my-op-42"]["pattern"])
	require.EqualValues(t, 404, byOp["my-op-42"]["status"])
	require.Contains(t, byOp["my-op-42"], "duration")
	require.EqualValues(t, 200, byOp[generated]["status"])
}

func TestAPanicAnswers500AndTheServerGoesOn(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(o *options) {
		o.jobsQuery = http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic("boom") })
	})
	r := e.do("GET", "/data-jobs/for-team/team-a/jobs", "", "X-OPID", "op-panic")
	require.Equal(t, http.StatusInternalServerError, r.status)
	require.Equal(t, "op-panic", r.header.Get("X-OPID"))
	require.NotContains(t, string(r.body), "boom")
	r.vdkError(t)

	require.Equal(t, http.StatusOK, e.do("GET", "/data-jobs/for-team/team-a/info", "").status)
	var panicked bool
	for _, l := range e.logs.lines(t) {
		if l["msg"] == "http_handler_panic" {
			panicked = true
			require.Equal(t, "op-panic", l["op_id"])
			require.Equal(t, "boom", l["panic"])
		}
	}
	require.True(t, panicked)
}

// Every read and write with the database down is a 503 naming it, not a 500.
func TestDatabaseDownAnswers503(t *testing.T) {
	t.Parallel()
	// A port nothing listens on: connections are refused, as when PostgreSQL is down.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	e := newEnv(t, func(o *options) { o.storeURL = "postgres://nobody@" + addr + "/datajobs?connect_timeout=2" })

	for _, tt := range []struct{ method, path, body string }{
		{"GET", "/data-jobs/for-team/team-a/jobs/my-job", ""},
		{"POST", "/data-jobs/for-team/team-a/jobs", `{"job_name":"my-job"}`},
		{"POST", "/data-jobs/for-team/team-a/jobs/my-job/deployments", `{"job_version":"v1"}`},
		{"GET", "/data-jobs/for-team/team-a/jobs/my-job/deployments/release", ""},
		{"PUT", "/data-jobs/for-team/team-a/jobs/my-job/deployments/release/properties", `{}`},
		// Every read: the triggers' and pipelines' lists answered 500, their reads did not
		// translate a refused connection.
		{"GET", "/data-jobs/for-team/team-a/audit", ""},
		{"GET", "/data-jobs/for-team/team-a/export", ""},
		{"GET", "/data-jobs/for-team/team-a/jobs/my-job/deployments", ""},
		{"GET", "/data-jobs/for-team/team-a/jobs/my-job/deployments/release/backfills", ""},
		{"GET", "/data-jobs/for-team/team-a/jobs/my-job/deployments/release/backfills/1", ""},
		{"GET", "/data-jobs/for-team/team-a/jobs/my-job/deployments/release/executions", ""},
		{"GET", "/data-jobs/for-team/team-a/jobs/my-job/deployments/release/revisions", ""},
		{"GET", "/data-jobs/for-team/team-a/jobs/my-job/deployments/release/secrets", ""},
		{"GET", "/data-jobs/for-team/team-a/jobs/my-job/executions", ""},
		{"GET", "/data-jobs/for-team/team-a/jobs/my-job/executions/my-job-1", ""},
		{"GET", "/data-jobs/for-team/team-a/jobs/my-job/executions/my-job-1/logs", ""},
		{"GET", "/data-jobs/for-team/team-a/jobs/my-job/keytab", ""},
		{"GET", "/data-jobs/for-team/team-a/jobs/my-job/notifications", ""},
		{"GET", "/data-jobs/for-team/team-a/jobs/my-job/sources", ""},
		{"GET", "/data-jobs/for-team/team-a/pipelines", ""},
		{"GET", "/data-jobs/for-team/team-a/pipelines/my-pipeline", ""},
		{"GET", "/data-jobs/for-team/team-a/pipelines/my-pipeline/runs", ""},
		{"GET", "/data-jobs/for-team/team-a/pipelines/my-pipeline/runs/1", ""},
		{"GET", "/data-jobs/for-team/team-a/triggers", ""},
		{"GET", "/data-jobs/for-team/team-a/triggers/on-drop", ""},
		{"GET", "/data-jobs/for-team/team-a/triggers/on-drop/events", ""},
		{"GET", "/data-jobs/for-team/team-a/webhooks", ""},
		{"GET", "/data-jobs/for-team/team-a/webhooks/00000000-0000-0000-0000-000000000001", ""},
		{"GET", "/data-jobs/profiles", ""},
		{"GET", "/data-jobs/profiles/big", ""},
		{"GET", "/data-jobs/profiles/big/revisions", ""},
		{"GET", "/data-jobs/targets", ""},
		{"GET", "/data-jobs/targets/default", ""},
		{"GET", "/data-jobs/teams/team-a/oauth-credentials", ""},
		{"GET", "/data-jobs/teams/team-a/oauth-credentials/client-id", ""},
	} {
		r := e.do(tt.method, tt.path, tt.body)
		if !assert.Equal(t, http.StatusServiceUnavailable, r.status, "%s %s: %s", tt.method, tt.path, r.body) {
			continue
		}
		assert.Contains(t, r.vdkError(t)["what"], "database", "%s %s", tt.method, tt.path)
	}
}
