package realnode

import (
	"encoding/json"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/datajobs/datajobs/internal/devenv"
)

// TestOnlyPythonVersionsWithABaseImageRunAndABaseImageThatCannotStartIsAPlatformError
// guards issue 48, item 8: /info listed every configured python version while only 3.11
// had a base image, a job deployed with another built on nothing that could run, and
// every run ended user_error with the runtime's "exec ... no such file or directory".
// Now /info lists the versions with a base image, a deployment of any other is refused
// naming them, and a base image whose entrypoint cannot start (the node's pause image: no
// vdk; dev's stub: a vdk that cannot execute) makes a platform error naming the image.
func TestOnlyPythonVersionsWithABaseImageRunAndABaseImageThatCannotStartIsAPlatformError(t *testing.T) {
	t.Parallel()
	// 3.12's base has no vdk at all (runc: StartError); 3.10's is dev's stub, whose vdk is
	// a script without /bin/sh (runc found it, could not execute it, exit 1).
	s := startService(t, t.TempDir(), "--base-image", "3.12="+os.Getenv(envRegistry)+"/"+devenv.PauseImageRepo,
		"--base-image", "3.10="+os.Getenv(envRegistry)+"/datajobs/python-base:dev")
	var info struct {
		Versions []string `json:"supported_python_versions"`
	}
	s.getJSON(t, "/data-jobs/for-team/"+team+"/info", &info)
	assert.Equal(t, []string{"3.10", "3.11", "3.12"}, info.Versions, "the versions with a base image")

	const name = "rn-nostart"
	s.deploy(t, name, map[string]string{"config.ini": configINI("3.12"), "10_print.py": "def run(job_input):\n    print('never', flush=True)\n"})
	path := s.base + "/data-jobs/for-team/" + team + "/jobs/" + name + "/deployments"
	resp, err := http.Post(path, "application/json", strings.NewReader(`{"python_version":"3.9"}`))
	require.NoError(t, err)
	var refusal struct{ What, Why string }
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&refusal))
	resp.Body.Close()
	assert.Equal(t, http.StatusConflict, resp.StatusCode, "refused as VDK refuses an unsupported version")
	assert.Contains(t, refusal.Why, "3.10, 3.11, 3.12", "the refusal names the versions there are")

	const stub = "rn-stub"
	s.deploy(t, stub, map[string]string{"config.ini": configINI("3.10"), "10_print.py": "def run(job_input):\n    print('never', flush=True)\n"})
	for _, n := range []string{name, stub} {
		require.NoError(t, s.redeploy(n, `"retries":0`, withRetries(0)))
		cj, err := s.kube.BatchV1().CronJobs(s.ns).Get(t.Context(), n, metav1.GetOptions{})
		require.NoError(t, err)
		image := cj.Spec.JobTemplate.Spec.Template.Spec.Containers[0].Image
		id := s.start(t, n)
		e := s.waitStatus(t, n, id, 2*time.Minute, "succeeded", "user_error", "platform_error")
		require.Equal(t, "platform_error", e.Status, "%+v; pods: %s", e, s.podsOf(t, id))
		assert.Contains(t, e.Message, "The image "+image+" could not start its entrypoint", "%+v", e)
	}
}
