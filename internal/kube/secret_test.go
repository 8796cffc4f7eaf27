package kube

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The Secrets, Jobs and ServiceAccount a fenced Writer hands out write nothing once its
// fence is down, as its CronJobs do (TestFencedApplierWritesNothingOnceTheFenceIsDown).
func TestFencedWriterWritesNoSecretJobOrServiceAccountOnceTheFenceIsDown(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	errDeposed := errors.New("lease lost")
	w := NewWriter(c.client, c.ns)
	fenced := w.Fenced(func(context.Context) error { return errDeposed })
	want := TeamOAuthSecret(c.ns, "inst-1", "finance", "client", "s3cret")

	require.ErrorIs(t, fenced.Secrets().Create(t.Context(), want), errDeposed)
	_, err := c.client.CoreV1().Secrets(c.ns).Get(t.Context(), want.Name, metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "nothing created")

	require.NoError(t, w.Secrets().Create(t.Context(), want))
	live, err := c.client.CoreV1().Secrets(c.ns).Get(t.Context(), want.Name, metav1.GetOptions{})
	require.NoError(t, err)
	changed := TeamOAuthSecret(c.ns, "inst-1", "finance", "client", "rotated")
	require.ErrorIs(t, fenced.Secrets().Update(t.Context(), live, changed), errDeposed)
	require.ErrorIs(t, fenced.Secrets().Delete(t.Context(), live), errDeposed)
	after, err := c.client.CoreV1().Secrets(c.ns).Get(t.Context(), want.Name, metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, live.ResourceVersion, after.ResourceVersion, "nothing updated or deleted")

	rendered, _ := Render(testJob(), testDeployment(), c.cfg)
	cj, err := c.applier.Apply(t.Context(), nil, rendered)
	require.NoError(t, err)
	require.ErrorIs(t, fenced.Jobs().Start(t.Context(), cj, ManualExecution{ID: "run-1"}), errDeposed)
	_, err = c.client.BatchV1().Jobs(c.ns).Get(t.Context(), "run-1", metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "no Job started")

	_, err = fenced.EnsureJobServiceAccount(t.Context(), "fenced-sa", "inst-1")
	require.ErrorIs(t, err, errDeposed)
	_, err = c.client.CoreV1().ServiceAccounts(c.ns).Get(t.Context(), "fenced-sa", metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "no ServiceAccount created")
}

// A Secret write is conditioned on what the caller saw: a create takes over no Secret of
// the name, an update of a Secret changed since is refused, a delete of one gone is done.
func TestSecretWritesAreConditionedOnWhatTheCallerSaw(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	a := NewWriter(c.client, c.ns).Secrets()
	want := TeamOAuthSecret(c.ns, "inst-1", "finance", "client", "s3cret")
	require.NoError(t, a.Create(t.Context(), want))
	require.True(t, apierrors.IsAlreadyExists(a.Create(t.Context(), want)))

	live, err := c.client.CoreV1().Secrets(c.ns).Get(t.Context(), want.Name, metav1.GetOptions{})
	require.NoError(t, err)
	require.NoError(t, a.Update(t.Context(), live, TeamOAuthSecret(c.ns, "inst-1", "finance", "client", "rotated")))
	require.True(t, apierrors.IsConflict(a.Update(t.Context(), live, want)), "live changed since it was read")
	require.True(t, apierrors.IsConflict(a.Delete(t.Context(), live)), "live changed since it was read")

	cur, err := c.client.CoreV1().Secrets(c.ns).Get(t.Context(), want.Name, metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "rotated", string(cur.Data[EnvTeamClientSecret]))
	require.NoError(t, a.Delete(t.Context(), cur))
	require.NoError(t, a.Delete(t.Context(), cur), "a Secret already gone counts as deleted")
}
