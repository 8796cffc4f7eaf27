package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/datajobs/datajobs/internal/devenv"
	"github.com/datajobs/datajobs/internal/store"
	"github.com/datajobs/datajobs/internal/testenv"
)

// logs reads GET .../executions/{id}/logs (with ?tail_lines=tail when tail != "").
func (r *replica) executionLogs(t *testing.T, name, id, tail string) string {
	t.Helper()
	url := r.base + "/data-jobs/for-team/team-a/jobs/" + name + "/executions/" + id + "/logs"
	if tail != "" {
		url += "?tail_lines=" + tail
	}
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var body struct {
		Logs string `json:"logs"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&body))
	return body.Logs
}

// TestLogsOfARunningExecutionThenOfTheFinishedOneAfterItsPodIsGone reads a running
// execution's log through the API while its pod prints (kwok serves the pod's log file to
// the apiserver's pods/log as a kubelet would), lets it finish, and reads the copy the
// leader kept once the Job and its pod are deleted.
func TestLogsOfARunningExecutionThenOfTheFinishedOneAfterItsPodIsGone(t *testing.T) {
	t.Parallel()
	dbURL, kubeconfig, ns := testenv.DatabaseURL(t), testenv.Kubeconfig(t), testenv.Namespace(t)
	client := testenv.Clientset(t)
	// The deployment asks more CPU than the fake node has: its pod waits for the test,
	// which plays the scheduler and the kubelet (kwok only serves the pod's log).
	r := startReplica(t, dbURL, kubeconfig, ns, "--max-cpu", "200")
	const name = "printer"
	require.Equal(t, http.StatusCreated, r.do(t, http.MethodPost, "/data-jobs/for-team/team-a/jobs",
		fmt.Sprintf(`{"job_name":%q,"team":"team-a","description":"e2e","config":{"schedule":{"schedule_cron":"0 0 1 1 *"}}}`, name)))
	require.Equal(t, http.StatusAccepted, r.do(t, http.MethodPost, "/data-jobs/for-team/team-a/jobs/"+name+"/deployments",
		`{"job_version":"v1","enabled":true,"resources":{"cpu_request":100,"cpu_limit":100}}`))
	id := r.startExecution(t, name)

	var pod corev1.Pod
	require.Eventually(t, func() bool {
		pods := jobPods(t, client, ns, id)
		if len(pods) == 0 {
			return false
		}
		pod = pods[0]
		return true
	}, 2*time.Minute, 50*time.Millisecond, "the execution's pod")
	require.Empty(t, r.executionLogs(t, name, id, ""), "a pod not started yet has printed nothing")
	hands := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, devenv.KwokHandsOffAnnotation, devenv.KwokHandsOffValue)
	_, err := client.CoreV1().Pods(ns).Patch(t.Context(), pod.Name, types.StrategicMergePatchType, []byte(hands), metav1.PatchOptions{})
	require.NoError(t, err)
	require.NoError(t, client.CoreV1().Pods(ns).Bind(t.Context(), &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: ns},
		Target:     corev1.ObjectReference{Kind: "Node", Name: devenv.FakeNodeName},
	}, metav1.CreateOptions{}))
	require.NoError(t, devenv.SetPodStatus(t.Context(), client, &pod, corev1.PodRunning, "", running()))
	require.Eventually(t, func() bool { return r.execution(t, name, id).Status == "running" }, time.Minute, 50*time.Millisecond)

	// The pod prints; the API answers at once with what it printed so far.
	file := filepath.Join(t.TempDir(), "printer.log")
	require.NoError(t, devenv.WriteCRILog(file, time.Now(), "reading input", "42 rows read"))
	require.NoError(t, devenv.ServePodLog(t.Context(), testenv.RestConfig(t), &pod, file))
	var got string
	require.Eventually(t, func() bool {
		got = r.executionLogs(t, name, id, "")
		return got == "reading input\n42 rows read\n"
	}, time.Minute, 100*time.Millisecond, "last answer: %q", got)
	require.Equal(t, "42 rows read\n", r.executionLogs(t, name, id, "1"))
	require.NoError(t, devenv.WriteCRILog(file, time.Now(), "reading input", "42 rows read", "writing output"))
	require.Equal(t, "reading input\n42 rows read\nwriting output\n", r.executionLogs(t, name, id, "0"))
	require.Equal(t, "running", r.execution(t, name, id).Status, "the log was read while the pod runs")

	// It ends; the leader keeps the end of its log.
	require.NoError(t, devenv.WriteCRILog(file, time.Now(), "reading input", "42 rows read", "writing output", "done"))
	require.NoError(t, devenv.SetPodStatus(t.Context(), client, &pod, corev1.PodSucceeded, "", terminated(0, "Completed", "")))
	require.Eventually(t, func() bool { return r.execution(t, name, id).Status == "succeeded" }, time.Minute, 50*time.Millisecond)

	// The leader keeps the log on a queue of its own after the final status (a slow read
	// delays no status). A .ci/run deleted the Job 90 ms after "succeeded", before that
	// queue had read the pod, and the API answered "": the TTL (600 s) gives the queue its
	// time in a cluster, so the test waits for the kept copy as the TTL would. The window
	// is open for a Job deleted by hand at once (noted on issue 24's log queue).
	db, err := store.Open(t.Context(), store.Config{URL: dbURL})
	require.NoError(t, err)
	t.Cleanup(db.Close)
	require.Eventually(t, func() bool {
		_, kept, err := db.ExecutionLog(t.Context(), "team-a", name, id)
		return err == nil && kept != nil
	}, time.Minute, 50*time.Millisecond, "the leader keeps the finished execution's log")

	// The Job and its pod go (TTL, or by hand), and the file changes: the API serves the copy.
	require.NoError(t, client.BatchV1().Jobs(ns).Delete(t.Context(), id, metav1.DeleteOptions{PropagationPolicy: new(metav1.DeletePropagationBackground)}))
	require.Eventually(t, func() bool { return len(jobPods(t, client, ns, id)) == 0 }, time.Minute, 50*time.Millisecond, "the pod is gone")
	require.NoError(t, devenv.WriteCRILog(file, time.Now(), "not this execution's"))
	require.Equal(t, "reading input\n42 rows read\nwriting output\ndone\n", r.executionLogs(t, name, id, ""))
	require.Equal(t, "writing output\ndone\n", r.executionLogs(t, name, id, "2"))
	unreadable, ok := r.metric("datajobs_execution_logs_unreadable_total")
	require.True(t, ok)
	require.Zero(t, unreadable, "the log was read when the execution ended")
}
