package e2e

import (
	"context"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/store"
	"github.com/datajobs/datajobs/internal/testenv"
)

// A target in another cluster (issue 44), reached through the kubeconfig of a Secret in
// the default target's namespace: its team's jobs converge there and the default team's
// here; with the second cluster's apiserver stopped, changes of the first still converge
// (its shard is another lease, other informers), its leader's datajobs_target_unreachable
// says so, the console of another replica (sync off: it reads the database) shows a
// banner naming the target, and a change made for the second during the outage converges
// once its apiserver is back, the banner gone.
func TestATargetInAnotherClusterConvergesThereAndItsOutageStopsOnlyItsShard(t *testing.T) {
	t.Parallel()
	dbURL, kubeconfig, ns := testenv.DatabaseURL(t), testenv.Kubeconfig(t), testenv.Namespace(t)
	local := testenv.Clientset(t)
	cluster2 := testenv.SecondCluster(t)
	rc, err := cluster2.RestConfig()
	require.NoError(t, err)
	far, err := kubernetes.NewForConfig(rc)
	require.NoError(t, err)
	ctx := t.Context()
	farNS := "far-" + ns
	_, err = far.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: farNS}}, metav1.CreateOptions{})
	require.NoError(t, err)
	config, err := os.ReadFile(cluster2.Kubeconfig)
	require.NoError(t, err)
	_, err = local.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "cluster2-kubeconfig"}, Data: map[string][]byte{"kubeconfig": config},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	db, err := store.Open(ctx, store.Config{URL: dbURL})
	require.NoError(t, err)
	defer db.Close()
	_, err = db.PutTarget(ctx, job.Target{Name: "far", Namespace: farNS, KubeconfigSecret: "cluster2-kubeconfig", DefaultFor: []string{"team-c"}})
	require.NoError(t, err)

	r := startReplica(t, dbURL, kubeconfig, ns)
	api := startReplica(t, dbURL, kubeconfig, ns, "--sync-mode", "off")
	banner := func(shown bool) func() bool {
		return func() bool {
			var page []byte
			return get(t, api, "/ui/", &page) == http.StatusOK &&
				strings.Contains(string(page), "Execution target <strong>far</strong> is unreachable since") == shown
		}
	}
	in := func(c kubernetes.Interface, namespace, name string) func() bool {
		return func() bool {
			_, err := c.BatchV1().CronJobs(namespace).Get(context.Background(), name, metav1.GetOptions{})
			return err == nil
		}
	}
	r.deployFor(t, "team-a", "near-job")
	r.deployFor(t, "team-c", "far-job")
	require.Eventually(t, in(local, ns, "near-job"), time.Minute, 50*time.Millisecond, "the default target's job here")
	require.Eventually(t, in(far, farNS, "far-job"), time.Minute, 50*time.Millisecond, "the far target's job in the second cluster")
	require.False(t, in(local, ns, "far-job")(), "not here")
	for _, target := range []string{"default", "far"} { // each shard's own series (before, the far one's were registered nowhere)
		require.Eventually(t, func() bool {
			v, ok := r.metric(`datajobs_sync_passes_total{result="ok",target="` + target + `"}`)
			return ok && v >= 1
		}, time.Minute, 100*time.Millisecond, "the %s shard's passes in /metrics", target)
	}
	require.True(t, banner(false)(), "no banner while every target runs")

	require.NoError(t, cluster2.APIServer.Stop())
	r.deployFor(t, "team-c", "far-during-outage")
	outage := time.Now()
	r.deployFor(t, "team-a", "near-during-outage")
	require.Eventually(t, in(local, ns, "near-during-outage"), time.Minute, 50*time.Millisecond,
		"the default target converges while the second cluster is down")
	t.Logf("a change of the default target converged %s into the second cluster's outage", time.Since(outage).Round(time.Millisecond))
	unreachable := func(want float64) func() bool {
		return func() bool {
			v, ok := r.metric(`datajobs_target_unreachable{target="far"}`)
			return ok && v == want
		}
	}
	require.Eventually(t, unreachable(1), time.Minute, 100*time.Millisecond,
		"the far shard's leader says its cluster is unreachable (after the step-down delay, the lease duration)")
	require.Eventually(t, banner(true), time.Minute, 100*time.Millisecond, "another replica's console shows the outage")
	// A run of the far target has its live log read in the second cluster, which does not
	// answer: 503 at once (before, the default target's namespace answered nothing).
	id := r.startExecutionFor(t, "team-c", "far-job")
	asked := time.Now()
	require.Equal(t, http.StatusServiceUnavailable, get(t, api, "/data-jobs/for-team/team-c/jobs/far-job/executions/"+id+"/logs", nil))
	require.Less(t, time.Since(asked), 15*time.Second, "bounded by the read's timeout")
	require.NoError(t, cluster2.APIServer.Start(ctx))
	require.Eventually(t, in(far, farNS, "far-during-outage"), 2*time.Minute, 100*time.Millisecond,
		"the far target catches up once its apiserver is back")
	require.Eventually(t, unreachable(0), time.Minute, 100*time.Millisecond, "and says it is back")
	require.Eventually(t, banner(false), time.Minute, 100*time.Millisecond, "the banner goes (two leases after the shard runs again)")
}
