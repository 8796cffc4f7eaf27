package realnode

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// identityStep is a job step that reads and writes its own properties and reads its own
// secrets with vdk-core's own job_input API, which the base image's vdk-datajobs plugin
// (hack/base-image/vdk-datajobs) backs with the token the kubelet projected into the pod:
// no credential is given to the job. vdk-core's own control-service client
// (vdk-plugin-control-cli 0.1.1431637373, the newest) cannot do it: it authenticates
// through vdk-control-cli's OAuth login, not with a token from a file, and registers no
// secrets client. Another job's secrets are asked for by hand, as docs/api.md shows: the
// plugin only ever names the job's own.
const identityStep = `import base64, json, os, socket, urllib.error, urllib.request

def _api(method, path, body=None, job=None):
    token = open(os.environ["DATAJOBS_TOKEN_FILE"]).read().strip()  # renewed by the kubelet: read it each time
    url = "%s/data-jobs/for-team/%s/jobs/%s/deployments/%s/%s" % (
        os.environ["VDK_CONTROL_SERVICE_REST_API_URL"].rstrip("/"), os.environ["VDK_JOB_TEAM"],
        job or os.environ["DATA_JOB_NAME"], os.environ["DATAJOBS_DEPLOYMENT_ID"], path)
    req = urllib.request.Request(url, method=method, data=None if body is None else json.dumps(body).encode(),
                                 headers={"Authorization": "Bearer " + token, "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as resp:
        return json.loads(resp.read() or b"null")

def _status(url, token=None):
    headers = {"Authorization": "Bearer " + token} if token else {}
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=30) as resp:
            return resp.status
    except urllib.error.HTTPError as e:
        return e.code

def run(job_input):
    claims = json.loads(base64.urlsafe_b64decode(open(os.environ["DATAJOBS_TOKEN_FILE"]).read().split(".")[1] + "=="))
    print("identity-token aud=%s pod=%s" % (",".join(claims["aud"]), claims["kubernetes.io"]["pod"]["name"]), flush=True)
    # vdk-core's own API, which the base image's vdk-datajobs plugin backs with the token.
    props = job_input.get_all_properties()
    secrets = job_input.get_all_secrets()
    print("identity-read db=%s password-length=%d" % (props["db"], len(secrets["password"])), flush=True)
    props["last_run"] = "ok from " + socket.gethostname()
    job_input.set_all_properties(props)
    try:
        _api("GET", "secrets", job="rn-identity-other")
        print("identity-other status=200", flush=True)
    except urllib.error.HTTPError as e:
        print("identity-other status=%d" % e.code, flush=True)
    # The bridge serves a pod only its own job's routes, and only with its token.
    base = os.environ["VDK_CONTROL_SERVICE_REST_API_URL"].rstrip("/")
    own = "%s/data-jobs/for-team/%s/jobs/%s/deployments/%s/secrets" % (
        base, os.environ["VDK_JOB_TEAM"], os.environ["DATA_JOB_NAME"], os.environ["DATAJOBS_DEPLOYMENT_ID"])
    print("bridge-no-token status=%d" % _status(own), flush=True)
    print("bridge-console status=%d" % _status(base + "/ui/", open(os.environ["DATAJOBS_TOKEN_FILE"]).read().strip()), flush=True)
`

// TestAJobReadsItsOwnPropertiesAndSecretsFromItsPodAndNoOtherJobs proves issue 26's job
// identity end to end on a real kubelet: the step, in its pod, reaches the API at
// $VDK_CONTROL_SERVICE_REST_API_URL (the forward on the node's gateway) with the token the
// kubelet projected into the pod (audience datajobs, bound to that pod), reads its own
// properties and secrets through vdk-core's job_input, writes a property back, and is refused another job's secrets
// (403), although the service runs in auth mode none, where a person may read them; on the
// forward (httpapi.JobsOnly, as in datajobs dev) its request without the token is refused
// and the console is not there (issue 41, M4). It guards against pods with no way to the
// API, a token that is not accepted as the job, a job token that reaches beyond its own
// job, and a pod that is an admin.
func TestAJobReadsItsOwnPropertiesAndSecretsFromItsPodAndNoOtherJobs(t *testing.T) {
	t.Parallel()
	s := startService(t, t.TempDir())
	const name, other = "rn-identity", "rn-identity-other"
	path := func(job, what string) string {
		return s.base + "/data-jobs/for-team/" + team + "/jobs/" + job + "/deployments/" + job + "/" + what
	}
	s.vdk(t, "create", "-n", other, "-t", team, "--cloud")
	require.Equal(t, http.StatusAccepted, call(t, http.MethodPut, path(other, "secrets"), `{"password":"not yours"}`).status)
	s.deploy(t, name, map[string]string{"10_identity.py": identityStep})
	require.NoError(t, s.redeploy(name, `"retries":0`, withRetries(0)))
	require.Equal(t, http.StatusNoContent, call(t, http.MethodPut, path(name, "properties"), `{"db":"warehouse"}`).status)
	require.Equal(t, http.StatusAccepted, call(t, http.MethodPut, path(name, "secrets"), `{"password":"s3cr3t-value"}`).status)

	id := s.start(t, name)
	e := s.waitStatus(t, name, id, 4*time.Minute, "succeeded", "user_error", "platform_error")
	log := s.logs(t, name, id)
	require.Equal(t, "succeeded", e.Status, "%+v\n%s", e, log)
	pods := s.pods(t, id)
	require.Len(t, pods, 1)
	pod := pods[0].Name
	assert.Contains(t, log, "identity-token aud=datajobs pod="+pod, "the step's token is the kubelet's, bound to its pod")
	assert.Contains(t, log, "identity-read db=warehouse password-length=12", "the step read its own properties and secrets")
	assert.Contains(t, log, "identity-other status=403", "another job's secrets are refused to a job's token")
	// Issue 41, M4: on the bridge a pod is no admin of auth mode none.
	assert.Contains(t, log, "bridge-no-token status=401", "the bridge refuses a pod's request without its job token")
	assert.Contains(t, log, "bridge-console status=404", "the bridge serves nothing but the job-token routes")

	got := call(t, http.MethodGet, path(name, "properties"), "")
	require.Equal(t, http.StatusOK, got.status, got.body)
	assert.JSONEq(t, `{"db":"warehouse","last_run":"ok from `+pod+`"}`, got.body, "the property the step wrote back")
}

type answer struct {
	status int
	body   string
}

// call makes a request as a person (auth mode none: no token).
func call(t *testing.T, method, url, body string) answer {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, strings.NewReader(body))
	require.NoError(t, err)
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
