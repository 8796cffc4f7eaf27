package server_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/datajobs/datajobs/internal/kube"
	"github.com/datajobs/datajobs/internal/store"
	"github.com/datajobs/datajobs/internal/testenv"
	"github.com/datajobs/datajobs/internal/ui"
)

// jobMay are the routes a running job's own token may call on its own job, and what
// they answer: what vdk-core's job_input reads and writes at run time.
var jobMay = map[string]int{
	"GET /data-jobs/for-team/{team}/jobs/{job}/deployments/{deployment_id}/properties": http.StatusOK,
	"PUT /data-jobs/for-team/{team}/jobs/{job}/deployments/{deployment_id}/properties": http.StatusNoContent,
	"GET /data-jobs/for-team/{team}/jobs/{job}/deployments/{deployment_id}/secrets":    http.StatusOK,
}

// checkJobCaller is the job-token column of the all-routes test: the apiserver's token
// bound to a running pod of team-b's job-of-b calls every REST route, on job-of-b and
// under team-a. It reaches job-of-b's own properties (jobMay) and nothing else: 403 on
// every other route, and on every route of another team's path, whatever the route's
// rule for people (the GraphQL list and the team-less routes included). Once the pod is
// deleted the same token is 401. The admin listener is not reached by it either (see the
// test above). It runs last: the job's PUT changes job-of-b's properties.
func checkJobCaller(t *testing.T, c *caller, dbURL, ns string, patterns []string, fill func(pattern, team string) (string, string)) {
	t.Helper()
	db, err := store.Open(t.Context(), store.Config{URL: dbURL})
	require.NoError(t, err)
	installation, err := db.InstallationID(t.Context())
	require.NoError(t, err)
	jobOfB, err := db.GetJob(t.Context(), "team-b", "job-of-b")
	db.Close()
	require.NoError(t, err)
	kc := testenv.Clientset(t)
	pod := testenv.JobPod(t, kc, ns, "job-of-b-exec", kube.DefaultJobServiceAccount, map[string]string{
		kube.LabelManagedBy: kube.ManagedByValue, kube.LabelInstallation: installation,
		kube.LabelJob: "job-of-b", kube.LabelTeam: "team-b", kube.LabelJobUID: jobOfB.UID,
	})
	tok := testenv.JobToken(t, kc, pod, kube.JobTokenAudience)
	props := "/data-jobs/for-team/team-b/jobs/job-of-b/deployments/release/properties"
	require.Eventually(t, func() bool { return c.do(tok, "GET", props, "").status == http.StatusOK },
		30*time.Second, 50*time.Millisecond, "the job's token is accepted once the service watches the job pods")

	for _, pattern := range patterns {
		rc := routeCases[pattern]
		method, path := fill(pattern, "team-b")
		if rc.public || rc.signed || strings.HasPrefix(path, ui.Prefix) { // a signed call takes no token (its row checks it)
			continue // no bearer tokens: the console takes its own sessions only
		}
		headers := []string{}
		if rc.body != "" {
			headers = append(headers, "Content-Type", "application/json")
			if rc.contentType != "" {
				headers[1] = rc.contentType
			}
		}
		r := c.do(tok, method, path, rc.body, headers...)
		if want, ok := jobMay[pattern]; ok {
			assert.Equal(t, want, r.status, "%s by job-of-b's own token: %s", pattern, r.body)
		} else {
			assert.Equal(t, http.StatusForbidden, r.status, "%s by job-of-b's token: %s", pattern, r.body)
			vdkError(t, r)
		}
		method, path = fill(pattern, "team-a")
		r = c.do(tok, method, path, rc.body, headers...)
		assert.Equal(t, http.StatusForbidden, r.status, "%s by job-of-b's token under team-a: %s", pattern, r.body)
	}
	r := c.do(tok, "GET", "/data-jobs/for-team/team-a/jobs/job-of-a/deployments/job-of-a/properties", "")
	assert.Equal(t, http.StatusForbidden, r.status, "another job's properties: %s", r.body)
	assert.JSONEq(t, `{"secret":"stolen"}`, c.must(tok, "GET", props, "", http.StatusOK), "the job wrote its own properties")
	assert.JSONEq(t, `{"password":"of-b"}`, c.must(tok, "GET", "/data-jobs/for-team/team-b/jobs/job-of-b/deployments/release/secrets", "", http.StatusOK),
		"the job reads its own secrets (and may not write them: 403 above)")

	require.NoError(t, kc.CoreV1().Pods(ns).Delete(t.Context(), pod.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64(0))}))
	require.Eventually(t, func() bool { return c.do(tok, "GET", props, "").status == http.StatusUnauthorized },
		10*time.Second, 20*time.Millisecond, "the token of a deleted pod is refused")
}
