package httpapi_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// Attack (issue 22, item 7): two people edit one job at once (a console tab and a script);
// the later PUT silently overwrote the earlier one, contacts and schedule included. A PUT
// may now name the version it edits in If-Match; a stale one is refused with 412. VDK's
// clients send no If-Match and are unaffected.
func TestPutOfAJobTakesAnOptionalIfMatch(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const path = "/data-jobs/for-team/team-a/jobs/edited-job"
	r := e.do("POST", "/data-jobs/for-team/team-a/jobs", `{"job_name":"edited-job","description":"first"}`)
	require.Equal(t, http.StatusCreated, r.status, "%s", r.body)
	r = e.do("GET", path, "")
	read := r.header.Get("ETag")
	require.NotEmpty(t, read, "GET sends the job's ETag")

	r = e.do("PUT", path, `{"job_name":"edited-job","description":"second"}`, "If-Match", read)
	require.Equal(t, http.StatusOK, r.status, "the version read is the current one: %s", r.body)
	second := r.header.Get("ETag")
	require.NotEqual(t, read, second, "a description alone (no new generation) changes the ETag too")

	for name, ifMatch := range map[string]string{
		"the ETag read before the other edit": read,
		"a weak ETag of the current version":  "W/" + second,
		"an ETag of no version":               `"1.0000000000000000"`,
	} {
		r = e.do("PUT", path, `{"job_name":"edited-job","description":"lost update"}`, "If-Match", ifMatch)
		require.Equal(t, http.StatusPreconditionFailed, r.status, "%s: %s", name, r.body)
		require.Contains(t, r.vdkError(t)["why"], second, "the error names the current version")
	}
	var j struct {
		Description string `json:"description"`
	}
	e.do("GET", path, "").json(t, &j)
	require.Equal(t, "second", j.Description, "a refused PUT changed nothing")

	r = e.do("PUT", path, `{"job_name":"edited-job","description":"third"}`, "If-Match", `"x", `+second)
	require.Equal(t, http.StatusOK, r.status, "one of a list of ETags matches: %s", r.body)
	r = e.do("PUT", path, `{"job_name":"edited-job","description":"fourth"}`)
	require.Equal(t, http.StatusOK, r.status, "without If-Match, as VDK's clients send it: %s", r.body)
	r = e.do("PUT", path, `{"job_name":"edited-job","description":"fifth"}`, "If-Match", "*")
	require.Equal(t, http.StatusOK, r.status, "*: any version: %s", r.body)
}

func TestPutOfPropertiesTakesAnOptionalIfMatch(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.do("POST", "/data-jobs/for-team/team-a/jobs", `{"job_name":"props-job","description":"d"}`)
	require.Equal(t, http.StatusCreated, r.status, "%s", r.body)
	const path = "/data-jobs/for-team/team-a/jobs/props-job/deployments/release/properties"
	read := e.do("GET", path, "").header.Get("ETag")
	require.NotEmpty(t, read)

	r = e.do("PUT", path, `{"a": 1}`, "If-Match", read)
	require.Equal(t, http.StatusNoContent, r.status, "%s", r.body)
	r = e.do("PUT", path, `{"a": 2}`, "If-Match", read)
	require.Equal(t, http.StatusPreconditionFailed, r.status, "a stale ETag: %s", r.body)
	r.vdkError(t)
	r = e.do("GET", path, "")
	require.JSONEq(t, `{"a": 1}`, string(r.body), "a refused PUT changed nothing")
	r = e.do("PUT", path, `{"a": 3}`, "If-Match", r.header.Get("ETag"))
	require.Equal(t, http.StatusNoContent, r.status, "%s", r.body)
	r = e.do("PUT", path, `{"a": 4}`)
	require.Equal(t, http.StatusNoContent, r.status, "without If-Match: %s", r.body)

	r = e.do("PUT", "/data-jobs/for-team/team-a/jobs/no-such-job/deployments/release/properties", `{"a": 1}`, "If-Match", read)
	require.Equal(t, http.StatusNotFound, r.status, "a missing job is not found, whatever the precondition: %s", r.body)
}
