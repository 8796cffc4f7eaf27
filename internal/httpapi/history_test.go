package httpapi_test

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/httpapi"
)

type revisionBody struct {
	Revision   int    `json:"revision"`
	Kind       string `json:"kind"`
	Actor      string `json:"actor"`
	OpID       string `json:"op_id"`
	RollbackOf *int   `json:"rollback_of"`
	Diff       []struct {
		Field string          `json:"field"`
		From  json.RawMessage `json:"from"`
		To    json.RawMessage `json:"to"`
	} `json:"diff"`
	Spec struct {
		Deployment map[string]any `json:"deployment"`
	} `json:"spec"`
}

type revisionsBody struct {
	Revisions  []revisionBody `json:"revisions"`
	NextBefore *int           `json:"next_before"`
}

// diffOf is a revision's diff as field: from -> to.
func diffOf(r revisionBody) map[string]string {
	out := map[string]string{}
	for _, c := range r.Diff {
		out[c.Field] = string(c.From) + " -> " + string(c.To)
	}
	return out
}

func (e *authEnv) revisions(tok, jobPath, query string) revisionsBody {
	e.t.Helper()
	r := e.do("GET", jobPath+"/deployments/release/revisions"+query, "", bearer(tok)...)
	require.Equal(e.t, http.StatusOK, r.status, "%s", r.body)
	var out revisionsBody
	r.json(e.t, &out)
	return out
}

// A revision names the caller the token proves, not the deployed_by of the body or the
// X-Datajobs-User header (guards: a change attributed to whoever the client claims), with
// the op id of the request and the fields that changed.
func TestRevisionsRecordTheTokensCallerAndTheDiff(t *testing.T) {
	t.Parallel()
	e := newAuthEnv(t)
	a := "/data-jobs/for-team/team-a/jobs/job-of-a"
	e.deploy(a, `{"job_version":"v1","deployed_by":"mallory","schedule":{"schedule_cron":"0 * * * *"}}`,
		append(bearer(e.tokA), "X-Datajobs-User", "mallory", "X-OPID", "op-first-deploy")...)
	r := e.do("PATCH", a+"/deployments/release", `{"job_version":"v2","schedule":{"schedule_cron":"30 2 * * *"}}`,
		append(bearer(e.tokA), "X-OPID", "op-patch")...)
	require.Equal(t, http.StatusAccepted, r.status, "%s", r.body)
	r = e.do("PATCH", a+"/deployments/release", `{"job_version":"v2"}`, bearer(e.tokA)...)
	require.Equal(t, http.StatusAccepted, r.status, "an unchanged patch: %s", r.body)

	got := e.revisions(e.tokA, a, "")
	require.Len(t, got.Revisions, 3, "create, deploy, patch; the unchanged patch is no revision")
	patch, deploy, create := got.Revisions[0], got.Revisions[1], got.Revisions[2]
	require.Equal(t, []int{3, 2, 1}, []int{patch.Revision, deploy.Revision, create.Revision}, "newest first")
	require.Equal(t, []string{"deploy", "deploy", "create"}, []string{patch.Kind, deploy.Kind, create.Kind})
	for _, rv := range got.Revisions {
		require.Equal(t, "bot-a", rv.Actor, "revision %d: the token's username, whatever the body and header say", rv.Revision)
	}
	require.Equal(t, "op-first-deploy", deploy.OpID)
	require.Equal(t, "op-patch", patch.OpID)
	require.Equal(t, map[string]string{
		"deployment.job_version": `"v1" -> "v2"`,
		"deployment.schedule":    `"0 * * * *" -> "30 2 * * *"`,
	}, diffOf(patch))
	require.Equal(t, `null -> "v1"`, diffOf(deploy)["deployment.job_version"], "the first deployment adds every field")
	require.Equal(t, `null -> "job-of-a"`, diffOf(create)["job.name"])
	require.Equal(t, "v2", patch.Spec.Deployment["job_version"], "the spec after the change, in the API's spelling")

	// Paging: one at a time, keyset by revision number.
	page := e.revisions(e.tokA, a, "?page_size=2")
	require.Len(t, page.Revisions, 2)
	require.NotNil(t, page.NextBefore)
	rest := e.revisions(e.tokA, a, "?page_size=2&before="+strconv.Itoa(*page.NextBefore))
	require.Len(t, rest.Revisions, 1)
	require.Equal(t, 1, rest.Revisions[0].Revision)
	require.Nil(t, rest.NextBefore)
	r = e.do("GET", a+"/deployments/release/revisions?page_size=1000", "", bearer(e.tokA)...)
	require.Equal(t, http.StatusBadRequest, r.status)
	require.Contains(t, r.vdkError(t)["what"], "page_size")
	r = e.do("GET", a+"/deployments/release/revisions?before=latest", "", bearer(e.tokA)...)
	require.Equal(t, http.StatusBadRequest, r.status, "a before that is no integer")
	require.Equal(t, "Parameter before is not valid.", r.vdkError(t)["what"])
	require.Equal(t, "It must be an integer, but was latest.", r.vdkError(t)["why"])

	// A job change is a revision too; a move names the new team.
	r = e.do("PUT", a, `{"job_name":"job-of-a","description":"new words"}`, bearer(e.tokA)...)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	require.Equal(t, `"d" -> "new words"`, diffOf(e.revisions(e.tokA, a, "").Revisions[0])["job.description"])
}

// Rolling back deploys the revision's spec as an ordinary change with a revision of its
// own (guards: a rollback that leaves no trace, or restores only part of the spec).
func TestRollbackDeploysTheRevisionsSpec(t *testing.T) {
	t.Parallel()
	e := newAuthEnv(t)
	a := "/data-jobs/for-team/team-a/jobs/job-of-a"
	e.deploy(a, `{"job_version":"v1","schedule":{"schedule_cron":"0 * * * *"},"resources":{"memory_limit":1024},"retries":1,"time_zone":"Europe/Sofia"}`, bearer(e.tokA)...)
	r := e.do("PATCH", a+"/deployments/release", `{"job_version":"v2","enabled":false,"schedule":{"schedule_cron":"30 2 * * *"},"resources":{"memory_limit":2048},"retries":5,"time_zone":"UTC"}`, bearer(e.tokA)...)
	require.Equal(t, http.StatusAccepted, r.status, "%s", r.body)

	r = e.do("POST", a+"/deployments/release/revisions/2/rollback", "", append(bearer(e.tokA), "X-OPID", "op-rollback")...)
	require.Equal(t, http.StatusAccepted, r.status, "%s", r.body)
	r = e.do("GET", a+"/deployments/release", "", bearer(e.tokA)...)
	require.Equal(t, http.StatusOK, r.status)
	var d struct {
		JobVersion string `json:"job_version"`
		Enabled    bool   `json:"enabled"`
		DeployedBy string `json:"last_deployed_by"`
		Schedule   struct {
			Cron string `json:"schedule_cron"`
		} `json:"schedule"`
		Resources struct {
			MemoryLimit int `json:"memory_limit"`
		} `json:"resources"`
		Retries  int    `json:"retries"`
		TimeZone string `json:"time_zone"`
	}
	r.json(t, &d)
	require.Equal(t, "v1", d.JobVersion)
	require.True(t, d.Enabled)
	require.Equal(t, "0 * * * *", d.Schedule.Cron)
	require.Equal(t, 1024, d.Resources.MemoryLimit)
	require.Equal(t, 1, d.Retries, "the run policy is part of the spec")
	require.Equal(t, "Europe/Sofia", d.TimeZone)
	require.Equal(t, "bot-a", d.DeployedBy)

	rb := e.revisions(e.tokA, a, "").Revisions[0]
	require.Equal(t, 4, rb.Revision)
	require.Equal(t, "rollback", rb.Kind)
	require.NotNil(t, rb.RollbackOf)
	require.Equal(t, 2, *rb.RollbackOf)
	require.Equal(t, "op-rollback", rb.OpID)
	require.Equal(t, `"v2" -> "v1"`, diffOf(rb)["deployment.job_version"])
	require.Equal(t, `false -> true`, diffOf(rb)["deployment.enabled"])
	require.Equal(t, `5 -> 1`, diffOf(rb)["deployment.policy.retries"])

	// Revision 1 is the job's creation: nothing to deploy. Revision 99 does not exist.
	r = e.do("POST", a+"/deployments/release/revisions/1/rollback", "", bearer(e.tokA)...)
	require.Equal(t, http.StatusConflict, r.status, "%s", r.body)
	require.Contains(t, r.vdkError(t)["what"], "no deployment")
	r = e.do("POST", a+"/deployments/release/revisions/99/rollback", "", bearer(e.tokA)...)
	require.Equal(t, http.StatusNotFound, r.status, "%s", r.body)
	r = e.do("POST", a+"/deployments/release/revisions/x/rollback", "", bearer(e.tokA)...)
	require.Equal(t, http.StatusNotFound, r.status, "%s", r.body)
	require.Len(t, e.revisions(e.tokA, a, "").Revisions, 4, "a refused rollback is no revision")
}

type auditBody struct {
	Entries []struct {
		ID      int64     `json:"id"`
		At      time.Time `json:"created_at"`
		Actor   string    `json:"actor"`
		OpID    string    `json:"op_id"`
		Method  string    `json:"method"`
		Path    string    `json:"path"`
		JobName string    `json:"job_name"`
		Status  int       `json:"status"`
	} `json:"entries"`
	NextBefore *int64 `json:"next_before"`
}

// The team's audit log holds every write of a session, in order, with who and the
// status, and nothing of another team's session or of reads; it never holds a body
// (guards: a write that leaves no trace, a secret copied into the log, one team reading
// another's log).
func TestAuditLogHasEveryWriteOfASessionAndNothingOfAnotherTeam(t *testing.T) {
	t.Parallel()
	e := newAuthEnv(t)
	a := "/data-jobs/for-team/team-a/jobs/job-of-a"
	// newAuthEnv's writes: team-a created job-of-a; team-b made four writes of its own.
	type write struct{ method, path, body string }
	session := []write{
		{"POST", "/data-jobs/for-team/team-a/jobs", `{"job_name":"second-of-a","description":"d"}`},
		{"POST", a + "/deployments", `{"job_version":"v1"}`},
		{"PATCH", a + "/deployments/release", `{"enabled":false}`},
		{"PUT", a + "/deployments/release/properties", `{"password":"hunter2-secret"}`},
		{"POST", a + "/deployments/release/executions", `{}`},
		{"PUT", a + "/deployments/release/secrets", `{"token":"hunter2-secret"}`},
		{"PATCH", a + "/deployments/release", `{"python_version":"2.7"}`},
		{"POST", a + "/deployments/release/revisions/2/rollback", ``},
		{"DELETE", a + "/deployments/release", ``},
		{"DELETE", "/data-jobs/for-team/team-a/jobs/second-of-a", ``},
	}
	var want []string
	for i, w := range session {
		op := "op-" + strconv.Itoa(i)
		r := e.do(w.method, w.path, w.body, append(bearer(e.tokA), "X-OPID", op)...)
		want = append(want, strings.Join([]string{w.method, w.path, strconv.Itoa(r.status), op}, " "))
		// Reads in between are not writes.
		require.Equal(t, http.StatusOK, e.do("GET", a, "", bearer(e.tokA)...).status)
	}
	r := e.do("POST", "/data-jobs/for-team/team-a/jobs", `{"query":"{ jobs(pageNumber: 1, pageSize: 10) { content { jobName } } }"}`, bearer(e.tokA)...)
	require.Equal(t, http.StatusOK, r.status, "a GraphQL query by POST is a read: %s", r.body)
	// Another team's writes, and team-a's caller refused on team-b's job.
	e.do("PATCH", "/data-jobs/for-team/team-b/jobs/job-of-b/deployments/release", `{"enabled":false}`, bearer(e.tokB)...)
	require.Equal(t, http.StatusForbidden, e.do("DELETE", "/data-jobs/for-team/team-b/jobs/job-of-b", "", bearer(e.tokA)...).status)

	var got []string
	before := ""
	for {
		r := e.do("GET", "/data-jobs/for-team/team-a/audit?page_size=4"+before, "", bearer(e.tokA)...)
		require.Equal(t, http.StatusOK, r.status, "%s", r.body)
		require.NotContains(t, string(r.body), "hunter2", "no body reaches the audit log")
		require.NotContains(t, string(r.body), "job-of-b")
		var page auditBody
		r.json(t, &page)
		for _, en := range page.Entries {
			require.Equal(t, "bot-a", en.Actor)
			require.WithinDuration(t, time.Now(), en.At, time.Minute)
			got = append(got, strings.Join([]string{en.Method, en.Path, strconv.Itoa(en.Status), en.OpID}, " "))
		}
		if page.NextBefore == nil {
			break
		}
		before = "&before=" + strconv.FormatInt(*page.NextBefore, 10)
	}
	// Newest first; the oldest is newAuthEnv's creation of job-of-a.
	require.Len(t, got, len(session)+1, "%v", got)
	require.True(t, strings.HasPrefix(got[len(got)-1], "POST /data-jobs/for-team/team-a/jobs 201 "), got[len(got)-1])
	for i, w := range want {
		require.Equal(t, w, got[len(session)-1-i])
	}
	require.Regexp(t, ` 4\d\d op-6$`, want[6], "a refused write is in the log with its status")

	// team-b's log has its own writes and not team-a's; team-a cannot read it.
	r = e.do("GET", "/data-jobs/for-team/team-b/audit", "", bearer(e.tokB)...)
	require.Equal(t, http.StatusOK, r.status)
	var b auditBody
	r.json(t, &b)
	require.Len(t, b.Entries, 5, "%s", r.body) // create, deploy, properties, sources, the patch above
	require.NotContains(t, string(r.body), "job-of-a")
	require.Equal(t, http.StatusForbidden, e.do("GET", "/data-jobs/for-team/team-b/audit", "", bearer(e.tokA)...).status)
}

// The audit log is append-only in the database itself: an UPDATE, DELETE or TRUNCATE by
// the service's own role is refused (guards: a bug or an intruder with the service's
// credentials rewriting what happened).
func TestAuditLogRefusesUpdateAndDelete(t *testing.T) {
	t.Parallel()
	e := newAuthEnv(t)
	conn := e.storeConn(t)
	for _, q := range []string{
		`UPDATE audit_log SET actor = 'nobody'`,
		`DELETE FROM audit_log`,
		`TRUNCATE audit_log`,
	} {
		_, err := conn.Exec(t.Context(), q)
		require.ErrorContains(t, err, "append-only", q)
	}
	var n int
	require.NoError(t, conn.QueryRow(t.Context(), `SELECT count(*) FROM audit_log WHERE actor <> 'nobody'`).Scan(&n))
	require.Equal(t, 5, n, "newAuthEnv's five writes are all there, unchanged")
}

// Issue 41, M1: a write to a 64 KiB path reached the audit log whole (a 404 included),
// 124 KiB a request; this failed on the code before (404 and a new audit row). Such a
// path is refused before routing with 414 and a VDK error body, and leaves no audit row;
// a routed path at the bound leaves a row of bounded size.
func TestOverlongPathIsRefusedBeforeRoutingAndNotAudited(t *testing.T) {
	t.Parallel()
	e := newAuthEnv(t)
	conn := e.storeConn(t)
	count := func() (n int) {
		require.NoError(t, conn.QueryRow(t.Context(), `SELECT count(*) FROM audit_log`).Scan(&n))
		return n
	}
	before := count()
	huge := strings.Repeat("a", 64<<10)
	for _, method := range []string{"DELETE", "GET", "POST"} {
		r := e.do(method, "/data-jobs/for-team/team-a/jobs/"+huge, "", bearer(e.tokA)...)
		require.Equal(t, http.StatusRequestURITooLong, r.status, "%s: %.200s", method, r.body)
		require.Contains(t, r.vdkError(t)["what"], "65568 bytes", method)
	}
	require.Equal(t, before, count(), "a refused path writes no audit row")

	long := strings.Repeat("b", httpapi.MaxPathBytes-len("/data-jobs/for-team/team-a/jobs/"))
	r := e.do("DELETE", "/data-jobs/for-team/team-a/jobs/"+long, "", bearer(e.tokA)...)
	require.GreaterOrEqual(t, r.status, 400, "%.200s", r.body)
	require.Equal(t, before+1, count(), "a routed write is audited")
	var size int
	require.NoError(t, conn.QueryRow(t.Context(), `SELECT octet_length(a::text) FROM audit_log a ORDER BY id DESC LIMIT 1`).Scan(&size))
	require.Less(t, size, 2048, "the audit row's bytes are bounded")
}
