package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/datajobs/datajobs/bench/internal/benchenv"
	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/kube"
)

// floor creates n Jobs of a deployed job's pod template with a bare client-go loop (the
// benchmark's client: 2000 requests/s, burst 4000), one after the other and then 16 at a
// time, suspended so that no pod is made: the apiserver's own pace for the creates a burst
// asks of it.
func floor(ctx context.Context, be *benchenv.Env, n int) error {
	v := "v1"
	if _, err := be.Svc.CreateJob(ctx, team, job.Job{Name: "floor-job", Team: team}); err != nil {
		return fmt.Errorf("create job: %w", err)
	}
	d, err := be.Svc.Deploy(ctx, team, "floor-job", job.DeploymentChange{JobVersion: &v}, "bench")
	if err != nil {
		return fmt.Errorf("deploy: %w", err)
	}
	j, err := be.Svc.GetJob(ctx, team, "floor-job")
	if err != nil {
		return err
	}
	cj, _ := kube.Render(j, d, kube.RenderConfig{Namespace: be.NS}.WithDefaults())
	suspend := true
	newJob := func(prefix string, i int) *batchv1.Job {
		return &batchv1.Job{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%05d", prefix, i), Labels: cj.Spec.JobTemplate.Labels},
			Spec:       *cj.Spec.JobTemplate.Spec.DeepCopy(),
		}
	}
	fmt.Printf("\n## floor: %d Jobs created by a bare client-go loop (suspended: no pods)\n\n", n)
	t0 := time.Now()
	for i := range n {
		jb := newJob("seq", i)
		jb.Spec.Suspend = &suspend
		if _, err := be.Client.BatchV1().Jobs(be.NS).Create(ctx, jb, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create job %d: %w", i, err)
		}
	}
	took := time.Since(t0)
	fmt.Printf("one after the other: %s, %.0f Jobs/s\n", took.Round(10*time.Millisecond), float64(n)/took.Seconds())
	errs := make([]error, n)
	work := make(chan int)
	var wg sync.WaitGroup
	t0 = time.Now()
	for range 16 {
		wg.Go(func() {
			for i := range work {
				jb := newJob("par", i)
				jb.Spec.Suspend = &suspend
				_, errs[i] = be.Client.BatchV1().Jobs(be.NS).Create(ctx, jb, metav1.CreateOptions{})
			}
		})
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	took = time.Since(t0)
	if err := errors.Join(errs...); err != nil {
		return err
	}
	fmt.Printf("16 at a time:        %s, %.0f Jobs/s\n", took.Round(10*time.Millisecond), float64(n)/took.Seconds())
	return nil
}

func newGet(ctx context.Context, url string) (*http.Request, error) {
	return http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
}
