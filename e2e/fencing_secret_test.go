package e2e

import (
	"fmt"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/datajobs/datajobs/internal/kube"
	"github.com/datajobs/datajobs/internal/secrets"
	"github.com/datajobs/datajobs/internal/testenv"
)

// A leader paused past its lease, resumed while its successor holds the lease, must not
// write the team OAuth Secret whose credentials changed meanwhile, as it must not write a
// CronJob (TestPausedLeaderResumedAfterTakeoverWritesNothingToKubernetes): every write to
// Kubernetes goes through the one fenced writer (issue 39 item 4). The credentials change
// while the successor is paused too, so that the old leader is the only process that could
// act on it; the successor, once resumed, writes it.
func TestPausedLeaderResumedAfterTakeoverWritesNoSecret(t *testing.T) {
	t.Parallel()
	dbURL, kubeconfig, ns := testenv.DatabaseURL(t), testenv.Kubeconfig(t), testenv.Namespace(t)
	client := testenv.Clientset(t)
	keys := filepath.Join(t.TempDir(), "keys.json")
	_, err := secrets.AddKey(keys)
	require.NoError(t, err)

	api := startReplica(t, dbURL, kubeconfig, ns, "--sync-mode", "off", "--secrets-key-file", keys)
	tk := startTakeover(t, dbURL, kubeconfig, ns, "--secrets-key-file", keys)

	setCredentials := func(id, secret string) {
		require.Equal(t, http.StatusAccepted, api.do(t, http.MethodPut, "/data-jobs/teams/team-a/oauth-credentials",
			fmt.Sprintf(`{"clientId":%q,"clientSecret":%q}`, id, secret)))
	}
	// secret returns the zero value on an error, so that it can be polled.
	secret := func() *corev1.Secret {
		s, err := client.CoreV1().Secrets(ns).Get(t.Context(), kube.TeamOAuthSecretName("team-a"), metav1.GetOptions{})
		if err != nil {
			t.Logf("get secret: %v", err)
			return &corev1.Secret{}
		}
		return s
	}
	holds := func(s *corev1.Secret, id string) bool { return string(s.Data[kube.EnvTeamClientID]) == id }
	api.deploy(t, "fenced-secret")
	setCredentials("client-a", "s3cret-a")
	require.Eventually(t, func() bool { return holds(secret(), "client-a") }, 2*time.Minute, 100*time.Millisecond,
		"the leader creates the team's Secret")

	// Change the credentials once both are paused: nobody may write them now, and the old
	// leader is the only process that could.
	tk.depose(t)
	before := secret()
	require.NotEmpty(t, before.ResourceVersion)
	setCredentials("client-b", "s3cret-b")

	after := resumeOld(t, tk, secret, before.ResourceVersion)
	require.Equal(t, before.ResourceVersion, after.ResourceVersion, "the deposed leader wrote to the Secret")
	require.True(t, holds(after, "client-a"), "the deposed leader wrote the new credentials")

	// The rightful leader, resumed, writes the new credentials.
	resume(t, tk.next)
	require.Eventually(t, func() bool { return holds(secret(), "client-b") }, 2*time.Minute, 100*time.Millisecond,
		"the rightful leader writes the new credentials")
}
