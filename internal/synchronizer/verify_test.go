package synchronizer_test

import (
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/testenv"
)

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// The leader's cache keeps no CronJob spec (kube.Trim): a CronJob edited by hand while no
// leader ran is still repaired by the next one, which reads from the apiserver that one
// CronJob, whose generation moved since its write was recorded, and no other. A cache
// that hid the edit would leave it; one that could not tell would read every CronJob
// (100,000 GETs at a cold start).
func TestANewLeaderReadsOnlyTheCronJobEditedWhileNoneLed(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	names := []string{"kept-a", "edited", "kept-b"}
	for _, name := range names {
		f.createJob(name)
		f.deploy(name, job.DeploymentChange{JobVersion: ptr("v1"), Schedule: ptr("0 * * * *")})
	}
	f.start()
	for _, name := range names {
		f.synced(name)
	}
	f.stop()
	versions := map[string]string{}
	for _, name := range names {
		versions[name] = f.cronJob(name).ResourceVersion
	}
	cj := f.cronJob("edited")
	cj.Spec.Schedule = "1 1 1 1 *"
	_, err := f.client.BatchV1().CronJobs(f.ns).Update(t.Context(), cj, metav1.UpdateOptions{FieldManager: "kubectl-edit"})
	require.NoError(t, err)

	var mu sync.Mutex
	read := map[string]int{} // single CronJobs the synchronizer read, by name
	rc := testenv.RestConfig(t)
	rc.QPS, rc.Burst = 50, 100
	prefix := "/apis/batch/v1/namespaces/" + f.ns + "/cronjobs/"
	rc.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			if name, ok := strings.CutPrefix(r.URL.Path, prefix); ok && r.Method == http.MethodGet {
				mu.Lock()
				read[name]++
				mu.Unlock()
			}
			return rt.RoundTrip(r)
		})
	}
	f.syncClient = kubernetes.NewForConfigOrDie(rc)
	f.start()
	f.eventually(func() bool { return f.cronJob("edited").Spec.Schedule == "0 * * * *" }, "the edit reverted")
	f.synced("edited")
	f.stop()
	mu.Lock()
	defer mu.Unlock()
	require.Contains(t, read, "edited", "the edited CronJob was read to compare it")
	require.NotContains(t, read, "kept-a")
	require.NotContains(t, read, "kept-b")
	for _, name := range []string{"kept-a", "kept-b"} {
		require.Equal(t, versions[name], f.cronJob(name).ResourceVersion, "%s untouched", name)
	}
	require.NotEqual(t, versions["edited"], f.cronJob("edited").ResourceVersion)
}
