// Package controllerstest checks the heavy environment (kube-controller-manager,
// kube-scheduler, kwok): it is its own test binary so that other packages stay fast.
package controllerstest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/datajobs/datajobs/internal/devenv"
	"github.com/datajobs/datajobs/internal/testenv"
)

func TestMain(m *testing.M) {
	testenv.Main(m, testenv.WithControllers())
}

func TestJobFromCronJobTemplateSucceedsOnFakeNode(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	cs := testenv.Clientset(t)
	ns := testenv.Namespace(t)

	cj, err := cs.BatchV1().CronJobs(ns).Create(ctx, &batchv1.CronJob{
		ObjectMeta: metav1.ObjectMeta{Name: "nightly"},
		Spec: batchv1.CronJobSpec{
			Schedule: "0 3 * * *",
			JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{
				Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyNever,
					Containers:    []corev1.Container{{Name: "job", Image: "registry.example/nightly:1"}},
				},
			}}},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)

	// What `kubectl create job --from=cronjob/nightly` does: no need to wait for a schedule.
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			Name:            "nightly-manual",
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(cj, batchv1.SchemeGroupVersion.WithKind("CronJob"))},
		},
		Spec: cj.Spec.JobTemplate.Spec,
	}
	_, err = cs.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{})
	require.NoError(t, err)

	require.EventuallyWithT(t, func(c *assert.CollectT) {
		pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "job-name=nightly-manual"})
		require.NoError(c, err)
		require.Len(c, pods.Items, 1)
		require.Equal(c, devenv.FakeNodeName, pods.Items[0].Spec.NodeName)
		require.Equal(c, corev1.PodSucceeded, pods.Items[0].Status.Phase)
	}, time.Minute, 100*time.Millisecond)

	require.EventuallyWithT(t, func(c *assert.CollectT) {
		got, err := cs.BatchV1().Jobs(ns).Get(ctx, "nightly-manual", metav1.GetOptions{})
		require.NoError(c, err)
		require.Equal(c, int32(1), got.Status.Succeeded)
		require.True(c, complete(got), "job conditions: %+v", got.Status.Conditions)
	}, time.Minute, 100*time.Millisecond)
}

func complete(j *batchv1.Job) bool {
	for _, c := range j.Status.Conditions {
		if c.Type == batchv1.JobComplete && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}
