package deploytest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/kube"
	"github.com/datajobs/datajobs/internal/testenv"
)

// The profiles of the ServiceAccount tests: team A's and team B's name their own
// templates, and one of every team names a third.
var accountProfiles = []job.Profile{
	{Name: "warehouse-a", ServiceAccount: "warehouse-{team}", Teams: []string{"team-a"}},
	{Name: "lake-b", ServiceAccount: "lake-{team}", Teams: []string{"team-b"}},
	{Name: "spot", ServiceAccount: "spot-{team}", Teams: []string{job.GrantAllTeams}},
}

// TestAdmissionPolicyKeepsEachTeamsPodsOnItsOwnServiceAccount guards issue 43's fence
// against the real apiserver: a pod in the jobs namespace labelled as team A's, made by
// anyone (here an administrator), is admitted as the jobs' ServiceAccount, team A's by
// the chart's template, or one a profile granted to team A renders (the ConfigMap
// datajobs-profiles), and refused as team B's, as team B's profile's, or as one no
// profile names; before the ConfigMap exists, as none. The service's token renders a
// CronJob of team A's profile, whose pods are those. The chart before read no ConfigMap
// (this test fails at its first check there) and refused a profile's own ServiceAccount
// (warehouse-team-a), from a pod ("runs only as its team's ServiceAccount
// datajobs-job-team-a, not warehouse-team-a") and from the service's CronJob alike.
func TestAdmissionPolicyKeepsEachTeamsPodsOnItsOwnServiceAccount(t *testing.T) {
	t.Parallel()
	in := installRBAC(t, nil)
	installAdmissionPolicy(t, in.objs, in.client, in.jobs)
	admin, ctx := testenv.Clientset(t), context.WithoutCancel(t.Context())
	createPolicy(t, in.objs, find(t, in.objs, "ValidatingAdmissionPolicy", "").GetName()+"-team-accounts")
	// Every one exists, so that a refusal is the policy's, not the ServiceAccount plugin's.
	createServiceAccounts(t, in.jobs, "datajobs-job-team-a", "datajobs-job-team-b", "warehouse-team-a", "lake-team-b", "lake-team-a", "spot-team-a", "unnamed")
	pod := func(sa string) *corev1.Pod {
		p := handMadePod("team-a", nil)
		p.Labels[kube.LabelJob] = "fence-job"
		p.Spec.ServiceAccountName = sa
		return p
	}
	pods := admin.CoreV1().Pods(in.jobs)
	require.Eventually(t, func() bool {
		_, err := pods.Create(ctx, pod("datajobs-job-team-a"), dryRun)
		return err != nil
	}, time.Minute, tick, "the policy takes effect: no ConfigMap, no team's pod")
	_, err := pods.Create(ctx, pod("datajobs-job-team-a"), dryRun)
	require.ErrorContains(t, err, "no params found")

	createProfilesConfigMap(t, in.jobs, accountProfiles)
	require.Eventually(t, func() bool {
		_, err := pods.Create(ctx, pod("warehouse-team-a"), dryRun)
		return err == nil
	}, time.Minute, tick, "the policy reads the ConfigMap: team A's profile's ServiceAccount")
	for sa, refuse := range map[string]string{
		"datajobs-job-team-a":         "", // the chart's template
		"datajobs-job-team-b":         "team-a runs only as its team's ServiceAccount datajobs-job-team-a or one of an execution profile granted to its team (ConfigMap datajobs-profiles), not datajobs-job-team-b",
		"spot-team-a":                 "",                // a profile of every team's, filled in with team A
		"lake-team-b":                 "not lake-team-b", // team B's profile's
		"lake-team-a":                 "not lake-team-a", // team B's profile's template, with team A
		"unnamed":                     "not unnamed",     // no profile names it
		kube.DefaultJobServiceAccount: "",
	} {
		_, err := pods.Create(ctx, pod(sa), dryRun)
		if refuse == "" {
			require.NoError(t, err, sa)
			continue
		}
		require.True(t, apierrors.IsForbidden(err), "%s: %v", sa, err)
		require.ErrorContains(t, err, refuse)
	}

	// The service's token: a CronJob of team A's profile, with its ServiceAccount.
	cj := renderedWith(in.jobs, &accountProfiles[0])
	require.Equal(t, "warehouse-team-a", cj.Spec.JobTemplate.Spec.Template.Spec.ServiceAccountName)
	_, err = in.client.BatchV1().CronJobs(in.jobs).Create(ctx, cj, dryRun)
	require.NoError(t, err, "the rendered CronJob of team A's profile")
	_, err = pods.Create(ctx, podOf(cj), dryRun)
	require.NoError(t, err, "its pod")
}

// A profile's ServiceAccount that changes, as the synchronizer writes it
// (kube.RetainPlacements): the old one is still admitted during the grace (the pods of
// Jobs made before), refused after it; and a pod made before is not refused an update
// (the Job controller's removal of its finalizer) once its ServiceAccount has left. On the
// chart before, a profile's own ServiceAccount was never admitted (checked: the test
// fails, "not warehouse-team-a").
func TestAdmissionPolicyAdmitsAnOldServiceAccountForItsGrace(t *testing.T) {
	t.Parallel()
	admin, jobs := installPlacementPolicy(t)
	ctx := context.WithoutCancel(t.Context())
	createServiceAccounts(t, jobs, "warehouse-team-a", "warehouse2-team-a")
	cms, pods := admin.CoreV1().ConfigMaps(jobs), admin.CoreV1().Pods(jobs)
	live := createProfilesConfigMap(t, jobs, accountProfiles)
	withAccount := func(sa string) *corev1.Pod {
		p := handMadePod("team-a", nil)
		p.Spec.ServiceAccountName = sa
		return p
	}
	require.Eventually(t, func() bool {
		_, err := pods.Create(ctx, withAccount("warehouse2-team-a"), dryRun)
		return err != nil
	}, time.Minute, tick, "the policy takes effect: a ServiceAccount no profile names yet is refused")
	var made *corev1.Pod
	require.Eventually(t, func() bool {
		var err error
		made, err = pods.Create(ctx, withAccount("warehouse-team-a"), metav1.CreateOptions{})
		return err == nil
	}, time.Minute, tick, "the policy reads the ConfigMap")

	changed := append([]job.Profile{{Name: job.DefaultProfile, Teams: []string{job.GrantAllTeams}}}, accountProfiles...)
	changed[1].ServiceAccount = "warehouse2-{team}"
	const grace = 24 * time.Hour
	now := time.Now()
	render := kube.RenderConfig{Namespace: jobs, Installation: "deploytest"}
	want, _ := kube.RetainPlacements(kube.ProfilesConfigMap(render, changed), live, now, grace)
	live, err := cms.Update(ctx, written(live, want), metav1.UpdateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		_, err := pods.Create(ctx, withAccount("warehouse2-team-a"), dryRun)
		return err == nil
	}, time.Minute, tick, "the new ServiceAccount is admitted")
	_, err = pods.Create(ctx, withAccount("warehouse-team-a"), dryRun)
	require.NoError(t, err, "the old one too, during its grace")

	want, _ = kube.RetainPlacements(kube.ProfilesConfigMap(render, changed), live, now.Add(grace), grace)
	_, err = cms.Update(ctx, written(live, want), metav1.UpdateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		_, err := pods.Create(ctx, withAccount("warehouse-team-a"), dryRun)
		return err != nil
	}, time.Minute, tick, "the old one is refused once its grace has passed")
	for _, finalizers := range [][]string{{"deploytest/keep"}, nil} {
		err = retry.RetryOnConflict(retry.DefaultRetry, func() error { // (the scheduler writes it too)
			p, err := pods.Get(ctx, made.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			p.Finalizers = finalizers
			_, err = pods.Update(ctx, p, metav1.UpdateOptions{})
			return err
		})
		require.NoError(t, err, "an update of a pod made before (finalizers %v)", finalizers)
	}
}
