package jobidentity_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/datajobs/datajobs/internal/auth"
	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/jobidentity"
	"github.com/datajobs/datajobs/internal/kube"
	"github.com/datajobs/datajobs/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m, testenv.WithKubernetes()) }

const installation = "0b3c1d2e-0000-4000-8000-000000000001"

// jobLabels are the labels the synchronizer renders on a pod of job name of team.
func jobLabels(team, name, inst string) map[string]string {
	return map[string]string{
		kube.LabelManagedBy: kube.ManagedByValue, kube.LabelInstallation: inst,
		kube.LabelJob: name, kube.LabelTeam: team, kube.LabelJobUID: "uid-of-" + name,
	}
}

// verifier runs a Verifier of namespace ns until the test ends and waits until it
// accepts tokens (a token of a pod of its own: the discovery and the pod watch are done).
func verifier(t *testing.T, ns string) *jobidentity.Verifier {
	t.Helper()
	v, err := jobidentity.New(jobidentity.Config{
		Client: testenv.Clientset(t), Namespace: ns,
		Installation: func(context.Context) (string, error) { return installation, nil },
	})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { v.Run(ctx) })
	t.Cleanup(func() { cancel(); wg.Wait() })
	probe := testenv.JobPod(t, testenv.Clientset(t), ns, "probe", kube.DefaultJobServiceAccount, jobLabels("team-p", "probe", installation))
	tok := testenv.JobToken(t, testenv.Clientset(t), probe, kube.JobTokenAudience)
	require.Eventually(t, func() bool {
		_, err := authenticate(v, tok)
		return err == nil
	}, 30*time.Second, 50*time.Millisecond, "the verifier discovers the issuer and watches the pods")
	return v
}

func authenticate(v *jobidentity.Verifier, token string) (auth.Identity, error) {
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.Header.Set("Authorization", "Bearer "+token)
	if !v.Owns(r) {
		return auth.Identity{}, job.Unauthenticated("not a job token")
	}
	return v.Authenticate(r)
}

// TestAJobTokenIsItsJobOnlyWhileItsPodRuns guards the token's binding: the apiserver's
// own token, bound to a running pod of a data job, makes the caller that job (and never
// an admin or a team member); once the pod has finished, or is deleted, the same
// unexpired token is refused.
func TestAJobTokenIsItsJobOnlyWhileItsPodRuns(t *testing.T) {
	t.Parallel()
	ns, kc := testenv.Namespace(t), testenv.Clientset(t)
	v := verifier(t, ns)
	a := testenv.JobPod(t, kc, ns, "job-a", kube.DefaultJobServiceAccount, jobLabels("team-a", "job-a", installation))
	tok := testenv.JobToken(t, kc, a, kube.JobTokenAudience)
	id, err := authenticate(v, tok)
	require.NoError(t, err)
	require.NotNil(t, id.Job)
	assert.Equal(t, auth.JobCaller{Team: "team-a", Name: "job-a", UID: "uid-of-job-a", Pod: a.Name}, *id.Job)
	assert.False(t, id.Admin)
	assert.False(t, id.MemberOf("team-a"), "a job is no member of its team: it reaches its own job only")

	testenv.SetPodPhase(t, kc, a, corev1.PodSucceeded)
	requireRefused(t, v, tok, "a token of a finished pod")

	b := testenv.JobPod(t, kc, ns, "job-b", kube.DefaultJobServiceAccount, jobLabels("team-a", "job-b", installation))
	tokB := testenv.JobToken(t, kc, b, kube.JobTokenAudience)
	_, err = authenticate(v, tokB)
	require.NoError(t, err)
	require.NoError(t, kc.CoreV1().Pods(ns).Delete(t.Context(), b.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64(0))}))
	requireRefused(t, v, tokB, "a token of a deleted pod")
}

// requireRefused waits until token is refused with 401 (the pod watch sees a change in
// milliseconds; the wait covers a loaded machine).
func requireRefused(t *testing.T, v *jobidentity.Verifier, token, what string) {
	t.Helper()
	require.Eventually(t, func() bool {
		_, err := authenticate(v, token)
		return job.KindOf(err) == job.KindUnauthenticated
	}, 10*time.Second, 20*time.Millisecond, "%s is refused", what)
}

// TestTokensThatAreNotAJobPodsOfThisInstallationAreRefused guards against a token that
// proves something else being taken for a job: another audience (a token meant for
// another service, replayed), a ServiceAccount of another namespace or another
// ServiceAccount of the jobs' namespace (anyone who may create pods there), a pod of
// another installation, and a pod that is no Job's.
func TestTokensThatAreNotAJobPodsOfThisInstallationAreRefused(t *testing.T) {
	t.Parallel()
	ns, other, kc := testenv.Namespace(t), testenv.Namespace(t), testenv.Clientset(t)
	v := verifier(t, ns)
	ours := jobLabels("team-a", "job-a", installation)

	a := testenv.JobPod(t, kc, ns, "job-a", kube.DefaultJobServiceAccount, ours)
	_, err := authenticate(v, testenv.JobToken(t, kc, a, "another-service"))
	assert.Equal(t, job.KindUnauthenticated, job.KindOf(err), "another audience: %v", err)

	elsewhere := testenv.JobPod(t, kc, other, "job-a", kube.DefaultJobServiceAccount, ours)
	_, err = authenticate(v, testenv.JobToken(t, kc, elsewhere, kube.JobTokenAudience))
	assert.Equal(t, job.KindUnauthenticated, job.KindOf(err), "a ServiceAccount of another namespace: %v", err)

	otherSA := testenv.JobPod(t, kc, ns, "job-c", "someone-else", jobLabels("team-a", "job-c", installation))
	_, err = authenticate(v, testenv.JobToken(t, kc, otherSA, kube.JobTokenAudience))
	assert.Equal(t, job.KindUnauthenticated, job.KindOf(err), "another ServiceAccount: %v", err)

	foreign := testenv.JobPod(t, kc, ns, "job-d", kube.DefaultJobServiceAccount, jobLabels("team-a", "job-d", "another-installation"))
	_, err = authenticate(v, testenv.JobToken(t, kc, foreign, kube.JobTokenAudience))
	assert.Equal(t, job.KindUnauthenticated, job.KindOf(err), "a pod of another installation: %v", err)

	bare, err := kc.CoreV1().Pods(ns).Create(t.Context(), &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "not-a-job-pod", Labels: jobLabels("team-a", "job-e", installation)},
		Spec: corev1.PodSpec{
			ServiceAccountName: kube.DefaultJobServiceAccount, AutomountServiceAccountToken: new(false),
			NodeSelector: map[string]string{"datajobs.io/test-node": "none"}, Containers: []corev1.Container{{Name: "c", Image: "registry.invalid/x:1"}},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	bare = testenv.SetPodPhase(t, kc, bare, corev1.PodRunning)
	_, err = authenticate(v, testenv.JobToken(t, kc, bare, kube.JobTokenAudience))
	assert.Equal(t, job.KindUnauthenticated, job.KindOf(err), "a pod of no Job: %v", err)

	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.Header.Set("Authorization", "Bearer not.a.jwt")
	assert.False(t, v.Owns(r), "a token of no issuer is left to the people's verifier")
}

// A job pod may run as the ServiceAccount of an execution profile granted to its team
// (docs/profiles.md): its token is accepted once the profiles' ConfigMap of this
// installation names that ServiceAccount for the team, and a pod of another team as the
// same template's is not. Before, only the jobs' and the --job-service-account-template
// ServiceAccounts were, and a job of such a profile could not read its own properties
// (checked: the token was refused, "not of the data jobs' ServiceAccount").
func TestATokenOfAProfilesServiceAccountIsAcceptedForTheTeamsGranted(t *testing.T) {
	t.Parallel()
	ns, kc := testenv.Namespace(t), testenv.Clientset(t)
	v := verifier(t, ns)
	a := testenv.JobPod(t, kc, ns, "job-a", "warehouse-team-a", jobLabels("team-a", "job-a", installation))
	b := testenv.JobPod(t, kc, ns, "job-b", "warehouse-team-b", jobLabels("team-b", "job-b", installation))
	tokA, tokB := testenv.JobToken(t, kc, a, kube.JobTokenAudience), testenv.JobToken(t, kc, b, kube.JobTokenAudience)
	_, err := authenticate(v, tokA)
	assert.Equal(t, job.KindUnauthenticated, job.KindOf(err), "no profile names it yet: %v", err)

	profiles := []job.Profile{{Name: "warehouse", ServiceAccount: "warehouse-{team}", Teams: []string{"team-a"}}}
	_, err = kc.CoreV1().ConfigMaps(ns).Create(t.Context(), kube.ProfilesConfigMap(kube.RenderConfig{Namespace: ns, Installation: installation}, profiles), metav1.CreateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		id, err := authenticate(v, tokA)
		return err == nil && id.Job.Name == "job-a"
	}, 30*time.Second, 50*time.Millisecond, "team A's profile's ServiceAccount")
	_, err = authenticate(v, tokB)
	assert.Equal(t, job.KindUnauthenticated, job.KindOf(err), "the profile is not team B's: %v", err)
}
