package synchronizer_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/datajobs/datajobs/internal/job"
)

// TestAProfileChangeReRendersItsCronJobsAndHandEditsAreReverted guards issue 43 on the
// control plane: a deployment's profile reaches its CronJob with the team's
// ServiceAccount (which the synchronizer creates), a change of the profile re-renders every
// CronJob selecting it through the queue, and a hand edit of a profile field (a node
// selector removed, a toleration added) is reverted as drift.
func TestAProfileChangeReRendersItsCronJobsAndHandEditsAreReverted(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	_, err := f.svc.PutProfile(t.Context(), job.Profile{Name: "pool", NodeSelector: map[string]string{"pool": "a"}, Teams: []string{team}})
	require.NoError(t, err)
	for _, name := range []string{"profiled-1", "profiled-2"} {
		f.createJob(name)
		f.deploy(name, job.DeploymentChange{JobVersion: ptr("v1"), ExecutionProfile: ptr("pool")})
	}
	f.start()
	f.synced("profiled-1")
	pod := f.cronJob("profiled-1").Spec.JobTemplate.Spec.Template.Spec
	require.Equal(t, map[string]string{"pool": "a"}, pod.NodeSelector)
	require.Equal(t, "datajobs-job-"+team, pod.ServiceAccountName)
	f.eventually(func() bool {
		_, err := f.client.CoreV1().ServiceAccounts(f.ns).Get(t.Context(), "datajobs-job-"+team, metav1.GetOptions{})
		return err == nil
	}, "the team's ServiceAccount is made")

	_, err = f.svc.PutProfile(t.Context(), job.Profile{Name: "pool", NodeSelector: map[string]string{"pool": "b"}, Teams: []string{team}})
	require.NoError(t, err)
	for _, name := range []string{"profiled-1", "profiled-2"} {
		f.eventually(func() bool {
			return f.cronJob(name).Spec.JobTemplate.Spec.Template.Spec.NodeSelector["pool"] == "b"
		}, name+" re-rendered")
		f.synced(name)
	}

	// kubectl edit: the node selector removed and a toleration added, by another manager.
	cj := f.cronJob("profiled-2")
	spec := &cj.Spec.JobTemplate.Spec.Template.Spec
	spec.NodeSelector = nil
	spec.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpExists}}
	_, err = f.client.BatchV1().CronJobs(f.ns).Update(t.Context(), cj, metav1.UpdateOptions{FieldManager: "kubectl-edit"})
	require.NoError(t, err)
	f.eventually(func() bool {
		s := f.cronJob("profiled-2").Spec.JobTemplate.Spec.Template.Spec
		return s.NodeSelector["pool"] == "b" && len(s.Tolerations) == 0
	}, "the hand edit reverted")
}
