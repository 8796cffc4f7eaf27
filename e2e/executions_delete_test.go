package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/datajobs/datajobs/internal/testenv"
)

// TestDeletingAJobOverTheAPIStopsItsRunAndTheRunStaysReadable drives `datajobs serve` as a
// user would (issue 21 item 2, DESIGN.md invariant 11). On main the execution answered 404
// right after the DELETE, while its Kubernetes Job and pod kept running up to the run's
// deadline, out of anyone's reach.
func TestDeletingAJobOverTheAPIStopsItsRunAndTheRunStaysReadable(t *testing.T) {
	t.Parallel()
	dbURL, kubeconfig, ns := testenv.DatabaseURL(t), testenv.Kubeconfig(t), testenv.Namespace(t)
	client := testenv.Clientset(t)
	// More CPU than the fake node has: the pod is never scheduled, the run stays submitted.
	r := startReplica(t, dbURL, kubeconfig, ns, "--max-cpu", "200")
	const name = "stopped-by-delete"
	create := fmt.Sprintf(`{"job_name":%q,"team":"team-a","description":"e2e","config":{"schedule":{"schedule_cron":"0 0 1 1 *"}}}`, name)
	require.Equal(t, http.StatusCreated, r.do(t, http.MethodPost, "/data-jobs/for-team/team-a/jobs", create))
	require.Equal(t, http.StatusAccepted, r.do(t, http.MethodPost, "/data-jobs/for-team/team-a/jobs/"+name+"/deployments",
		`{"job_version":"v1","enabled":true,"resources":{"cpu_request":100,"cpu_limit":100}}`))
	id := r.startExecution(t, name)
	require.Eventually(t, func() bool { return len(jobPods(t, client, ns, id)) > 0 }, 2*time.Minute, 50*time.Millisecond, "the execution's pod")

	require.Equal(t, http.StatusOK, r.do(t, http.MethodDelete, "/data-jobs/for-team/team-a/jobs/"+name, ""))
	var e executionBody
	require.Eventually(t, func() bool {
		e = r.execution(t, name, id) // 200: the row outlives its job
		return e.Status == "cancelled"
	}, time.Minute, 50*time.Millisecond, "last: %+v", &e)
	require.Equal(t, "the data job was deleted", e.Message)
	require.NotNil(t, e.EndTime)
	_, err := client.BatchV1().Jobs(ns).Get(t.Context(), id, metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "the Kubernetes Job was deleted: %v", err)

	// Created again under the name, the job has no runs; the old one still reads by its id.
	require.Equal(t, http.StatusCreated, r.do(t, http.MethodPost, "/data-jobs/for-team/team-a/jobs", create))
	resp, err := http.Get(r.base + "/data-jobs/for-team/team-a/jobs/" + name + "/executions")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var list []executionBody
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&list))
	require.Empty(t, list)
	require.Equal(t, "cancelled", r.execution(t, name, id).Status)
}
