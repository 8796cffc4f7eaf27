package ui_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/job"
)

// The job page names the deployment's execution profile and what it adds to each pod
// (issue 43): the profile API is for admins only, so without this a team saw its pods run
// on a pool, with variables and as an identity, and nowhere why.
func TestJobPageShowsTheProfileAndWhatItAddsToThePods(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	_, err := e.svc.PutProfile(t.Context(), job.Profile{
		Name: "gpu-pool", NodeSelector: map[string]string{"pool": "gpu"},
		Tolerations: []job.Toleration{{Key: "nvidia.com/gpu", Operator: "Exists", Effect: "NoSchedule"}},
		Env:         []job.ProfileEnvVar{{Name: "STAGE", Value: "prod"}},
		Teams:       []string{"team-b"},
	})
	require.NoError(t, err)
	b := e.browser(t)
	page := b.get("/ui/teams/team-b/jobs/job-of-b")
	require.Equal(t, http.StatusOK, page.status, page.body)
	assert.Contains(t, section(t, page.body, `id="deployment"`), "<dt>Execution profile</dt><dd><code>default</code>")

	profile := "gpu-pool"
	_, err = e.svc.PatchDeployment(t.Context(), "team-b", "job-of-b", job.DeploymentChange{ExecutionProfile: &profile}, "bob")
	require.NoError(t, err)
	page = b.get("/ui/teams/team-b/jobs/job-of-b")
	require.Equal(t, http.StatusOK, page.status, page.body)
	assert.Contains(t, section(t, page.body, `id="deployment"`),
		"<dt>Execution profile</dt><dd><code>gpu-pool</code> adds to each pod: the team&#39;s ServiceAccount; node selector pool=gpu; toleration nvidia.com/gpu Exists NoSchedule; environment STAGE</dd>")
}
