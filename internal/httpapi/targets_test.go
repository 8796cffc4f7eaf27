package httpapi_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/store"
)

// servedNamespace is the namespace of the default target in these tests: serve's
// --namespace, which the synchronizer writes at its first start (store.EnsureDefaultTarget).
const servedNamespace = "datajobs"

// withDefaultTarget writes the default target as serve's first start does.
func (e *env) withDefaultTarget() {
	e.t.Helper()
	_, err := e.store.EnsureDefaultTarget(e.t.Context(), servedNamespace)
	require.NoError(e.t, err)
}

// putTarget PUTs a target's body and requires want.
func (e *env) putTarget(name, body string, want int) map[string]any {
	e.t.Helper()
	r := e.do("PUT", "/data-jobs/targets/"+name, body)
	require.Equal(e.t, want, r.status, "PUT %s %s: %s", name, body, r.body)
	var got map[string]any
	r.json(e.t, &got)
	return got
}

// TestTargetsAreValidatedNamingTheField guards the targets' input: each body Kubernetes
// or the API would refuse is a 400 whose error names the field, and nothing is stored.
func TestTargetsAreValidatedNamingTheField(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tests := []struct{ name, path, body, field string }{
		{"a namespace that is no DNS label", "bad", `{"namespace":"Team_NS","cluster":"local"}`, "namespace"},
		{"no namespace", "bad", `{"cluster":"local"}`, "namespace"},
		{"a cluster that is neither local nor a Secret", "bad", `{"namespace":"ns-a","cluster":"eu"}`, "cluster"},
		{"no cluster", "bad", `{"namespace":"ns-a"}`, "cluster"},
		{"a cluster of no Secret", "bad", `{"namespace":"ns-a","cluster":{"kubeconfig_secret":""}}`, "cluster.kubeconfig_secret"},
		{"a Secret name Kubernetes refuses", "bad", `{"namespace":"ns-a","cluster":{"kubeconfig_secret":"EU Cluster"}}`, "cluster.kubeconfig_secret"},
		{"every team beside a team", "bad", `{"namespace":"ns-a","cluster":"local","teams":["*","team-a"]}`, "teams[0]"},
		{"a default team that is no team", "bad", `{"namespace":"ns-a","cluster":"local","default_for":["Team A"]}`, "default_for[0]"},
		{"a default team twice", "bad", `{"namespace":"ns-a","cluster":"local","default_for":["team-a","team-a"]}`, "default_for"},
		{"a body name that is not the path's", "bad", `{"name":"other","namespace":"ns-a","cluster":"local"}`, "name"},
		{"a path name that is no DNS label", "Bad_Name", `{"namespace":"ns-a","cluster":"local"}`, "name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := e.do("PUT", "/data-jobs/targets/"+tt.path, tt.body)
			require.Equal(t, http.StatusBadRequest, r.status, "%s", r.body)
			assert.Equal(t, "Parameter "+tt.field+" is not valid.", r.vdkError(t)["what"])
		})
	}
	for _, unknown := range []string{
		`{"namespace":"ns-a","cluster":"local","namespaces":["ns-b"]}`,
		`{"namespace":"ns-a","cluster":{"kubeconfig_secret":"eu","namespaces":["ns-b"]}}`,
	} {
		r := e.do("PUT", "/data-jobs/targets/bad", unknown)
		require.Equal(t, http.StatusBadRequest, r.status, "an unknown field is refused: %s", r.body)
		assert.Contains(t, r.vdkError(t)["why"], `unknown field "namespaces"`)
	}
	r := e.do("GET", "/data-jobs/targets/bad", "")
	require.Equal(t, http.StatusNotFound, r.status, "nothing is stored: %s", r.body)
	assert.Contains(t, r.vdkError(t)["what"], `"bad"`)
}

// TestATargetIsCreatedReplacedListedAndDeleted guards the targets' contract: PUT answers
// 201 for a new target and 200 for a replaced one, each with the target as GET answers it
// (the cluster as it was sent), the list holds it beside the default, and DELETE answers
// 204, then 404.
func TestATargetIsCreatedReplacedListedAndDeleted(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.withDefaultTarget()
	created := e.putTarget("eu", `{"namespace":"jobs-eu","cluster":{"kubeconfig_secret":"eu-kubeconfig"},"teams":["team-b"],"default_for":["team-a"]}`, http.StatusCreated)
	assert.Equal(t, "eu", created["name"])
	assert.Equal(t, "jobs-eu", created["namespace"])
	assert.Equal(t, map[string]any{"kubeconfig_secret": "eu-kubeconfig"}, created["cluster"])
	assert.Equal(t, []any{"team-b"}, created["teams"])
	assert.Equal(t, []any{"team-a"}, created["default_for"])
	var got map[string]any
	require.NoError(t, e.getJSON("/data-jobs/targets/eu", &got))
	assert.Equal(t, created, got, "PUT answers the target as GET does")

	replaced := e.putTarget("eu", `{"name":"eu","namespace":"jobs-eu","cluster":{"kubeconfig_secret":"eu-kubeconfig"},"teams":["*"]}`, http.StatusOK)
	assert.Equal(t, []any{"*"}, replaced["teams"])
	assert.Equal(t, []any{}, replaced["default_for"], "team-a went back to the default target")
	assert.Equal(t, created["created_at"], replaced["created_at"])
	require.NoError(t, e.getJSON("/data-jobs/targets/eu", &got))
	assert.Equal(t, replaced, got)

	var list []map[string]any
	require.NoError(t, e.getJSON("/data-jobs/targets", &list))
	require.Len(t, list, 2, "%v", list)
	assert.Equal(t, "default", list[0]["name"])
	assert.Equal(t, servedNamespace, list[0]["namespace"])
	assert.Equal(t, "local", list[0]["cluster"])
	assert.Equal(t, []any{"*"}, list[0]["teams"])
	assert.Equal(t, replaced, list[1])

	require.Equal(t, http.StatusNoContent, e.do("DELETE", "/data-jobs/targets/eu", "").status)
	for _, method := range []string{"GET", "DELETE"} {
		r := e.do(method, "/data-jobs/targets/eu", "")
		require.Equal(t, http.StatusNotFound, r.status, "%s after the delete: %s", method, r.body)
		assert.Contains(t, r.vdkError(t)["what"], `"eu"`)
	}
}

// TestTargetConflictsAre409AndChangeNothing guards what a target may not do: take a team
// another target is the default of, or a namespace of a cluster another target drives;
// move the default target off serve's --namespace; delete the default target, or one
// that teams default to. Each is a 409 that says why, and nothing changes.
func TestTargetConflictsAre409AndChangeNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.withDefaultTarget()
	eu := e.putTarget("eu", `{"namespace":"jobs-eu","cluster":"local","default_for":["team-a"]}`, http.StatusCreated)
	e.putTarget("eu-remote", `{"namespace":"jobs-eu","cluster":{"kubeconfig_secret":"eu-kubeconfig"}}`, http.StatusCreated)

	tests := []struct{ name, method, path, body, why string }{
		{"a team that is another target's default", "PUT", "us", `{"namespace":"jobs-us","cluster":"local","default_for":["team-a"]}`, `"eu"`},
		{"a namespace another target has", "PUT", "us", `{"namespace":"jobs-eu","cluster":"local"}`, "Two targets in one namespace"},
		{"the default target in another namespace", "PUT", "default", `{"namespace":"elsewhere","cluster":"local","teams":["*"]}`, "--namespace"},
		{"the default target in another cluster", "PUT", "default", `{"namespace":"` + servedNamespace + `","cluster":{"kubeconfig_secret":"eu-kubeconfig"},"teams":["*"]}`, "--namespace"},
		{"deleting the default target", "DELETE", "default", "", "every team without another target"},
		{"deleting a target teams default to", "DELETE", "eu", "", "default target of 1 teams"},
	}
	for _, tt := range tests {
		r := e.do(tt.method, "/data-jobs/targets/"+tt.path, tt.body)
		require.Equal(t, http.StatusConflict, r.status, "%s: %s", tt.name, r.body)
		assert.Contains(t, r.vdkError(t)["why"], tt.why, tt.name)
	}
	require.Equal(t, http.StatusNotFound, e.do("GET", "/data-jobs/targets/us", "").status, "us was not created")
	var got map[string]any
	require.NoError(t, e.getJSON("/data-jobs/targets/eu", &got))
	assert.Equal(t, eu, got, "eu is as it was")
	def := e.putTarget("default", `{"namespace":"`+servedNamespace+`","cluster":"local","teams":["team-b"]}`, http.StatusOK)
	assert.Equal(t, servedNamespace, def["namespace"], "the default target's teams change where it stays")
	assert.Equal(t, []any{"team-b"}, def["teams"])
}

// TestTargetsAreForTheAdminTeamsOnly guards the targets' authorization: a member of a
// team, even the team a target names, gets 403 naming the admin teams on every route, and
// nothing is stored; an admin's PUT is served.
func TestTargetsAreForTheAdminTeamsOnly(t *testing.T) {
	t.Parallel()
	e := newAuthEnv(t)
	e.withDefaultTarget()
	body := `{"namespace":"jobs-a","cluster":"local","default_for":["team-a"]}`
	for _, req := range []struct{ method, path, body string }{
		{"GET", "/data-jobs/targets", ""},
		{"GET", "/data-jobs/targets/default", ""},
		{"PUT", "/data-jobs/targets/of-a", body},
		{"DELETE", "/data-jobs/targets/default", ""},
	} {
		r := e.do(req.method, req.path, req.body, bearer(e.tokA)...)
		require.Equal(t, http.StatusForbidden, r.status, "%s %s by team-a: %s", req.method, req.path, r.body)
		assert.Contains(t, r.vdkError(t)["why"], "admin teams")
	}
	require.Equal(t, http.StatusNotFound, e.do("GET", "/data-jobs/targets/of-a", "", bearer(e.tokAdmin)...).status, "nothing is stored")
	r := e.do("PUT", "/data-jobs/targets/of-a", body, bearer(e.tokAdmin)...)
	require.Equal(t, http.StatusCreated, r.status, "%s", r.body)
}

// TestMovingATeamCancelsItsRunsInTheTargetItLeft guards invariant 11 through the API: a
// PUT that puts a team in a target's default_for asks for the cancel of its submitted and
// running executions in the target it left (their Jobs are there), with
// store.MsgTargetMoved, and leaves other teams' runs alone; its new runs are the new
// target's, and taking it out of default_for moves it back, cancelling those. The move is
// in the moved team's audit log.
func TestMovingATeamCancelsItsRunsInTheTargetItLeft(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.withDefaultTarget()
	moved, stays := e.createJob("team-a", "moved-job"), e.createJob("team-b", "staying-job")
	e.deploy(moved, `{"job_version":"v1"}`)
	e.deploy(stays, `{"job_version":"v1"}`)
	start := func(path string) string {
		r := e.startExecution(path, `{}`)
		require.Equal(t, http.StatusAccepted, r.status, "%s", r.body)
		var ex map[string]any
		r.json(t, &ex)
		return ex["id"].(string)
	}
	// cancel reads where a run is and the message of the cancel asked for it (nil: none).
	cancel := func(id string) (target string, message *string) {
		e.query(`SELECT target, CASE WHEN cancel_requested_at IS NOT NULL THEN cancel_message END FROM data_job_execution WHERE id = $1`,
			[]any{id}, &target, &message)
		return target, message
	}
	inDefault, other := start(moved), start(stays)
	target, msg := cancel(inDefault)
	require.Equal(t, "default", target)
	require.Nil(t, msg, "no cancel before the move")

	e.putTarget("eu", `{"namespace":"jobs-eu","cluster":"local","default_for":["team-a"]}`, http.StatusCreated)
	_, msg = cancel(inDefault)
	require.NotNil(t, msg, "the moved team's run in the default target is cancelled")
	assert.Equal(t, store.MsgTargetMoved, *msg)
	_, msg = cancel(other)
	assert.Nil(t, msg, "another team's run goes on")
	auditPaths := func(team string) []string {
		var audit struct {
			Entries []struct {
				Path string `json:"path"`
			} `json:"entries"`
		}
		require.NoError(t, e.getJSON("/data-jobs/for-team/"+team+"/audit", &audit))
		var paths []string
		for _, en := range audit.Entries {
			paths = append(paths, en.Path)
		}
		return paths
	}
	assert.Contains(t, auditPaths("team-a"), "/data-jobs/targets/eu", "the move is in the moved team's audit log")
	assert.NotContains(t, auditPaths("team-b"), "/data-jobs/targets/eu")

	later := e.createJob("team-a", "later-job") // moved-job's run is still running: one at a time
	e.deploy(later, `{"job_version":"v1"}`)
	inEU := start(later)
	target, msg = cancel(inEU)
	require.Equal(t, "eu", target, "a run of the moved team is its new target's")
	require.Nil(t, msg)
	e.putTarget("eu", `{"namespace":"jobs-eu","cluster":"local"}`, http.StatusOK)
	_, msg = cancel(inEU)
	require.NotNil(t, msg, "leaving default_for moves the team back, and its run in eu is cancelled")
	assert.Equal(t, store.MsgTargetMoved, *msg)
	_, msg = cancel(other)
	assert.Nil(t, msg)
}

// TestADeploymentNamesATargetItsTeamIsGranted guards a deployment's execution_target
// (issue 44): a target whose teams grant the team is stored and answered; one that does
// not is 403 and one that does not exist 404, nothing stored; the target then cannot stop
// granting that team, nor be deleted, while the deployment names it (409), and moving the
// deployment back to its team's default target cancels its runs in the named one.
func TestADeploymentNamesATargetItsTeamIsGranted(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.withDefaultTarget()
	e.putTarget("second", `{"namespace":"ns-second","cluster":"local","teams":["team-a"]}`, http.StatusCreated)
	granted := e.createJob("team-a", "granted-job")
	refused := e.createJob("team-b", "refused-job")

	e.deploy(granted, `{"job_version":"v1","enabled":true,"execution_target":"second"}`)
	assert.Equal(t, "second", e.deployment(granted)["execution_target"])
	r := e.do("POST", refused+"/deployments", `{"job_version":"v1","enabled":true,"execution_target":"second"}`)
	require.Equal(t, http.StatusForbidden, r.status, "%s", r.body)
	assert.Contains(t, r.vdkError(t)["what"], `"second"`)
	r = e.do("POST", refused+"/deployments", `{"job_version":"v1","enabled":true,"execution_target":"nowhere"}`)
	require.Equal(t, http.StatusNotFound, r.status, "%s", r.body)
	r = e.do("GET", refused+"/deployments/release", "")
	require.Equal(t, http.StatusNotFound, r.status, "nothing stored: %s", r.body)

	r = e.do("PUT", "/data-jobs/targets/second", `{"namespace":"ns-second","cluster":"local","teams":[]}`)
	require.Equal(t, http.StatusConflict, r.status, "%s", r.body)
	assert.Contains(t, r.vdkError(t)["why"], "team-a")
	r = e.do("DELETE", "/data-jobs/targets/second", "")
	require.Equal(t, http.StatusConflict, r.status, "%s", r.body)

	r = e.do("POST", granted+"/deployments/release/executions", `{}`)
	require.Equal(t, http.StatusAccepted, r.status, "%s", r.body)
	e.deploy(granted, `{"job_version":"v1","enabled":true,"execution_target":""}`)
	_, named := e.deployment(granted)["execution_target"]
	assert.False(t, named, "back to the team's default target")
	var message string
	conn, err := pgx.Connect(t.Context(), e.dbURL)
	require.NoError(t, err)
	defer conn.Close(context.WithoutCancel(t.Context()))
	require.NoError(t, conn.QueryRow(t.Context(), `SELECT cancel_message FROM data_job_execution WHERE job_name = 'granted-job'`).Scan(&message))
	assert.Equal(t, store.MsgTargetMoved, message, "its run in the target it left is cancelled")
}

// Concurrent PUTs of one new target: exactly one creates it (201), the others replace it
// (200), and the target is the last one's, default teams included. Before the PUT took
// the target's name lock first, PUTs at once each answered 201 (each found no row to
// lock), and each, taking the others' default teams for none, left them behind.
func TestConcurrentPutsOfANewTargetCreateItOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.withDefaultTarget()
	const n = 8
	statuses := make(chan int, n)
	for i := range n {
		go func() {
			body := `{"namespace":"ns-race","cluster":"local","default_for":["team-race-` + string(rune('a'+i)) + `"]}`
			statuses <- e.do("PUT", "/data-jobs/targets/race", body).status
		}()
	}
	created := 0
	for range n {
		switch s := <-statuses; s {
		case http.StatusCreated:
			created++
		case http.StatusOK:
		default:
			t.Fatalf("a PUT answered %d", s)
		}
	}
	require.Equal(t, 1, created, "one PUT created the target")
	conn, err := pgx.Connect(t.Context(), e.dbURL)
	require.NoError(t, err)
	defer conn.Close(context.WithoutCancel(t.Context()))
	var teams int
	require.NoError(t, conn.QueryRow(t.Context(), `SELECT count(*) FROM execution_target_team WHERE target = 'race'`).Scan(&teams))
	assert.Equal(t, 1, teams, "the last PUT's one default team, none of the others' left behind")
}
