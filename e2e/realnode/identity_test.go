package realnode

import (
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/devenv"
	"github.com/datajobs/datajobs/internal/kube"
	"github.com/datajobs/datajobs/internal/testenv"
)

// TestARunningJobsKubeletTokenReadsItsOwnPropertiesAndNoOtherJobs proves the job identity
// on a real kubelet: the token the kubelet projects into the job's pod (audience datajobs,
// bound to that pod) is what the step finds at $DATAJOBS_TOKEN_FILE, next to the API URL
// and its deployment id, and the API takes it as that job: its own properties 200 and
// writable, another job's 403, and 401 once the pod has finished.
//
// The pod cannot call the API itself here: the real node's pods have an isolated network
// (the CNI tap plugin, docs/test-environment.md), with no route to the host's loopback
// where the service listens. So the test reads the pod's token with kubectl exec, as the
// step's own HTTP call would send it, while the step prints what it found in its pod.
func TestARunningJobsKubeletTokenReadsItsOwnPropertiesAndNoOtherJobs(t *testing.T) {
	t.Parallel()
	s := startService(t, t.TempDir())
	const name, other = "rn-identity", "rn-identity-other"
	props := func(job string) string {
		return s.base + "/data-jobs/for-team/" + team + "/jobs/" + job + "/deployments/" + job + "/properties"
	}
	s.vdk(t, "create", "-n", other, "-t", team, "--cloud")
	require.Equal(t, http.StatusNoContent, call(t, "", http.MethodPut, props(other), `{"other":"not yours"}`).status)
	s.deploy(t, name, map[string]string{"10_identity.py": `import base64, json, os, time

def run(job_input):
    token = open(os.environ["DATAJOBS_TOKEN_FILE"]).read().strip()
    claims = json.loads(base64.urlsafe_b64decode(token.split(".")[1] + "=="))
    print("identity-marker aud=%s pod=%s team=%s job=%s deployment=%s api=%s" % (
        ",".join(claims["aud"]), claims["kubernetes.io"]["pod"]["name"], os.environ["VDK_JOB_TEAM"],
        os.environ["DATA_JOB_NAME"], os.environ["DATAJOBS_DEPLOYMENT_ID"],
        os.environ.get("VDK_CONTROL_SERVICE_REST_API_URL", "unset")), flush=True)
    deadline = time.monotonic() + 120  # until the test has used the token
    while time.monotonic() < deadline and not os.path.exists("/tmp/identity-done"):
        time.sleep(0.2)
`})
	require.Equal(t, http.StatusNoContent, call(t, "", http.MethodPut, props(name), `{"db":"warehouse"}`).status)
	id := s.start(t, name)
	s.waitStatus(t, name, id, 3*time.Minute, "running")
	pods := s.pods(t, id)
	require.Len(t, pods, 1)
	pod := pods[0].Name
	var token string
	require.Eventually(t, func() bool { // the container may still be starting
		out, err := s.kubectlErr(t, "exec", "-n", s.ns, pod, "--", "cat", kube.JobTokenPath)
		token = strings.TrimSpace(out)
		return err == nil && token != ""
	}, time.Minute, time.Second, "kubectl exec reads the pod's token: %s", token)

	got := call(t, token, http.MethodGet, props(name), "")
	require.Equal(t, http.StatusOK, got.status, got.body)
	assert.JSONEq(t, `{"db":"warehouse"}`, got.body, "the job reads its own properties with its pod's token")
	assert.Equal(t, http.StatusNoContent, call(t, token, http.MethodPut, props(name), `{"db":"warehouse","last_run":"ok"}`).status, "and writes them")
	theirs := call(t, token, http.MethodGet, props(other), "")
	assert.Equal(t, http.StatusForbidden, theirs.status, "another job's properties: %s", theirs.body)
	assert.NotContains(t, theirs.body, "not yours")

	s.kubectl(t, "exec", "-n", s.ns, pod, "--", "python3", "-c", "open('/tmp/identity-done', 'w')")
	e := s.waitStatus(t, name, id, 2*time.Minute, "succeeded", "user_error", "platform_error")
	require.Equal(t, "succeeded", e.Status, "%+v", e)
	log := s.logs(t, name, id)
	assert.Contains(t, log, "identity-marker aud=datajobs pod="+pod+" team="+team+" job="+name+" deployment="+name+" api="+s.base,
		"the step found the kubelet's token bound to its pod, and the API's address")
	require.Eventually(t, func() bool { return call(t, token, http.MethodGet, props(name), "").status == http.StatusUnauthorized },
		30*time.Second, 200*time.Millisecond, "the token of a finished pod is refused")
}

type answer struct {
	status int
	body   string
}

// call makes a request with a bearer token (none when empty).
func call(t *testing.T, token, method, url, body string) answer {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, strings.NewReader(body))
	require.NoError(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return answer{status: resp.StatusCode, body: string(b)}
}

// kubectl runs the environment's kubectl as the cluster's admin and returns its output.
func (s *service) kubectl(t *testing.T, args ...string) string {
	t.Helper()
	out, err := s.kubectlErr(t, args...)
	require.NoError(t, err, "kubectl %s: %s", strings.Join(args, " "), out)
	return out
}

// kubectlErr is kubectl that returns its error (the output holds its stderr then).
func (s *service) kubectlErr(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root, err := devenv.RepoRoot()
	require.NoError(t, err)
	cmd := exec.CommandContext(t.Context(), filepath.Join(root, ".cache/k8s-bin/kubectl"), append([]string{"--kubeconfig", testenv.Kubeconfig(t)}, args...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return stderr.String(), err
	}
	return string(out), nil
}
