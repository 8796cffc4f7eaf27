package realnode

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"

	"github.com/datajobs/datajobs/internal/devenv"
)

// profileStep prints what an execution profile adds to the pod, as the job's own code sees
// it: the profile's environment variable and the ServiceAccount the kubelet's token names.
const profileStep = `import base64, json, os

def run(job_input):
    claims = json.loads(base64.urlsafe_b64decode(open(os.environ["DATAJOBS_TOKEN_FILE"]).read().split(".")[1] + "=="))
    print("profile-env GREETING=%s" % os.environ.get("GREETING", "<unset>"), flush=True)
    print("profile-sa %s" % claims["kubernetes.io"]["serviceaccount"]["name"], flush=True)
`

// TestAProfileReachesThePodAndAProfileNoNodeMatchesSaysWhyItsRunWaits is issue 43's
// real-node test. A profile with an environment variable and a node selector that matches
// the real node: the job's own code, in its pod, prints the variable and its team's
// ServiceAccount (datajobs-job-{team}), and the pod ran on the node the selector chose. A
// profile whose selector no node matches: the run stays submitted and its message says
// why (the scheduler's words) instead of nothing, until it is cancelled.
func TestAProfileReachesThePodAndAProfileNoNodeMatchesSaysWhyItsRunWaits(t *testing.T) {
	t.Parallel()
	s := startService(t, t.TempDir())
	const name = "rn-profile"
	putProfile(t, s, "rn-real-pool", `{"node_selector":{"`+devenv.RealNodeLabel+`":"real"},"env":[{"name":"GREETING","value":"hello from the profile"}],"teams":["`+team+`"]}`)
	putProfile(t, s, "rn-no-pool", `{"node_selector":{"datajobs.test/pool":"nowhere"},"teams":["`+team+`"]}`)
	s.deploy(t, name, map[string]string{"10_profile.py": profileStep})

	require.NoError(t, s.redeploy(name, `"retries":0,"execution_profile":"rn-real-pool"`, nodeSelector("real")))
	id := s.start(t, name)
	e := s.waitStatus(t, name, id, 4*time.Minute, "succeeded", "user_error", "platform_error")
	log := s.logs(t, name, id)
	require.Equal(t, "succeeded", e.Status, "%+v\n%s", e, log)
	assert.Contains(t, log, "profile-env GREETING=hello from the profile", "the profile's variable reaches the job's code")
	assert.Contains(t, log, "profile-sa datajobs-job-"+team, "the pod runs as its team's ServiceAccount")
	pods := s.pods(t, id)
	require.Len(t, pods, 1)
	assert.Equal(t, "real", pods[0].Spec.NodeSelector[devenv.RealNodeLabel], "the profile's selector is the pod's")
	assert.NotEmpty(t, pods[0].Spec.NodeName, "the pod ran on the node the selector chose")

	require.NoError(t, s.redeploy(name, `"retries":0,"execution_profile":"rn-no-pool"`, nodeSelector("nowhere")))
	id = s.start(t, name)
	var waiting execution
	require.Eventually(t, func() bool {
		waiting = s.execution(t, name, id)
		return waiting.Message != ""
	}, 2*time.Minute, 200*time.Millisecond, "the waiting run says why: %+v; pods: %s", &waiting, s.podsOf(t, id))
	assert.Equal(t, "submitted", waiting.Status)
	assert.Contains(t, waiting.Message, "Waiting for a node: ")
	assert.Contains(t, waiting.Message, "node affinity/selector", "the scheduler's reason")
	s.vdk(t, "execute", "--cancel", "-i", id, "-n", name, "-t", team)
	assert.Equal(t, "cancelled", s.waitStatus(t, name, id, time.Minute, "cancelled", "succeeded", "user_error", "platform_error").Status)
}

// putProfile creates profile name (auth mode none: every caller is an admin).
func putProfile(t *testing.T, s *service, name, body string) {
	t.Helper()
	got := call(t, http.MethodPut, s.base+"/data-jobs/profiles/"+name, body)
	require.Contains(t, []int{http.StatusCreated, http.StatusOK}, got.status, got.body)
}

// nodeSelector is redeploy's check that the CronJob's pods select the pool value.
func nodeSelector(value string) func(*batchv1.CronJob) bool {
	return func(cj *batchv1.CronJob) bool {
		for _, v := range cj.Spec.JobTemplate.Spec.Template.Spec.NodeSelector {
			if v == value {
				return true
			}
		}
		return false
	}
}
