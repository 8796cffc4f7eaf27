package server_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/datajobs/datajobs/internal/server"
	"github.com/datajobs/datajobs/internal/testenv"
)

// A rollback to an earlier revision brings the CronJob in the real apiserver back to that
// revision's spec (guards: a rollback that changes the database but not what runs).
func TestRollbackRestoresThePreviousCronJob(t *testing.T) {
	t.Parallel()
	ns := testenv.Namespace(t)
	base, _, _ := serve(t, server.Config{DatabaseURL: testenv.DatabaseURL(t), SyncMode: server.SyncOn, Namespace: ns, ResyncInterval: time.Second})
	require.Eventually(t, func() bool { code, _ := get(t, base+"/readyz"); return code == http.StatusOK }, 30*time.Second, 50*time.Millisecond)
	send := func(method, path, body string, want int) {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), method, base+path, strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Datajobs-User", "carol")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, want, resp.StatusCode, "%s %s", method, path)
	}
	const job = "/data-jobs/for-team/team-a/jobs/rolled-back"
	send("POST", "/data-jobs/for-team/team-a/jobs", `{"job_name":"rolled-back","description":"d","config":{"schedule":{"schedule_cron":"0 * * * *"}}}`, http.StatusCreated)
	send("POST", job+"/deployments", `{"job_version":"v1","schedule":{"schedule_cron":"0 * * * *"}}`, http.StatusAccepted)
	cronJob := func(version, schedule string, suspended bool) func() bool {
		return func() bool {
			cj, err := testenv.Clientset(t).BatchV1().CronJobs(ns).Get(t.Context(), "rolled-back", metav1.GetOptions{})
			return err == nil && cj.Annotations["datajobs.io/job-version"] == version && cj.Spec.Schedule == schedule &&
				cj.Spec.Suspend != nil && *cj.Spec.Suspend == suspended &&
				strings.HasSuffix(cj.Spec.JobTemplate.Spec.Template.Spec.Containers[0].Image, ":"+version)
		}
	}
	require.Eventually(t, cronJob("v1", "0 * * * *", false), 30*time.Second, 50*time.Millisecond, "revision 2 applied")
	send("PATCH", job+"/deployments/release", `{"job_version":"v2","enabled":false,"schedule":{"schedule_cron":"30 2 * * *"}}`, http.StatusAccepted)
	require.Eventually(t, cronJob("v2", "30 2 * * *", true), 30*time.Second, 50*time.Millisecond, "revision 3 applied")

	send("POST", job+"/deployments/release/revisions/2/rollback", "", http.StatusAccepted)
	require.Eventually(t, cronJob("v1", "0 * * * *", false), 30*time.Second, 50*time.Millisecond, "the rollback to revision 2 applied")
	code, body := get(t, base+job+"/deployments/release/revisions?page_size=1")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, `"revision":4,`)
	require.Contains(t, body, `"kind":"rollback"`)
	require.Contains(t, body, `"actor":"carol"`)
	require.Contains(t, body, `"rollback_of":2`)
}
