package synchronizer_test

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/testenv"
)

// BenchmarkDeployOfABuiltVersion measures deploy → CronJob latency of a deploy that
// switches a job between two versions whose images exist, with the build stage (the
// versions are stored sources, built once before the timer) and without it (--builder
// none: the versions are prebuilt tags), as the synchronizer benchmark's change latency
// measures it: from the service call to the CronJob's update seen by a watch. Each
// iteration is one deploy; run with -benchtime=150x. docs/benchmarks.md has the results.
func BenchmarkDeployOfABuiltVersion(b *testing.B) {
	b.Run("builder=layer", func(b *testing.B) {
		bs := newBuilds(b, testenv.Registry(b))
		bs.createJob("switch")
		versions := []string{
			bs.upload("switch", map[string]string{"config.ini": "[owner]\n", "step.py": "def run(job_input): pass\n"}),
			bs.upload("switch", map[string]string{"config.ini": "[owner]\n", "requirements.txt": "tinypkg\n"}),
		}
		for _, v := range versions {
			bs.deploy("switch", job.DeploymentChange{JobVersion: ptr(v), PythonVersion: ptr("3.11")})
			bs.builtImage("switch", v)
		}
		requests0 := bs.registryRequests()
		measureSwitches(b, bs.fixture, versions)
		b.ReportMetric(bs.registryRequests()-requests0, "registry-requests")
	})
	b.Run("builder=none", func(b *testing.B) {
		f := newFixture(b)
		f.start()
		f.createJob("switch")
		versions := []string{"release-1", "release-2"}
		for _, v := range versions {
			f.deploy("switch", job.DeploymentChange{JobVersion: ptr(v), PythonVersion: ptr("3.11")})
			f.synced("switch")
		}
		measureSwitches(b, f, versions)
	})
}

// measureSwitches deploys versions in turn b.N times and reports the p50 and p99 of the
// time from the deploy call to the watch event of the CronJob on the new version.
func measureSwitches(b *testing.B, f *fixture, versions []string) {
	ctx := b.Context()
	list, err := f.client.BatchV1().CronJobs(f.ns).List(ctx, metav1.ListOptions{})
	require.NoError(b, err)
	w, err := f.client.BatchV1().CronJobs(f.ns).Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	require.NoError(b, err)
	defer w.Stop()
	var took []time.Duration
	b.ResetTimer()
	for i := range b.N {
		v := versions[i%len(versions)]
		t0 := time.Now()
		_, err := f.svc.Deploy(ctx, team, "switch", job.DeploymentChange{JobVersion: ptr(v)}, "bench")
		require.NoError(b, err)
		timeout := time.After(30 * time.Second)
	wait:
		for {
			select {
			case ev, ok := <-w.ResultChan():
				require.True(b, ok, "the watch ended")
				cj, isCJ := ev.Object.(*batchv1.CronJob)
				if ev.Type == watch.Modified && isCJ && cj.Annotations["datajobs.io/job-version"] == v {
					took = append(took, time.Since(t0))
					break wait
				}
			case <-timeout:
				b.Fatalf("deploy %d of version %s not seen in 30 s", i, v)
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	b.StopTimer()
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(took[len(took)*99/100].Microseconds())/1000, "p99-ms")
}
