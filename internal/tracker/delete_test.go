package tracker_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/store"
)

// DESIGN.md invariant 11: deleting a job (or its deployment, or moving it to another team)
// stops its submitted and running executions, whose rows stay readable as cancelled.

// cancelledBy waits until the execution id of the job name of inTeam reads cancelled with
// message, and checks its Kubernetes Job is gone: the run was stopped, not only relabelled.
func (f *execFixture) cancelledBy(inTeam, name, id, message string) {
	f.t.Helper()
	var e job.Execution
	require.Eventually(f.t, func() bool {
		var err error
		e, err = f.svc.GetExecution(f.t.Context(), inTeam, name, id)
		require.NoError(f.t, err, "the row of a stopped run stays readable until retention")
		return e.Status == string(job.ExecCancelled)
	}, 60*time.Second, 20*time.Millisecond, "execution %s never became cancelled (last: %+v)", id, &e)
	require.Equal(f.t, message, e.Message)
	require.NotNil(f.t, e.EndTime)
	require.True(f.t, f.jobGone(id), "cancelled is recorded only once the Job is gone")
}

// On main the delete removed the rows at once (ON DELETE CASCADE): the executions answered
// 404 while their Jobs and pods kept running, out of anyone's reach, up to their deadline.
func TestDeletingAJobCancelsItsPendingAndRunningExecutions(t *testing.T) {
	f := newExecFixture(t)
	f.heldJob("del-pending")
	f.heldJob("del-running")
	f.startExecutions()
	pending := f.run("del-pending", "")
	f.pod(pending) // its Job exists, its pod is never scheduled
	f.status("del-pending", pending, job.ExecSubmitted)
	running_ := f.run("del-running", "")
	f.kubelet(f.pod(running_), corev1.PodRunning, running(), "")
	f.status("del-running", running_, job.ExecRunning)

	require.NoError(t, f.svc.DeleteJob(t.Context(), team, "del-pending"))
	require.NoError(t, f.svc.DeleteJob(t.Context(), team, "del-running"))
	f.cancelledBy(team, "del-pending", pending, store.MsgJobDeleted)
	f.cancelledBy(team, "del-running", running_, store.MsgJobDeleted)
}

// On main a deployment delete or a team change left the runs going (and a moved job's
// runs kept the old team's credentials).
func TestDeletingTheDeploymentOrMovingTheJobCancelsItsRunningExecution(t *testing.T) {
	f := newExecFixture(t)
	f.heldJob("undeployed")
	f.heldJob("moved-job")
	f.startExecutions()
	a := f.run("undeployed", "")
	f.kubelet(f.pod(a), corev1.PodRunning, running(), "")
	f.status("undeployed", a, job.ExecRunning)
	b := f.run("moved-job", "")
	f.kubelet(f.pod(b), corev1.PodRunning, running(), "")
	f.status("moved-job", b, job.ExecRunning)

	require.NoError(t, f.svc.DeleteDeployment(t.Context(), team, "undeployed"))
	_, err := f.svc.ChangeTeam(t.Context(), team, "moved-job", "team-b")
	require.NoError(t, err)
	f.cancelledBy(team, "undeployed", a, store.MsgDeploymentDeleted)
	f.cancelledBy("team-b", "moved-job", b, store.MsgJobMoved)
	_, err = f.svc.GetExecution(t.Context(), team, "moved-job", b)
	require.Equal(t, job.KindNotFound, job.KindOf(err), "the run moved with its job")
}

// The request is a row, not a message: a delete while no leader runs is carried out by the
// next one (on main the rows were gone, so no leader could ever stop the Job).
func TestAJobDeletedWhileTheSynchronizerIsStoppedHasItsRunsCancelledWhenItStarts(t *testing.T) {
	f := newExecFixture(t)
	f.heldJob("stopped-del")
	f.startExecutions()
	id := f.run("stopped-del", "")
	f.kubelet(f.pod(id), corev1.PodRunning, running(), "")
	f.status("stopped-del", id, job.ExecRunning)

	f.stopExecutions()
	require.NoError(t, f.svc.DeleteJob(t.Context(), team, "stopped-del"))
	require.Equal(t, string(job.ExecRunning), f.execution("stopped-del", id).Status, "nobody acted yet")
	require.False(t, f.jobGone(id))

	f.startExecutions()
	f.cancelledBy(team, "stopped-del", id, store.MsgJobDeleted)
}

// A job created again under the same name right after a delete neither sees the old runs
// nor adopts them, and may start at once although an old run is still being stopped (on
// main the old run's row was gone and its Job, still running, could be taken for the new
// job's by name).
func TestAJobCreatedAgainUnderTheSameNameNeitherSeesNorAdoptsTheOldRuns(t *testing.T) {
	f := newExecFixture(t)
	f.heldJob("same-name")
	f.startExecutions()
	old := f.run("same-name", "")
	f.kubelet(f.pod(old), corev1.PodRunning, running(), "")
	f.status("same-name", old, job.ExecRunning)

	f.stopExecutions() // the old run is still running when the new job starts one
	require.NoError(t, f.svc.DeleteJob(t.Context(), team, "same-name"))
	require.NoError(t, f.client.BatchV1().CronJobs(f.ns).Delete(t.Context(), "same-name", metav1.DeleteOptions{PropagationPolicy: ptr(metav1.DeletePropagationOrphan)}))
	require.Eventually(t, func() bool {
		_, err := f.client.BatchV1().CronJobs(f.ns).Get(t.Context(), "same-name", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}, 30*time.Second, 20*time.Millisecond)
	f.heldJob("same-name")
	execs, err := f.svc.ListExecutions(t.Context(), team, "same-name", nil)
	require.NoError(t, err)
	require.Empty(t, execs, "the new job has no runs")
	fresh := f.run("same-name", "") // the old active run does not block the new job

	f.startExecutions()
	f.cancelledBy(team, "same-name", old, store.MsgJobDeleted)
	f.kubelet(f.pod(fresh), corev1.PodRunning, running(), "")
	f.status("same-name", fresh, job.ExecRunning)
	execs, err = f.svc.ListExecutions(t.Context(), team, "same-name", nil)
	require.NoError(t, err)
	require.Len(t, execs, 1)
	require.Equal(t, fresh, execs[0].ID)
	require.Empty(t, execs[0].Message)
}

// finishedEvents reads the execution_finished events of execution id as "status recipients".
func (f *execFixture) finishedEvents(id string) []string {
	f.t.Helper()
	evs, err := f.db.UnexpandedEvents(f.t.Context(), 1000)
	require.NoError(f.t, err)
	var out []string
	for _, e := range evs {
		var p struct {
			ID     string `json:"execution_id"`
			Status string `json:"status"`
		}
		require.NoError(f.t, json.Unmarshal(e.Payload, &p))
		if e.Kind == store.EventExecutionFinished && p.ID == id {
			out = append(out, p.Status+" "+strings.Join(e.Recipients, ","))
		}
	}
	return out
}

// A run cancelled because its job was deleted notifies nobody: the job's contacts and its
// enable_execution_notifications went with it (docs/notifications.md), and the person who
// deleted it has the API's answer. A run cancelled because the deployment was deleted, of
// a job that is still there, is one event to the job's deploy contacts, as any cancel.
func TestARunCancelledByItsJobsDeleteNotifiesNobodyAndByItsDeploymentsDeleteTheDeployContacts(t *testing.T) {
	f := newExecFixture(t)
	f.heldJob("notified-del")
	f.heldJob("notified-undeploy")
	f.exec(`UPDATE data_job SET enable_execution_notifications = true, notified_on_job_deploy = '{ops@example.com}'
		WHERE name IN ('notified-del', 'notified-undeploy')`)
	f.startExecutions()
	gone, undeployed := f.run("notified-del", ""), f.run("notified-undeploy", "")
	for name, id := range map[string]string{"notified-del": gone, "notified-undeploy": undeployed} {
		f.kubelet(f.pod(id), corev1.PodRunning, running(), "")
		f.status(name, id, job.ExecRunning)
	}

	require.NoError(t, f.svc.DeleteJob(t.Context(), team, "notified-del"))
	require.NoError(t, f.svc.DeleteDeployment(t.Context(), team, "notified-undeploy"))
	f.cancelledBy(team, "notified-del", gone, store.MsgJobDeleted)
	f.cancelledBy(team, "notified-undeploy", undeployed, store.MsgDeploymentDeleted)
	require.Equal(t, []string{"cancelled ops@example.com"}, f.finishedEvents(undeployed))
	require.Empty(t, f.finishedEvents(gone))
}
