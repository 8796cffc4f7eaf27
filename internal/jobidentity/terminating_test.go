package jobidentity_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/kube"
	"github.com/datajobs/datajobs/internal/testenv"
)

// Issue 41, L3: a pod being deleted still runs for its grace period (the pods of a
// deleted job do), and its token was accepted meanwhile: it read the secrets of the job
// created again under its name. A token of a pod being deleted is refused (401). A
// finalizer holds the pod in its delete here, as a kubelet's grace period would.
func TestATokenOfAPodBeingDeletedIsRefused(t *testing.T) {
	t.Parallel()
	ns, kc := testenv.Namespace(t), testenv.Clientset(t)
	v := verifier(t, ns)
	p := testenv.JobPod(t, kc, ns, "job-ending", kube.DefaultJobServiceAccount, jobLabels("team-a", "job-ending", installation))
	tok := testenv.JobToken(t, kc, p, kube.JobTokenAudience)
	_, err := authenticate(v, tok)
	require.NoError(t, err)

	hold := []byte(`{"metadata":{"finalizers":["datajobs.test/hold"]}}`)
	_, err = kc.CoreV1().Pods(ns).Patch(t.Context(), p.Name, types.MergePatchType, hold, metav1.PatchOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		_, _ = kc.CoreV1().Pods(ns).Patch(context.Background(), p.Name, types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
	})
	require.NoError(t, kc.CoreV1().Pods(ns).Delete(t.Context(), p.Name, metav1.DeleteOptions{}))
	cur, err := kc.CoreV1().Pods(ns).Get(t.Context(), p.Name, metav1.GetOptions{})
	require.NoError(t, err)
	require.NotNil(t, cur.DeletionTimestamp, "the pod is being deleted")
	require.Equal(t, corev1.PodRunning, cur.Status.Phase, "and runs")
	// Refused while it still runs: the pod GC marks an unscheduled pod being deleted
	// failed after a while, which the check of the phase refused before too.
	require.Eventually(t, func() bool {
		_, err := authenticate(v, tok)
		if job.KindOf(err) != job.KindUnauthenticated {
			return false
		}
		cur, err := kc.CoreV1().Pods(ns).Get(t.Context(), p.Name, metav1.GetOptions{})
		return err == nil && cur.Status.Phase == corev1.PodRunning
	}, 10*time.Second, 20*time.Millisecond, "a token of a pod being deleted is refused while it runs")
}
