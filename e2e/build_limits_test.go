package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/build/buildtest"
	"github.com/datajobs/datajobs/internal/testenv"
)

// Issue 22's leftover: pip's time limit was a config field no operator could set (10
// minutes, fixed). `--pip-timeout` reaches pip: a requirements install whose index never
// answers is the deployment's user error naming the flag's limit, not a build held ten
// minutes. (--pip-memory-bytes goes the same way, into build.PipConfig.MemoryBytes, whose
// RLIMIT_AS is tested in internal/build.)
//
// The limit is 20 s, not less: with 3 s, a cold `make test` (every package's tests beside
// the builds, load above 10) killed pip before it had started far enough to ask the index
// at all, and the test waited for a request that could not come ("pip never asked the
// index"). The stalled index, not pip's start-up, must be what the limit ends.
func TestPipTimeoutFlagBoundsARequirementsInstall(t *testing.T) {
	t.Parallel()
	dbURL, kubeconfig, ns := testenv.DatabaseURL(t), testenv.Kubeconfig(t), testenv.Namespace(t)
	registry := testenv.Registry(t)
	base := buildtest.PushBase(t, registry)
	links := &stallingLinks{dir: t.TempDir(), hit: make(chan struct{}), release: make(chan struct{})}
	buildtest.Wheel(t, links.dir, "tinypkg", "1.0")
	srv := httptest.NewServer(links)
	defer srv.Close()
	defer close(links.release) // never released before: the index stalls every build
	r := startReplica(t, dbURL, kubeconfig, ns,
		"--image-registry", registry+"/"+ns, "--registry-insecure", "--base-image", "3.11="+base,
		"--pip-index-url", (&url.URL{Scheme: "file", Path: t.TempDir()}).String(), "--pip-find-links", srv.URL+"/",
		"--pip-timeout", "20s")

	require.Equal(t, http.StatusCreated, r.do(t, http.MethodPost, "/data-jobs/for-team/team-a/jobs",
		`{"job_name":"slow-index","team":"team-a","config":{"schedule":{"schedule_cron":"0 * * * *"}}}`))
	v := r.upload(t, "slow-index", buildtest.Sources(t, "slow-index", map[string]string{
		"config.ini": "[owner]\nteam = team-a\n", "requirements.txt": "tinypkg==1.0\n",
	}))
	require.Equal(t, http.StatusAccepted, r.do(t, http.MethodPost, "/data-jobs/for-team/team-a/jobs/slow-index/deployments",
		fmt.Sprintf(`{"job_version":%q,"python_version":"3.11","enabled":true}`, v)))
	select {
	case <-links.hit:
	case <-time.After(2 * time.Minute):
		t.Fatal("pip never asked the index")
	}
	var d struct{ Status, Message string }
	require.Eventually(t, func() bool {
		resp, err := http.Get(r.base + "/data-jobs/for-team/team-a/jobs/slow-index/deployments/production")
		require.NoError(t, err)
		defer resp.Body.Close()
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&d))
		return d.Status == "user_error"
	}, time.Minute, 100*time.Millisecond, "the build ends at --pip-timeout (last: %+v)", &d)
	require.Contains(t, d.Message, "within 20s")
}
