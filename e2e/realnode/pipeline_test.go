package realnode

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

// pipelineStep is every node's job code: it prints the arguments it got, and fails when
// they say "fail".
const pipelineStep = `import json

def run(job_input):
    args = job_input.get_arguments()
    print("pipeline-args " + json.dumps(args, sort_keys=True), flush=True)
    if args.get("fail"):
        raise ValueError("pipeline-boom")
`

// pipelineJobs are the diamond's jobs: a, then b and c, then d.
var pipelineJobs = []string{"rn-pipe-a", "rn-pipe-b", "rn-pipe-c", "rn-pipe-d"}

// TestAPipelineDiamondRunsRealJobsInOrderWithTheirArgumentsAndAFailedRootStartsNothingAfter
// is issue 40's diamond on the real node: nodes B and C after A, D after both, each an
// ordinary execution of its own job whose code prints the arguments it got. The run's
// arguments, each node's own and the logical time reach each job's code, and each node
// starts only after its upstream nodes ended. A second run, whose A fails (its code
// raises), makes B, C and D upstream_failed and creates no Job for them. The two runs
// overlap (the second's A waits for the first's: its job's concurrency policy, Forbid) to
// keep the test's time to one run's: about 20 s per node on the real node under load. A
// repair is not run here (another 3 nodes in a row); internal/tracker's
// TestAFailedRootFailsThePipelineAndARepairRunsOnlyWhatFailed covers it on kwok.
func TestAPipelineDiamondRunsRealJobsInOrderWithTheirArgumentsAndAFailedRootStartsNothingAfter(t *testing.T) {
	t.Parallel()
	s := startService(t, t.TempDir())
	s.deployAll(t, pipelineJobs, map[string]string{"10_args.py": pipelineStep, "config.ini": configINI("3.11") + "retries = 0\n"})
	const pipe = "/pipelines/rn-diamond"
	spec := `{"max_active_runs":2,"nodes":[
		{"name":"node-a","job_name":"rn-pipe-a","arguments":{"node":"a"}},
		{"name":"node-b","job_name":"rn-pipe-b","depends_on":["node-a"],"arguments":{"node":"b","side":"left"}},
		{"name":"node-c","job_name":"rn-pipe-c","depends_on":["node-a"],"arguments":{"node":"c"}},
		{"name":"node-d","job_name":"rn-pipe-d","depends_on":["node-b","node-c"],"arguments":{"node":"d"}}]}`
	got := s.call(t, http.MethodPut, pipe, spec)
	require.Equal(t, http.StatusCreated, got.status, got.body)

	added := s.watchAddedJobs(t)
	first := s.runPipeline(t, pipe, `{"arguments":{"region":"eu","node":"run"},"logical_time":"2026-12-01T03:00:00Z"}`)
	s.waitNodeStarted(t, pipe, first, "node-a")
	failed := s.runPipeline(t, pipe, `{"arguments":{"fail":true}}`)

	// A fails: the rest is upstream_failed, never started.
	run := s.waitRun(t, pipe, failed, "failed")
	nodes := run.byName()
	require.Equal(t, "user_error", nodes["node-a"].Status, "%+v", nodes["node-a"])
	failedA := *nodes["node-a"].ExecutionID
	for _, name := range []string{"node-b", "node-c", "node-d"} {
		require.Equal(t, "upstream_failed", nodes[name].Status, "%s: %+v", name, nodes[name])
		require.Nil(t, nodes[name].ExecutionID, name)
	}

	// In order, with the arguments: the node's over the run's, the logical time over both.
	run = s.waitRun(t, pipe, first, "succeeded")
	nodes = run.byName()
	jobs := []string{failedA}
	for name, n := range nodes {
		require.Equal(t, "succeeded", n.Status, "%s: %+v", name, n)
		require.NotNil(t, n.ExecutionID, name)
		jobs = append(jobs, *n.ExecutionID)
		want := map[string]any{"node": strings.TrimPrefix(name, "node-"), "region": "eu", "logical_time": "2026-12-01T03:00:00Z"}
		if name == "node-b" {
			want["side"] = "left"
		}
		assert.Equal(t, want, s.printedArgs(t, n.JobName, *n.ExecutionID), "the arguments %s's code got", name)
		if name != "node-a" {
			require.Len(t, s.executions(t, n.JobName), 1, "%s: only the first run's execution", name)
		}
	}
	after := func(down string, ups ...string) {
		for _, up := range ups {
			assert.False(t, nodes[down].StartTime.Before(*nodes[up].EndTime), "%s started %s, before %s ended %s",
				down, nodes[down].StartTime, up, *nodes[up].EndTime)
		}
	}
	after("node-b", "node-a")
	after("node-c", "node-a")
	after("node-d", "node-b", "node-c")
	assert.ElementsMatch(t, jobs, added(), "the Jobs created: the first run's four and the failed run's A")
}

// deployAll creates and deploys each job of names with the same files through vdkcli,
// then waits until all are built (the builds run side by side).
func (s *service) deployAll(t *testing.T, names []string, files map[string]string) {
	t.Helper()
	for _, name := range names {
		dir := filepath.Join(t.TempDir(), name)
		require.NoError(t, os.MkdirAll(dir, 0o755))
		for f, body := range files {
			require.NoError(t, os.WriteFile(filepath.Join(dir, f), []byte(body), 0o644))
		}
		s.vdk(t, "create", "-n", name, "-t", team, "--cloud")
		s.vdk(t, "deploy", "-n", name, "-t", team, "-p", dir, "-r", "realnode e2e")
	}
	for _, name := range names {
		s.waitBuilt(t, name)
	}
}

// call makes a request as a person to path under the suite's team.
func (s *service) call(t *testing.T, method, path, body string) answer {
	t.Helper()
	return call(t, method, s.base+"/data-jobs/for-team/"+team+path, body)
}

// runPipeline starts a run of the pipeline at path with body and returns its id.
func (s *service) runPipeline(t *testing.T, path, body string) int64 {
	t.Helper()
	got := s.call(t, http.MethodPost, path+"/runs", body)
	require.Equal(t, http.StatusAccepted, got.status, got.body)
	var r struct {
		ID int64 `json:"id"`
	}
	require.NoError(t, json.Unmarshal([]byte(got.body), &r))
	return r.ID
}

type pipelineRun struct {
	Status string         `json:"status"`
	Nodes  []pipelineNode `json:"nodes"`
}

type pipelineNode struct {
	Name        string     `json:"name"`
	JobName     string     `json:"job_name"`
	Status      string     `json:"status"`
	ExecutionID *string    `json:"execution_id"`
	Attempt     int        `json:"attempt"`
	StartTime   *time.Time `json:"start_time"`
	EndTime     *time.Time `json:"end_time"`
	Message     string     `json:"message"`
}

func (r pipelineRun) byName() map[string]pipelineNode {
	out := map[string]pipelineNode{}
	for _, n := range r.Nodes {
		out[n.Name] = n
	}
	return out
}

// waitNodeStarted waits until node of the run id of the pipeline at path has an execution.
func (s *service) waitNodeStarted(t *testing.T, path string, id int64, node string) {
	t.Helper()
	require.Eventually(t, func() bool {
		got := s.call(t, http.MethodGet, fmt.Sprintf("%s/runs/%d", path, id), "")
		var r pipelineRun
		return got.status == http.StatusOK && json.Unmarshal([]byte(got.body), &r) == nil && r.byName()[node].ExecutionID != nil
	}, time.Minute, 200*time.Millisecond, "node %s of run %d started", node, id)
}

// waitRun waits until the run id of the pipeline at path is no longer running, requires
// it to be want and returns it.
func (s *service) waitRun(t *testing.T, path string, id int64, want string) pipelineRun {
	t.Helper()
	var r pipelineRun
	require.Eventually(t, func() bool {
		got := s.call(t, http.MethodGet, fmt.Sprintf("%s/runs/%d", path, id), "")
		r = pipelineRun{}
		return got.status == http.StatusOK && json.Unmarshal([]byte(got.body), &r) == nil && r.Status != "running"
	}, 4*time.Minute, 500*time.Millisecond, "run %d of %s ends: %+v", id, path, &r)
	require.Equal(t, want, r.Status, "%+v", r)
	return r
}

var printedArgs = regexp.MustCompile(`pipeline-args (\{.*\})`)

// printedArgs returns the arguments the code of execution id of job name printed.
func (s *service) printedArgs(t *testing.T, name, id string) map[string]any {
	t.Helper()
	log := s.logs(t, name, id)
	m := printedArgs.FindStringSubmatch(log)
	require.NotNil(t, m, "execution %s printed no arguments:\n%s", id, log)
	var args map[string]any
	require.NoError(t, json.Unmarshal([]byte(m[1]), &args))
	return args
}

// executions lists the executions of job name.
func (s *service) executions(t *testing.T, name string) []execution {
	t.Helper()
	var out []execution
	s.getJSON(t, "/data-jobs/for-team/"+team+"/jobs/"+name+"/executions", &out)
	return out
}

// watchAddedJobs watches the namespace's Jobs from now (the Jobs there are not added)
// until the test ends; the function it returns lists the names of those added so far.
func (s *service) watchAddedJobs(t *testing.T) func() []string {
	t.Helper()
	l, err := s.kube.BatchV1().Jobs(s.ns).List(t.Context(), metav1.ListOptions{})
	require.NoError(t, err)
	w, err := s.kube.BatchV1().Jobs(s.ns).Watch(t.Context(), metav1.ListOptions{ResourceVersion: l.ResourceVersion})
	require.NoError(t, err)
	var mu sync.Mutex
	var names []string
	var wg sync.WaitGroup
	wg.Go(func() {
		for ev := range w.ResultChan() {
			if j, ok := ev.Object.(*batchv1.Job); ok && ev.Type == watch.Added {
				mu.Lock()
				names = append(names, j.Name)
				mu.Unlock()
			}
		}
	})
	t.Cleanup(func() {
		w.Stop()
		wg.Wait()
	})
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), names...)
	}
}
