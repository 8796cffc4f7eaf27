package tracker_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	batchlisters "k8s.io/client-go/listers/batch/v1"

	"github.com/datajobs/datajobs/internal/controller"
	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/kube"
	"github.com/datajobs/datajobs/internal/tracker"
)

// cronJobReads is a RoundTripper that counts the reads of one CronJob.
type cronJobReads struct {
	rt    http.RoundTripper
	reads atomic.Int32
}

func (c *cronJobReads) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodGet && strings.Contains(req.URL.Path, "/cronjobs/") {
		c.reads.Add(1)
	}
	return c.rt.RoundTrip(req)
}

// Starts of a job whose CronJob is unchanged read it from the apiserver once, not once a
// start: the read was one of a start's two round trips (bench/triggers at 100 starts a
// second: about 2,000 reads, p50 137 ms each, the worker held meanwhile). A start after
// the CronJob's job template changed runs the new template, and one after the CronJob is
// deleted starts nothing: it waits for the CronJob and times out as before.
//
// The tracker tells by its own watch of the CronJobs, or by the synchronizer's cache of
// them when the shard shares it (tracker.Config.CronJobs; here an informer as the
// synchronizer's term makes it, with its transform).
func TestStartsReadAnUnchangedCronJobOnceAndAChangedOneAgain(t *testing.T) {
	t.Run("own watch", func(t *testing.T) { startsReadAnUnchangedCronJobOnce(t, nil) })
	t.Run("the synchronizer's cache", func(t *testing.T) {
		startsReadAnUnchangedCronJobOnce(t, func(f *execFixture) func() batchlisters.CronJobNamespaceLister {
			factory := informers.NewSharedInformerFactoryWithOptions(f.client, 0, informers.WithNamespace(f.ns), informers.WithTransform(kube.Trim))
			lister := factory.Batch().V1().CronJobs().Lister().CronJobs(f.ns)
			factory.Start(t.Context().Done())
			t.Cleanup(factory.Shutdown)
			factory.WaitForCacheSync(t.Context().Done())
			return func() batchlisters.CronJobNamespaceLister { return lister }
		})
	})
}

func startsReadAnUnchangedCronJobOnce(t *testing.T, shared func(*execFixture) func() batchlisters.CronJobNamespaceLister) {
	f := newExecFixture(t)
	j := f.createJob("one-read")
	allow := "Allow"
	f.deploy(j.Name, job.DeploymentChange{JobVersion: ptr("v1"), Policy: job.PolicyChange{ConcurrencyPolicy: &allow}})
	f.heldCronJob(j)

	c := &cronJobReads{}
	cfg := tracker.Config{Namespace: f.ns, Settings: controller.Settings{Interval: time.Hour}, StartTimeout: 3 * time.Second}
	if shared != nil {
		cfg.CronJobs = shared(f)
	}
	x := tracker.New(cfg, f.db, wrappedClient(t, func(rt http.RoundTripper) http.RoundTripper { c.rt = rt; return c }))
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = x.Run(ctx, f.epoch) })
	defer func() {
		cancel()
		wg.Wait()
	}()

	for range 3 {
		f.job(f.run(j.Name, ""))
	}
	require.EqualValues(t, 1, c.reads.Load(), "one read for three starts one after the other")

	cronJobs := f.client.BatchV1().CronJobs(f.ns)
	cj, err := cronJobs.Get(t.Context(), j.Name, metav1.GetOptions{})
	require.NoError(t, err)
	cj.Spec.JobTemplate.Spec.Template.Annotations = map[string]string{"test/template": "v2"}
	_, err = cronJobs.Update(t.Context(), cj, metav1.UpdateOptions{})
	require.NoError(t, err)
	// The change reaches the starts with its watch event: a start made before may still
	// run the template before it, never one after.
	newTemplate := func() bool {
		return f.job(f.run(j.Name, "")).Spec.Template.Annotations["test/template"] == "v2"
	}
	f.eventually(newTemplate, "a start after the change runs the new template")
	require.True(t, newTemplate(), "and the next one too")

	require.NoError(t, cronJobs.Delete(t.Context(), j.Name, metav1.DeleteOptions{}))
	f.eventually(func() bool {
		_, err := cronJobs.Get(t.Context(), j.Name, metav1.GetOptions{})
		return err != nil
	}, "the CronJob gone")
	time.Sleep(500 * time.Millisecond) // its delete event reaches the tracker's watch
	id := f.run(j.Name, "")
	e := f.status(j.Name, id, job.ExecPlatformError)
	require.Contains(t, e.Message, "did not exist within", "no Job started from the deleted CronJob")
	require.True(t, f.jobGone(id))
}
