package kube_test

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/client-go/rest"

	"github.com/datajobs/datajobs/internal/kube"
	"github.com/datajobs/datajobs/internal/testenv"
)

// An apiserver without API Priority and Fairness: a TLS server that answers the probe
// without the X-Kubernetes-PF-* headers (the test cluster's apiserver always runs APF).
func serverWithoutAPF(t *testing.T) *rest.Config {
	t.Helper()
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("ok"))
	}))
	t.Cleanup(srv.Close)
	return &rest.Config{Host: srv.URL, TLSClientConfig: rest.TLSClientConfig{Insecure: true}}
}

// kubeconfigOf writes a kubeconfig for the test TLS server at url (its certificate is
// not checked) and returns its path.
func kubeconfigOf(t *testing.T, url string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, os.WriteFile(path, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "`+url+`", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`), 0o600))
	return path
}

func TestPriorityAndFairnessIsDetectedFromTheApiserversAnswer(t *testing.T) {
	t.Parallel()
	apf, err := kube.PriorityAndFairness(t.Context(), testenv.RestConfig(t))
	require.NoError(t, err)
	require.True(t, apf, "the test cluster's apiserver classifies requests with APF")

	apf, err = kube.PriorityAndFairness(t.Context(), serverWithoutAPF(t))
	require.NoError(t, err)
	require.False(t, apf)
}

func TestTheAutomaticThrottleFollowsTheApiserver(t *testing.T) {
	t.Parallel()
	kubeconfig := testenv.Kubeconfig(t)

	c, err := kube.Connect(t.Context(), kube.ClusterConfig{Kubeconfig: kubeconfig})
	require.NoError(t, err)
	require.Negative(t, c.Rest.QPS, "under APF the client keeps no limit of its own")
	_, err = c.Client.Discovery().ServerVersion()
	require.NoError(t, err, "the unthrottled client works")

	c, err = kube.Connect(t.Context(), kube.ClusterConfig{Kubeconfig: kubeconfig, QPS: 20})
	require.NoError(t, err)
	require.InDelta(t, 20, c.Rest.QPS, 0)
	require.Equal(t, 40, c.Rest.Burst, "an explicit QPS wins; the burst defaults to twice it")

	c, err = kube.Connect(t.Context(), kube.ClusterConfig{Kubeconfig: kubeconfig, QPS: -1})
	require.NoError(t, err)
	require.Negative(t, c.Rest.QPS)
}

func TestTheAutomaticThrottleFallsBackWithoutAPF(t *testing.T) {
	t.Parallel()
	rc := serverWithoutAPF(t)
	c, err := kube.Connect(t.Context(), kube.ClusterConfig{Kubeconfig: kubeconfigOf(t, rc.Host)})
	require.NoError(t, err)
	require.InDelta(t, kube.FallbackThrottle.QPS, c.Rest.QPS, 0)
	require.Equal(t, kube.FallbackThrottle.Burst, c.Rest.Burst)

	// An apiserver that cannot be reached at start: the fallback, not an error.
	unreachable := &rest.Config{Host: "https://127.0.0.1:1"}
	_, err = kube.PriorityAndFairness(t.Context(), unreachable)
	require.Error(t, err)
}
