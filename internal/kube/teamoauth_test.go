package kube

import (
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// A job of a team with OAuth credentials reads them as VDK's jobs do, from the team's
// Secret: the CronJob holds a reference, never a value (a value in the CronJob would be
// readable by anyone who may read CronJobs, and in the database's recorded spec).
func TestTeamCredentialsReachThePodAsSecretReferences(t *testing.T) {
	t.Parallel()
	j := testJob()
	j.TeamOAuth = true
	cj, _ := Render(j, testDeployment(), testConfig())
	env := map[string]corev1.EnvVar{}
	for _, e := range cj.Spec.JobTemplate.Spec.Template.Spec.Containers[0].Env {
		env[e.Name] = e
	}
	for _, key := range []string{EnvTeamClientID, EnvTeamClientSecret} {
		e, ok := env[key]
		require.True(t, ok, "%s is set", key)
		require.Empty(t, e.Value, "%s is a reference, not a value", key)
		require.Equal(t, &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: "datajobs-team-finance-oauth"}, Key: key, Optional: new(false),
		}, e.ValueFrom.SecretKeyRef)
	}
	require.True(t, RefersToTeamOAuth(cj, "finance"))
	require.False(t, RefersToTeamOAuth(cj, "marketing"))

	cj, _ = Render(testJob(), testDeployment(), testConfig())
	require.False(t, RefersToTeamOAuth(cj, "finance"), "a team without credentials gets no reference (TestHashIsStable: its jobs render as before)")
}

// The Secret of a team carries VDK's keys and this installation's labels, which the
// synchronizer's informer selects on.
func TestTeamOAuthSecretIsLabelledAsTheInstallations(t *testing.T) {
	t.Parallel()
	s := TeamOAuthSecret("jobs", "inst-1", "finance", "client", "s3cret")
	require.Equal(t, "datajobs-team-finance-oauth", s.Name)
	require.True(t, TeamOAuthSelector().Matches(labels.Set(s.Labels)))
	require.Equal(t, "inst-1", s.Labels[LabelInstallation])
	require.Equal(t, map[string][]byte{EnvTeamClientID: []byte("client"), EnvTeamClientSecret: []byte("s3cret")}, s.Data)
}
