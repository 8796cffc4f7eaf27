package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Issue 43, "A placement change": a grant is never withdrawn from under a deployment. A
// deployment that kept selecting a profile no longer granted to its team rendered pods
// the admission policy refuses once the placement grace has passed.

// lockJob holds the row lock of the job name, as a writer in its transaction does, until
// release (or the end of the test); conn is the connection that holds it.
func (e *env) lockJob(name string) (conn *pgx.Conn, release func()) {
	e.t.Helper()
	ctx := e.t.Context()
	conn, err := pgx.Connect(ctx, e.dbURL)
	require.NoError(e.t, err)
	e.t.Cleanup(func() { _ = conn.Close(context.WithoutCancel(ctx)) })
	tx, err := conn.Begin(ctx)
	require.NoError(e.t, err)
	_, err = tx.Exec(ctx, `SELECT FROM data_job WHERE name = $1 FOR UPDATE`, name)
	require.NoError(e.t, err)
	return conn, func() { require.NoError(e.t, tx.Rollback(ctx)) }
}

// profileTeams reads the teams and the revision of the profile name.
func (e *env) profileTeams(name string) (teams, revision any) {
	e.t.Helper()
	var p map[string]any
	require.NoError(e.t, e.getJSON("/data-jobs/profiles/"+name, &p))
	return p["teams"], p["revision"]
}

// A PUT that removes a team (or narrows "*") while deployments of that team select the
// profile is 409 naming the team, the first jobs and how many, and stores nothing. Before
// the fix it was 200, and the jobs kept a profile no longer theirs.
func TestAProfileGrantInUseIsNotWithdrawn(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	require.Equal(t, http.StatusOK, e.do("PUT", "/data-jobs/profiles/pool", `{"node_selector":{"pool":"a"},"teams":["*"]}`).status)
	for i := range 7 {
		e.deploy(e.createJob("team-b", fmt.Sprintf("b-job-%d", i)), `{"job_version":"v1","execution_profile":"pool"}`)
	}
	e.deploy(e.createJob("team-a", "team-a-job"), `{"job_version":"v1","execution_profile":"pool"}`)

	for _, tc := range []struct{ teams, what, why string }{
		{`["team-a"]`, `"pool" cannot be withdrawn from team-b.`, "7 deployments of team-b select it: b-job-0, b-job-1, b-job-2, b-job-3, b-job-4 and 2 more."},
		{`["team-a","team-c"]`, `"pool" cannot be withdrawn from team-b.`, "b-job-4 and 2 more."},
		{`[]`, `"pool" cannot be withdrawn from team-a, team-b.`, "8 deployments of team-a, team-b select it: b-job-0, b-job-1, b-job-2, b-job-3, b-job-4 and 3 more."},
	} {
		r := e.do("PUT", "/data-jobs/profiles/pool", `{"node_selector":{"pool":"a"},"teams":`+tc.teams+`}`)
		require.Equal(t, http.StatusConflict, r.status, "%s: %s", tc.teams, r.body)
		body := r.vdkError(t)
		assert.Contains(t, body["what"], tc.what, tc.teams)
		assert.Contains(t, body["why"], tc.why, tc.teams)
		got, rev := e.profileTeams("pool")
		assert.Equal(t, []any{"*"}, got, "nothing is stored")
		assert.EqualValues(t, 1, rev)
	}

	r := e.do("PUT", "/data-jobs/profiles/pool", `{"node_selector":{"pool":"a"},"teams":["team-a","team-b"]}`)
	require.Equal(t, http.StatusOK, r.status, "a narrowing that keeps every user's team: %s", r.body)
	for i := range 7 {
		e.deploy(fmt.Sprintf("/data-jobs/for-team/team-b/jobs/b-job-%d", i), `{"execution_profile":"default"}`)
	}
	r = e.do("PUT", "/data-jobs/profiles/pool", `{"node_selector":{"pool":"a"},"teams":["team-a"]}`)
	require.Equal(t, http.StatusOK, r.status, "once team B's jobs moved off it: %s", r.body)
}

// A rollback to a revision whose profile was withdrawn from the team since is 403 naming
// the profile, and the deployment stays as it was; so is a job's move to a team its
// deployment's profile is not granted to. Before the fix the rollback restored the profile
// without a check, and the move kept it.
func TestARollbackOrAMoveChecksTheProfilesGrant(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	require.Equal(t, http.StatusOK, e.do("PUT", "/data-jobs/profiles/pool", `{"node_selector":{"pool":"a"},"teams":["team-a","team-b"]}`).status)
	path := e.createJob("team-b", "my-job")
	e.deploy(path, `{"job_version":"v1","execution_profile":"pool"}`)
	e.deploy(path, `{"execution_profile":"default"}`)
	require.Equal(t, http.StatusOK, e.do("PUT", "/data-jobs/profiles/pool", `{"node_selector":{"pool":"a"},"teams":["team-a"]}`).status)

	r := e.do("POST", path+"/deployments/release/revisions/2/rollback", "") // (1: the job's creation)
	require.Equal(t, http.StatusForbidden, r.status, "%s", r.body)
	assert.Contains(t, r.vdkError(t)["why"], `"pool" is not granted to team team-b`)
	assert.Equal(t, "default", e.deployment(path)["execution_profile"], "nothing is stored")

	a := e.createJob("team-a", "team-a-job")
	e.deploy(a, `{"job_version":"v1","execution_profile":"pool"}`)
	r = e.do("PUT", a+"/team/team-b", "")
	require.Equal(t, http.StatusForbidden, r.status, "%s", r.body)
	assert.Contains(t, r.vdkError(t)["why"], `"pool" is not granted to team team-b`)
	require.Equal(t, http.StatusOK, e.do("GET", a, "").status, "the job stays team A's")
}

// A deploy whose grant check passed before a PUT withdrew the grant, and whose write comes
// after (here it waits on its job's row lock, which the test holds meanwhile), is refused
// 403 and stores nothing: its write checks the grant again, in its transaction. Before the
// fix the deploy was 202 and the withdrawal 200: a deployment of a profile not granted.
func TestADeployRacingAGrantWithdrawalNeverLeavesBothStored(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	require.Equal(t, http.StatusOK, e.do("PUT", "/data-jobs/profiles/pool", `{"node_selector":{"pool":"a"},"teams":["team-a","team-b"]}`).status)
	path := e.createJob("team-b", "my-job")
	ctx := t.Context()
	conn, release := e.lockJob("my-job")

	deployed := make(chan response, 1)
	go func() {
		deployed <- e.do("POST", path+"/deployments", `{"job_version":"v1","execution_profile":"pool"}`)
	}()
	require.Eventually(t, func() bool { // the deploy passed the service's check and waits on the job
		var waiting int
		require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()`).Scan(&waiting))
		return waiting > 0
	}, 10*time.Second, 10*time.Millisecond)
	r := e.do("PUT", "/data-jobs/profiles/pool", `{"node_selector":{"pool":"a"},"teams":["team-a"]}`)
	require.Equal(t, http.StatusOK, r.status, "no deployment selects it yet: %s", r.body)
	release()

	r = <-deployed
	require.Equal(t, http.StatusForbidden, r.status, "%s", r.body)
	assert.Contains(t, r.vdkError(t)["why"], `"pool" is not granted to team team-b`)
	require.Equal(t, http.StatusNotFound, e.do("GET", path+"/deployments/release", "").status, "nothing is stored")
}

// Deploys and withdrawals at once, many times: each pair ends with one of them refused,
// never with a deployment of team B selecting a profile not granted to it.
func TestDeploysAndGrantWithdrawalsAtOnceKeepEveryDeploymentGranted(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const both = `{"node_selector":{"pool":"a"},"teams":["team-a","team-b"]}`
	for i := range 20 {
		require.Equal(t, http.StatusOK, e.do("PUT", "/data-jobs/profiles/pool", both).status)
		path := e.createJob("team-b", fmt.Sprintf("b-job-%d", i))
		var deploy, withdraw response
		var wg sync.WaitGroup
		wg.Go(func() { deploy = e.do("POST", path+"/deployments", `{"job_version":"v1","execution_profile":"pool"}`) })
		wg.Go(func() {
			withdraw = e.do("PUT", "/data-jobs/profiles/pool", `{"node_selector":{"pool":"a"},"teams":["team-a"]}`)
		})
		wg.Wait()
		switch deploy.status {
		case http.StatusAccepted:
			require.Equal(t, http.StatusConflict, withdraw.status, "round %d: the deploy won: %s", i, withdraw.body)
			e.deploy(path, `{"execution_profile":"default"}`)
		default:
			require.Equal(t, http.StatusForbidden, deploy.status, "round %d: %s", i, deploy.body)
			require.Equal(t, http.StatusOK, withdraw.status, "round %d: the withdrawal won: %s", i, withdraw.body)
		}
	}
}
