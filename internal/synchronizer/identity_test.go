package synchronizer_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/datajobs/datajobs/internal/kube"
	"github.com/datajobs/datajobs/internal/synchronizer"
)

// TestATermMakesTheJobServiceAccountAndNeverTouchesAnExistingOne guards two failures: job
// pods that the apiserver never admits because their ServiceAccount is missing (dev and
// test clusters, where no chart made it), and a synchronizer that rewrites or deletes a
// ServiceAccount it did not make (the chart's, an operator's). A dry run makes nothing.
func TestATermMakesTheJobServiceAccountAndNeverTouchesAnExistingOne(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	sas := f.client.CoreV1().ServiceAccounts(f.ns)
	dry := f.synchronizerWith(synchronizer.Config{DryRun: true})
	_, err := dry.RunOnce(t.Context(), f.epoch)
	require.NoError(t, err)
	_, err = sas.Get(t.Context(), kube.DefaultJobServiceAccount, metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "a dry run creates no ServiceAccount: %v", err)

	f.start()
	var sa *corev1.ServiceAccount
	f.eventually(func() bool {
		sa, err = sas.Get(t.Context(), kube.DefaultJobServiceAccount, metav1.GetOptions{})
		return err == nil
	}, "the term creates the job pods' ServiceAccount")
	id, err := f.db.InstallationID(t.Context())
	require.NoError(t, err)
	assert.Equal(t, id, sa.Labels[kube.LabelInstallation])
	assert.Equal(t, new(false), sa.AutomountServiceAccountToken, "no API token in a pod that names it")
	f.stop()

	other := newFixture(t)
	mine, err := other.client.CoreV1().ServiceAccounts(other.ns).Create(t.Context(), &corev1.ServiceAccount{
		ObjectMeta: metav1.ObjectMeta{Name: kube.DefaultJobServiceAccount, Annotations: map[string]string{"example.com/owner": "the chart"}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = other.synchronizer(false).RunOnce(t.Context(), other.epoch)
	require.NoError(t, err)
	got, err := other.client.CoreV1().ServiceAccounts(other.ns).Get(t.Context(), kube.DefaultJobServiceAccount, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, mine.ResourceVersion, got.ResourceVersion, "an existing ServiceAccount is left as it is")
}
