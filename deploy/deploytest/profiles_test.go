package deploytest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/datajobs/datajobs/internal/kube"
	"github.com/datajobs/datajobs/internal/testenv"
)

// TestAdmissionPolicyKeepsEachTeamsPodsOnItsOwnServiceAccount guards issue 43's fence
// against the real apiserver: a pod in the jobs namespace labelled as team A's, made by
// anyone (here an administrator), is refused with team B's ServiceAccount and admitted
// with team A's; and the service's token cannot render a CronJob of team A running as team
// B either.
func TestAdmissionPolicyKeepsEachTeamsPodsOnItsOwnServiceAccount(t *testing.T) {
	t.Parallel()
	in := installRBAC(t, nil)
	installAdmissionPolicy(t, in.objs, in.client, in.jobs)
	admin, ctx := testenv.Clientset(t), context.WithoutCancel(t.Context())
	name := find(t, in.objs, "ValidatingAdmissionPolicy", "").GetName() + "-team-accounts"
	createPolicy(t, in.objs, name)
	for _, sa := range []string{"datajobs-job-team-a", "datajobs-job-team-b"} {
		_, err := admin.CoreV1().ServiceAccounts(in.jobs).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	pod := func(sa string) *corev1.Pod {
		p := handMadePod("team-a", nil)
		p.Labels[kube.LabelJob] = "fence-job"
		p.Spec.ServiceAccountName = sa
		return p
	}
	dry := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
	require.Eventually(t, func() bool {
		_, err := admin.CoreV1().Pods(in.jobs).Create(ctx, pod("datajobs-job-team-b"), dry)
		return apierrors.IsForbidden(err) || apierrors.IsInvalid(err)
	}, time.Minute, tick, "the policy takes effect")
	_, err := admin.CoreV1().Pods(in.jobs).Create(ctx, pod("datajobs-job-team-b"), dry)
	require.ErrorContains(t, err, "team-a runs only as its team's ServiceAccount datajobs-job-team-a, not datajobs-job-team-b")
	_, err = admin.CoreV1().Pods(in.jobs).Create(ctx, pod("datajobs-job-team-a"), dry)
	require.NoError(t, err, "team A's pod with team A's ServiceAccount")

	cj := renderedCronJob(in.jobs) // team-a's
	require.Equal(t, "datajobs-job-team-a", cj.Spec.JobTemplate.Spec.Template.Spec.ServiceAccountName)
	_, err = in.client.BatchV1().CronJobs(in.jobs).Create(ctx, cj, dry)
	require.NoError(t, err, "the rendered CronJob, with its team's ServiceAccount")
	cj.Spec.JobTemplate.Spec.Template.Spec.ServiceAccountName = "datajobs-job-team-b"
	_, err = in.client.BatchV1().CronJobs(in.jobs).Create(ctx, cj, dry)
	require.ErrorContains(t, err, "their team's")
}
