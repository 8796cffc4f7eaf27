package kube

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/datajobs/datajobs/internal/testenv"
)

// slowCronJobReads is a RoundTripper that holds every read of a CronJob until release is
// closed, counting them: an apiserver slow to answer, injected.
type slowCronJobReads struct {
	rt      http.RoundTripper
	release chan struct{}
	reads   atomic.Int32
}

func (s *slowCronJobReads) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodGet && strings.Contains(req.URL.Path, "/cronjobs/") {
		s.reads.Add(1)
		select {
		case <-s.release:
		case <-req.Context().Done():
		}
	}
	return s.rt.RoundTrip(req)
}

// Starts of one job that want its CronJob while a read of it is under way share that read:
// 20 starts at once, the apiserver slow to answer, read the CronJob a few times, not 20,
// and each creates its Job from it. One read a start was half of the tracker's round trips
// at 100 starts a second (bench/triggers, issue 42: 6,000 reads for 6,000 starts, p50
// 267 ms each on a loaded machine, every start waiting on it before its create).
func TestStartsOfOneJobAtOnceShareTheCronJobsRead(t *testing.T) {
	t.Parallel()
	const n = 20
	c := newCluster(t)
	rendered, _ := Render(testJob(), testDeployment(), c.cfg)
	cj, err := c.applier.Apply(t.Context(), nil, rendered)
	require.NoError(t, err)

	slow := &slowCronJobReads{release: make(chan struct{})}
	rc := testenv.RestConfig(t)
	rc.QPS, rc.Burst = 50, 100 // the service's fallback, not client-go's 5/10
	rc.Wrap(func(rt http.RoundTripper) http.RoundTripper { slow.rt = rt; return slow })
	client, err := kubernetes.NewForConfig(rc)
	require.NoError(t, err)
	jobs := NewWriter(client, c.ns).Jobs()

	var entered sync.WaitGroup
	entered.Add(n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			entered.Done()
			read, err := jobs.CronJob(t.Context(), cj.Name, testJob().UID)
			if err == nil {
				err = jobs.Start(t.Context(), read, ManualExecution{ID: fmt.Sprintf("shared-read-%02d", i)})
			}
			errs[i] = err
		})
	}
	entered.Wait()
	require.Eventually(t, func() bool { return slow.reads.Load() >= 1 }, 10*time.Second, time.Millisecond)
	time.Sleep(300 * time.Millisecond) // the other starts reach the read under way
	close(slow.release)
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	require.Less(t, int(slow.reads.Load()), n/2, "a read shared, not one a start")
	list, err := c.client.BatchV1().Jobs(c.ns).List(t.Context(), metav1.ListOptions{})
	require.NoError(t, err)
	require.Len(t, list.Items, n, "each start its Job")
}
