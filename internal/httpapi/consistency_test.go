package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/store"
)

func TestConcurrentPatchesOfOneDeploymentAllApply(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	path := e.createJob("team-a", "my-job")
	e.deploy(path, `{"job_version":"v0"}`)

	// Each of these PATCHes changes its own field: with a lost update one would vanish.
	patches := []string{
		`{"enabled":false}`,
		`{"schedule":{"schedule_cron":"5 * * * *"}}`,
		`{"resources":{"cpu_request":0.5}}`,
		`{"resources":{"cpu_limit":3}}`,
		`{"resources":{"memory_request":300}}`,
		`{"resources":{"memory_limit":2000}}`,
	}
	// These change two fields together: the row must never mix two of them.
	const pairs = 10
	for k := range pairs {
		patches = append(patches, fmt.Sprintf(`{"job_version":"v%d","vdk_version":"d%d"}`, k, k))
	}

	start := make(chan struct{})
	var wg sync.WaitGroup
	statuses := make([]int, len(patches))
	for i, p := range patches {
		wg.Go(func() {
			<-start
			statuses[i] = e.do("PATCH", path+"/deployments/release", p).status
		})
	}
	close(start)
	wg.Wait()
	for i, s := range statuses {
		require.Equal(t, http.StatusAccepted, s, patches[i])
	}

	d := e.deployment(path)
	require.Equal(t, false, d["enabled"])
	require.Equal(t, "5 * * * *", d["schedule"].(map[string]any)["schedule_cron"])
	require.Equal(t, map[string]any{"cpu_request": 0.5, "cpu_limit": 3.0, "memory_request": 300.0, "memory_limit": 2000.0}, d["resources"])
	var k int
	_, err := fmt.Sscanf(d["job_version"].(string), "v%d", &k)
	require.NoError(t, err)
	require.Equal(t, fmt.Sprintf("d%d", k), d["vdk_version"])
	require.Equal(t, int64(2+len(patches)), e.generation("my-job"), "every PATCH bumped the generation once")
}

// listener collects the notifications of DesiredChannel on its own connection.
type listener struct {
	t    *testing.T
	conn *pgx.Conn
}

func listen(t *testing.T, dbURL string) *listener {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), dbURL)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close(context.WithoutCancel(t.Context())) })
	_, err = conn.Exec(t.Context(), "LISTEN "+store.DesiredChannel)
	require.NoError(t, err)
	return &listener{t: t, conn: conn}
}

// drain sends a sentinel notification after everything committed so far and returns the
// payloads received before it: notifications arrive in commit order.
func (l *listener) drain(e *env) []string {
	l.t.Helper()
	e.sql(`SELECT pg_notify($1, 'sentinel')`, store.DesiredChannel)
	ctx, cancel := context.WithTimeout(l.t.Context(), time.Minute) // a guard against a hang, not an assertion
	defer cancel()
	var got []string
	for {
		n, err := l.conn.WaitForNotification(ctx)
		require.NoError(l.t, err)
		if n.Payload == "sentinel" {
			return got
		}
		got = append(got, n.Payload)
	}
}

func TestEachCommittedChangeNotifiesOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	l := listen(t, e.dbURL)
	path := e.createJob("team-a", "my-job")
	require.Empty(t, l.drain(e), "creating a job deploys nothing")

	steps := []struct {
		name, method, path, body string
		status                   int
		notifies                 bool
	}{
		{"deploy", "POST", path + "/deployments", `{"job_version":"v1"}`, 202, true},
		{"redeploy", "POST", path + "/deployments", `{"job_version":"v2"}`, 202, true},
		{"patch", "PATCH", path + "/deployments/release", `{"enabled":false}`, 202, true},
		{"a rejected patch", "PATCH", path + "/deployments/release", `{"python_version":"2.0"}`, 409, false},
		{"a rejected deploy", "POST", path + "/deployments", `{"resources":{"cpu_request":3,"cpu_limit":1}}`, 400, false},
		{"a description change", "PUT", path, `{"job_name":"my-job","description":"x","config":{"schedule":{"schedule_cron":"15 10 * * *"},"contacts":{"notified_on_job_deploy":["a@example.com"]}}}`, 200, false},
		{"a schedule change", "PUT", path, `{"job_name":"my-job","config":{"schedule":{"schedule_cron":"0 0 * * *"}}}`, 200, true},
		{"properties", "PUT", path + "/deployments/release/properties", `{"a":1}`, 204, false},
		{"a move to the same team", "PUT", path + "/team/team-a", ``, 200, false},
		{"a move to another team", "PUT", path + "/team/team-b", ``, 200, true},
	}
	for _, s := range steps {
		r := e.do(s.method, s.path, s.body)
		require.Equal(t, s.status, r.status, "%s: %s", s.name, r.body)
		want := []string(nil)
		if s.notifies {
			want = []string{"my-job"}
		}
		require.Equal(t, want, l.drain(e), s.name)
		if s.name == "a move to another team" {
			path = "/data-jobs/for-team/team-b/jobs/my-job"
		}
	}
	require.Equal(t, http.StatusAccepted, e.do("DELETE", path+"/deployments/release", "").status)
	require.Equal(t, []string{"my-job"}, l.drain(e))
	e.deploy(path, `{"job_version":"v3"}`)
	require.Equal(t, http.StatusOK, e.do("DELETE", path, "").status)
	require.Equal(t, []string{"my-job", "my-job"}, l.drain(e))
}

func TestARolledBackChangeDoesNotNotify(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	l := listen(t, e.dbURL)
	path := e.createJob("team-a", "doomed-job")
	// A deferred constraint trigger fails the transaction at COMMIT, after the desired row
	// was written, the generation bumped and pg_notify called: a real failure at the last
	// possible moment.
	e.sql(`CREATE FUNCTION fail_commit() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN RAISE EXCEPTION 'injected commit failure'; END $$`)
	e.sql(`CREATE CONSTRAINT TRIGGER fail_commit AFTER INSERT OR UPDATE ON desired_data_job_deployment
		DEFERRABLE INITIALLY DEFERRED FOR EACH ROW WHEN (NEW.data_job_name = 'doomed-job')
		EXECUTE FUNCTION fail_commit()`)

	r := e.do("POST", path+"/deployments", `{"job_version":"v1"}`)
	require.Equal(t, http.StatusInternalServerError, r.status, "%s", r.body)
	r.vdkError(t)
	require.Empty(t, l.drain(e))
	require.JSONEq(t, `[]`, string(e.do("GET", path+"/deployments", "").body))
	require.Equal(t, int64(1), e.generation("doomed-job"))

	// Another job's change goes through and is heard.
	other := e.createJob("team-a", "other-job")
	e.deploy(other, `{"job_version":"v1"}`)
	require.Equal(t, []string{"other-job"}, l.drain(e))
}
