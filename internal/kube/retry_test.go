package kube_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/datajobs/datajobs/internal/kube"
)

// Without a client-side limit the apiserver's API Priority and Fairness is what paces a
// converge: a request it rejects (429 with Retry-After, which the real apiserver answers
// only when its queues overflow) is sent again after that delay, not failed.
func TestA429IsRetriedAfterItsRetryAfter(t *testing.T) {
	t.Parallel()
	var (
		mu       sync.Mutex
		attempts []time.Time
	)
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/livez/ping" {
			w.Header().Set("X-Kubernetes-PF-FlowSchema-UID", "flow")
			_, _ = w.Write([]byte("ok"))
			return
		}
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		attempts = append(attempts, time.Now())
		first := len(attempts) == 1
		mu.Unlock()
		if first {
			w.Header().Set("Retry-After", "1")
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusTooManyRequests)
			_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"TooManyRequests","code":429}`))
			return
		}
		w.Header().Set("Content-Type", r.Header.Get("Content-Type"))
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write(body) // the object as sent
	}))
	t.Cleanup(srv.Close)
	c, err := kube.Connect(t.Context(), kube.ClusterConfig{Kubeconfig: kubeconfigOf(t, srv.URL)})
	require.NoError(t, err)
	require.Negative(t, c.Rest.QPS, "the server runs APF: no client-side limit")
	cj := &batchv1.CronJob{ObjectMeta: metav1.ObjectMeta{Name: "paced", Namespace: "ns"}}
	got, err := c.Client.BatchV1().CronJobs("ns").Create(t.Context(), cj, metav1.CreateOptions{})
	require.NoError(t, err, "the 429 was retried")
	require.Equal(t, "paced", got.Name)
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, attempts, 2)
	require.GreaterOrEqual(t, attempts[1].Sub(attempts[0]), time.Second, "the retry waited for Retry-After")
}
