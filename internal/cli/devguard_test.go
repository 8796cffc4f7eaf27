package cli

import (
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/devenv"
	"github.com/datajobs/datajobs/internal/httpapi"
	"github.com/datajobs/datajobs/internal/testenv"
)

// devRun is a running `datajobs dev`.
type devRun struct {
	base  string             // the API's URL, as dev prints it
	admin string             // the admin listener's address
	logs  *testenv.LogBuffer // the service's log
}

// startDev runs `datajobs dev` with the real service (no controllers, no node) until the
// test ends.
func startDev(t *testing.T) devRun {
	t.Helper()
	admin := testenv.FreeAddr(t)
	ctx, cancel := context.WithCancel(t.Context())
	logs := &testenv.LogBuffer{}
	g := &globals{logLevel: "warn", logFormat: "text", stdout: io.Discard, stderr: logs}
	cmd := newDevCommand(newServeCommand(g).run)
	cmd.SetArgs([]string{"--state-dir", devStateDir(t), "--controllers=false", "--fast", "--listen", "127.0.0.1:0", "--admin-listen", admin})
	out := &testenv.LogBuffer{}
	cmd.SetOut(out)
	cmd.SetErr(io.Discard)
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
	api := regexp.MustCompile(`datajobs API: (http://\S+)`)
	var base string
	require.Eventually(t, func() bool {
		select {
		case err := <-done:
			done <- err
			t.Fatalf("dev stopped: %v\n%s", err, out.String())
		default:
		}
		if m := api.FindStringSubmatch(out.String()); m != nil {
			base = m[1]
		}
		return base != ""
	}, 5*time.Minute, 50*time.Millisecond)
	// Ready once migrated: the API answers the developer.
	require.Eventually(t, func() bool {
		resp, err := http.Get(base + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 2*time.Minute, 100*time.Millisecond)
	return devRun{base: base, admin: admin, logs: logs}
}

// send makes a request with the given headers (Host: the "Host" entry) and returns the
// status and body.
func send(t *testing.T, c *http.Client, method, url, body string, headers map[string]string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, strings.NewReader(body))
	require.NoError(t, err)
	for k, v := range headers {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

// TestDevAnswersOnlyThisMachinesProgramsAndItsOwnPages guards issue 41's finding M3: dev
// serves in auth mode none, every caller an admin, and every web page the developer opens
// can send requests to loopback. A page whose name was re-pointed at 127.0.0.1 (DNS
// rebinding: a foreign Host) read a secret, and a cross-site form, posted with an empty
// body, rolled back a deployment and started a run. Each is refused now (and a foreign
// Host on the admin listener too), while vdkcli-like requests and the console's own
// same-origin use work.
func TestDevAnswersOnlyThisMachinesProgramsAndItsOwnPages(t *testing.T) {
	t.Parallel()
	dev := startDev(t)
	base := dev.base
	_, port, _ := strings.Cut(strings.TrimPrefix(base, "http://"), ":")
	dep := base + "/data-jobs/for-team/devteam/jobs/guarded/deployments/production"
	c := http.DefaultClient
	jsonBody := map[string]string{"Content-Type": "application/json"}

	// vdkcli-like: a loopback Host, no Origin.
	status, body := send(t, c, http.MethodPost, base+"/data-jobs/for-team/devteam/jobs", `{"job_name":"guarded","team":"devteam"}`, jsonBody)
	require.Equal(t, http.StatusCreated, status, body)
	status, body = send(t, c, http.MethodPut, dep+"/secrets", `{"password":"s3cr3t"}`, jsonBody)
	require.Equal(t, http.StatusAccepted, status, body)
	status, body = send(t, c, http.MethodGet, dep+"/secrets", "", map[string]string{"Host": "localhost:" + port})
	require.Equal(t, http.StatusOK, status, "localhost is this machine: %s", body)
	require.Contains(t, body, "s3cr3t")

	// M3, DNS rebinding: the page's own name as Host.
	status, body = send(t, c, http.MethodGet, dep+"/secrets", "", map[string]string{"Host": "rebound.example:" + port})
	assert.Equal(t, http.StatusForbidden, status, "a foreign Host is refused: %s", body)
	assert.NotContains(t, body, "s3cr3t")
	_, adminPort, _ := strings.Cut(dev.admin, ":")
	status, body = send(t, c, http.MethodGet, "http://"+dev.admin+"/data-jobs/debug/sync-plan", "", map[string]string{"Host": "rebound.example:" + adminPort})
	assert.Equal(t, http.StatusForbidden, status, "the admin listener refuses a foreign Host too: %s", body)
	status, body = send(t, c, http.MethodGet, "http://"+dev.admin+"/metrics", "", nil)
	assert.Equal(t, http.StatusOK, status, "the admin listener answers this machine: %s", body)

	run := dep + "/executions"
	refused := map[string]map[string]string{
		// M3: a foreign Origin, whatever the method.
		"a read with a foreign Origin": {"Origin": "https://evil.example"},
		// M3: the cross-site form of the review, posted with an empty body.
		"a cross-site form with an empty body": {"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site", "Content-Type": "application/x-www-form-urlencoded"},
		// M3: a sandboxed frame's form sends Origin null.
		"a form with Origin null": {"Origin": "null", "Content-Type": "application/x-www-form-urlencoded"},
		// M3: a browser that says cross-site without an Origin.
		"a cross-site request without an Origin": {"Sec-Fetch-Site": "cross-site"},
		// M3: another port of this machine is another origin.
		"a form of another local origin": {"Origin": "http://127.0.0.1:1", "Sec-Fetch-Site": "same-site"},
	}
	for name, headers := range refused {
		method := http.MethodPost
		if strings.HasPrefix(name, "a read") {
			method = http.MethodGet
		}
		status, body := send(t, c, method, run, "", headers)
		assert.Equal(t, http.StatusForbidden, status, "%s is refused: %s", name, body)
	}

	// The console's own use: its page, then a same-origin form with its CSRF token.
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	browser := &http.Client{Jar: jar}
	status, page := send(t, browser, http.MethodGet, base+"/ui/", "", map[string]string{"Sec-Fetch-Site": "none"})
	require.Equal(t, http.StatusOK, status, page)
	csrf := regexp.MustCompile(`name="csrf-token" content="([^"]+)"`).FindStringSubmatch(page)
	require.NotNil(t, csrf, "the console's page carries its CSRF token")
	form := url.Values{"properties": {`{"db":"warehouse"}`}, "csrf": {csrf[1]}}.Encode()
	formHeaders := map[string]string{"Origin": base, "Sec-Fetch-Site": "same-origin", "Content-Type": "application/x-www-form-urlencoded"}
	status, body = send(t, browser, http.MethodPost, base+"/ui/teams/devteam/jobs/guarded/properties", form, formHeaders)
	require.Equal(t, http.StatusOK, status, "the console's own form is served (and its redirect): %s", body)
	status, body = send(t, c, http.MethodGet, dep+"/properties", "", nil)
	require.Equal(t, http.StatusOK, status, body)
	require.JSONEq(t, `{"db":"warehouse"}`, body)
}

// TestDevServesPodsOnTheBridgeOnlyTheirOwnTokensRoutes guards issue 41's finding M4: as
// root, dev forwarded its whole API, in auth mode none, to the real node's bridge, so any
// pod was an admin. dev's forward (here on loopback, in place of the bridge's address)
// serves only the routes of a job's own token, and only to that token: a pod's request
// without one, or with a token that is no job's, is refused, and nothing else of the
// service is there. That a job's own token passes is proved on the real node
// (e2e/realnode TestAJobReadsItsOwnPropertiesAndSecretsFromItsPodAndNoOtherJobs).
func TestDevServesPodsOnTheBridgeOnlyTheirOwnTokensRoutes(t *testing.T) {
	t.Parallel()
	dev := startDev(t)
	base := dev.base
	c := http.DefaultClient
	jsonBody := map[string]string{"Content-Type": "application/json"}
	status, body := send(t, c, http.MethodPost, base+"/data-jobs/for-team/devteam/jobs", `{"job_name":"bridged","team":"devteam"}`, jsonBody)
	require.Equal(t, http.StatusCreated, status, body)
	const dep = "/data-jobs/for-team/devteam/jobs/bridged/deployments/production"
	status, body = send(t, c, http.MethodPut, base+dep+"/secrets", `{"password":"s3cr3t"}`, jsonBody)
	require.Equal(t, http.StatusAccepted, status, body)

	fwd, err := devenv.StartForward("127.0.0.1:0", strings.TrimPrefix(base, "http://"), httpapi.JobsOnly)
	require.NoError(t, err)
	defer func() { require.NoError(t, fwd.Close()) }()
	bridge := "http://" + fwd.Addr

	notAJob := map[string]string{"Authorization": "Bearer eyJhbGciOiJub25lIn0.eyJpc3MiOiJodHRwczovL2V2aWwifQ."}
	cases := []struct {
		name, method, path string
		headers            map[string]string
		want               int
	}{
		// M4: a pod's request without a job token, on a job route.
		{"secrets without a token", http.MethodGet, dep + "/secrets", nil, http.StatusUnauthorized},
		{"properties without a token", http.MethodPut, dep + "/properties", jsonBody, http.StatusUnauthorized},
		// M4: a bearer token that is no job's is not the admin of auth mode none here.
		{"secrets with a token that is no job's", http.MethodGet, dep + "/secrets", notAJob, http.StatusUnauthorized},
		{"a run started without a token", http.MethodPost, dep + "/executions", nil, http.StatusUnauthorized},
		// M4: nothing but the job routes is served on the bridge.
		{"a deploy", http.MethodPost, "/data-jobs/for-team/devteam/jobs/bridged/deployments", jsonBody, http.StatusNotFound},
		{"a rollback", http.MethodPost, dep + "/revisions/1/rollback", nil, http.StatusNotFound},
		{"the job", http.MethodGet, "/data-jobs/for-team/devteam/jobs/bridged", nil, http.StatusNotFound},
		{"the console", http.MethodGet, "/ui/", nil, http.StatusNotFound},
		{"the GraphQL jobs query", http.MethodGet, "/data-jobs/for-team/devteam/jobs?query=%7Bjobs%7D", nil, http.StatusNotFound},
	}
	for _, tc := range cases {
		body := ""
		if tc.method == http.MethodPut {
			body = `{"db":"x"}`
		}
		status, got := send(t, c, tc.method, bridge+tc.path, body, tc.headers)
		assert.Equal(t, tc.want, status, "%s on the bridge: %s", tc.name, got)
		assert.NotContains(t, got, "s3cr3t", tc.name)
	}
	require.Equal(t, []string{
		"GET /data-jobs/for-team/{team}/jobs/{job}/deployments/{deployment_id}/properties",
		"GET /data-jobs/for-team/{team}/jobs/{job}/deployments/{deployment_id}/secrets",
		"GET /data-jobs/for-team/{team}/jobs/{job}/executions",
		"GET /data-jobs/for-team/{team}/jobs/{job}/executions/{execution_id}",
		"POST /data-jobs/for-team/{team}/jobs/{job}/deployments/{deployment_id}/executions",
		"PUT /data-jobs/for-team/{team}/jobs/{job}/deployments/{deployment_id}/properties",
	}, httpapi.JobPatterns(), "the bridge's routes are those a job's token may use")
	// Issue 48: the job tokens' verifier starts once the schema is there; on a first
	// start it warned that relation "installation" does not exist.
	assert.NotContains(t, dev.logs.String(), "job_identity_not_ready")
}
