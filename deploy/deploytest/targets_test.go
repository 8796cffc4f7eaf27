package deploytest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/datajobs/datajobs/internal/kube"
	"github.com/datajobs/datajobs/internal/testenv"
)

// allowed asks the apiserver whether the chart's ServiceAccount (in.client's token) may
// do verb on resource (group "", or "batch") named name (empty: any) in namespace ns.
func (in *install) allowed(t *testing.T, ns, verb, group, resource, name string) bool {
	t.Helper()
	r, err := in.client.AuthorizationV1().SelfSubjectAccessReviews().Create(t.Context(), &authorizationv1.SelfSubjectAccessReview{
		Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: ns, Verb: verb, Group: group, Resource: resource, Name: name,
		}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	return r.Status.Allowed
}

// Issue 44: a shard of a local execution target drives the CronJobs, Jobs, pods, team
// Secrets, placements ConfigMap and ServiceAccounts of the target's namespace, and a shard
// of a target in another cluster reads its kubeconfig Secret in the jobs namespace with a
// get; the chart granted neither (every call below was forbidden), and its admission
// policies on teams' pods matched the jobs namespace only. With `targets` and
// `targetKubeconfigSecrets`, checked against the apiserver as the service's ServiceAccount:
// every verb of the jobs namespace's Role is granted in the target's, get of the named
// kubeconfig Secret and of no other, and a team's pod in the target is held to its team's
// ServiceAccount by that namespace's own ConfigMap datajobs-profiles.
func TestChartGrantsTheJobsRightsInALocalTargetAndOnlyItsKubeconfigSecret(t *testing.T) {
	t.Parallel()
	target := testenv.Namespace(t)
	in := installRBACWith(t, nil, fmt.Sprintf("targets: [{name: team-b, namespace: %s}]\ntargetKubeconfigSecrets: [eu-kubeconfig]\n", target))
	admin := testenv.Clientset(t)
	ctx := context.WithoutCancel(t.Context())

	var targetRole *rbacv1.Role
	for _, o := range in.objs {
		if o.GetKind() == "Role" && o.GetNamespace() == target {
			targetRole = into[rbacv1.Role](t, o)
		}
	}
	require.NotNil(t, targetRole, "a Role in the target's namespace")
	kubeconfigRule := rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{"eu-kubeconfig"}, Verbs: []string{"get"}}
	require.Equal(t, append(targetRole.Rules[:len(targetRole.Rules):len(targetRole.Rules)], kubeconfigRule), in.role.Rules,
		"the target's Role is the jobs namespace's, less the kubeconfig Secrets")
	for _, r := range targetRole.Rules {
		for _, verb := range r.Verbs {
			name := ""
			if len(r.ResourceNames) > 0 {
				name = r.ResourceNames[0]
			}
			require.True(t, in.allowed(t, target, verb, r.APIGroups[0], r.Resources[0], name), "%s %s in the target", verb, r.Resources[0])
		}
	}

	// The kubeconfig Secret, read as a shard reads it; no other.
	for _, name := range []string{"eu-kubeconfig", "other"} {
		_, err := admin.CoreV1().Secrets(in.jobs).Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string][]byte{"kubeconfig": []byte("apiVersion: v1\nkind: Config\n")},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	data, err := kube.KubeconfigFromSecret(ctx, in.client, in.jobs, "eu-kubeconfig")
	require.NoError(t, err)
	require.Contains(t, string(data), "kind: Config")
	_, err = kube.KubeconfigFromSecret(ctx, in.client, in.jobs, "other")
	require.True(t, apierrors.IsForbidden(err), "another Secret of the jobs namespace: %v", err)
	require.False(t, in.allowed(t, target, "get", "", "secrets", "eu-kubeconfig"), "nor that name in the target")
	require.False(t, in.allowed(t, in.release, "get", "", "secrets", "eu-kubeconfig"), "nor in the release namespace")
	require.False(t, in.allowed(t, in.jobs, "list", "", "configmaps", ""), "nothing broader")

	// The admission policies, for real: the service's CronJob of team A in the target is
	// admitted; team A's pods there are checked against the target's own ConfigMap.
	installAdmissionPolicy(t, in.objs, in.client, in.jobs)
	createPodPolicies(t, in.objs)
	createServiceAccounts(t, target, "datajobs-job-team-a", "datajobs-job-team-b")
	_, err = in.client.BatchV1().CronJobs(target).Create(ctx, renderedCronJob(target), metav1.CreateOptions{})
	require.NoError(t, err, "the service writes team A's CronJob in the target")
	pods := admin.CoreV1().Pods(target)
	require.Eventually(t, func() bool {
		_, err := pods.Create(ctx, handMadePod("team-a", nil), dryRun)
		return apierrors.IsForbidden(err) || apierrors.IsInvalid(err)
	}, time.Minute, tick, "no ConfigMap datajobs-profiles in the target: no team's pod there")
	createProfilesConfigMap(t, target, nil)
	require.Eventually(t, func() bool {
		_, err := pods.Create(ctx, handMadePod("team-a", nil), dryRun)
		return err == nil
	}, time.Minute, tick, "team A's pod with its own ServiceAccount, once the target's ConfigMap is there")
	borrowed := handMadePod("team-a", nil)
	borrowed.Spec.ServiceAccountName = "datajobs-job-team-b"
	_, err = pods.Create(ctx, borrowed, dryRun)
	require.True(t, apierrors.IsForbidden(err), "team A's pod as team B's ServiceAccount in the target: %v", err)
	require.ErrorContains(t, err, "not datajobs-job-team-b")
}

// A local target's namespace is created, labelled as the jobs namespace, only when asked;
// a target in the jobs namespace, or two in one, is refused at install.
func TestChartCreatesATargetsNamespaceOnlyWhenAsked(t *testing.T) {
	t.Parallel()
	objs := render(t, "datajobs", values(t, `database: {existingSecret: db}
auth: {mode: none}
targets: [{name: b, namespace: jobs-b, createNamespace: true}, {name: c, namespace: jobs-c}]`))
	var made []string
	for _, o := range objs {
		if o.GetKind() == "Namespace" {
			made = append(made, o.GetName())
		}
	}
	require.Equal(t, []string{"datajobs-jobs", "jobs-b"}, made)
	ns := into[corev1.Namespace](t, find(t, objs, "Namespace", "jobs-b"))
	require.Equal(t, "restricted", ns.Labels["pod-security.kubernetes.io/enforce"])
	for _, doc := range []string{
		"targets: [{name: b, namespace: datajobs-jobs}]",
		"targets: [{name: b, namespace: x}, {name: c, namespace: x}]",
	} {
		_, err := renderErr("datajobs", values(t, "database: {existingSecret: db}\nauth: {mode: none}\n"+doc))
		require.ErrorContains(t, err, "is the jobs namespace or another target's", doc)
	}
}
