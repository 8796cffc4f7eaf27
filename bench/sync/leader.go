package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/datajobs/datajobs/internal/devenv"
	"github.com/datajobs/datajobs/internal/kube"
	"github.com/datajobs/datajobs/internal/service"
	"github.com/datajobs/datajobs/internal/store"
)

// goMemLimit is the chart's GOMEMLIMIT for its default 1Gi memory limit (80 %,
// deploy/helm/datajobs goMemLimitPercent), given to both serve processes.
const goMemLimit = "858993459"

// leader measures a real `datajobs serve` leader (API, synchronizer, execution tracker,
// dispatcher) and a follower over the fleet's synced jobs, as the chart runs them
// (GOMEMLIMIT): their RSS and peak RSS, Go heap and a heap profile of the leader
// (out/leader.heap), once the leader is caught up and again with running executions
// running. The executions are started through the service; their pods are kept off the
// kwok node, which would finish them at once, by cordoning every node for the scenario,
// and the benchmark plays their kubelet (devenv.SetPodStatus), as bench/executions does.
// The processes run bin; their logs and heap profiles are named with prefix.
func (b *bench) leader(ctx context.Context, f *fleet, running int, bin, prefix string) error {
	n := len(f.names)
	running = min(running, n)
	b.printf("## leader (%d synced jobs, %d running executions; `%s serve` leader and follower, GOMEMLIMIT=%s)\n\n", n, running, bin, goMemLimit)
	// The benchmark's own lease would keep the serve processes followers: hand it over,
	// and take it back for the scenarios after this one.
	if err := f.db.ReleaseLease(ctx, store.SyncLeaseName, "bench", f.epoch); err != nil {
		return fmt.Errorf("release the benchmark's lease: %w", err)
	}
	defer b.retakeLease(ctx, f)
	before, err := cronJobVersions(ctx, b.admin, f.ns)
	if err != nil {
		return err
	}
	env := []string{"GOMEMLIMIT=" + goMemLimit}
	t0 := time.Now()
	lead, err := b.serveBin(ctx, f, bin, prefix+"leader", env, "--admin-profiling")
	if err != nil {
		return err
	}
	defer lead.stop()
	caughtUp, err := waitCaughtUp(ctx, lead, f, time.Duration(n)*20*time.Millisecond+5*time.Minute)
	if err != nil {
		return err
	}
	after, err := cronJobVersions(ctx, b.admin, f.ns)
	if err != nil {
		return err
	}
	m, err := lead.get(ctx, "/metrics")
	if err != nil {
		return err
	}
	b.printf("The leader took the lease and was caught up (first pass done, its queue empty, no reconcile for 2 s) %s after its start; "+
		"its reconciles by action: %s; CronJobs whose resourceVersion changed meanwhile: %d of %d.\n\n",
		secs(caughtUp.Sub(t0)), reconciles(m), changed(before, after), n)
	follow, err := b.serveBin(ctx, f, bin, prefix+"follower", env, "--admin-profiling")
	if err != nil {
		return err
	}
	defer follow.stop()
	if err := poll(ctx, 50*time.Millisecond, time.Minute, "the follower serves", func() (bool, error) {
		_, err := follow.get(ctx, "/healthz")
		return err == nil, err
	}); err != nil {
		return err
	}
	rows := []string{memoryRow(ctx, lead, "caught up, idle"), memoryRow(ctx, follow, "following")}
	t1 := time.Now()
	uncordon, err := cordonAll(ctx, b)
	if err != nil {
		return err
	}
	defer uncordon() // after the executions' Jobs are deleted: no pod of theirs is left to take
	ids, pods, err := b.runExecutions(ctx, f, running)
	defer b.deleteJobs(f, ids)
	if err != nil {
		return err
	}
	b.printf("%d executions started (service) and recorded running (their pods made Running by the benchmark) in %s.\n\n", running, secs(time.Since(t1)))
	time.Sleep(3 * time.Second) // the tracker's writes of the last transitions settle
	what := fmt.Sprintf("%d executions running", running)
	rows = append(rows, memoryRow(ctx, lead, what), memoryRow(ctx, follow, what))
	b.printf(memoryHeader+"%s", strings.Join(rows, ""))
	for _, s := range []*server{lead, follow} {
		path := filepath.Join(b.outDir, s.name+".heap")
		if err := b.saveHeap(ctx, s, path); err != nil {
			return err
		}
	}
	b.printf("\nHeap profiles in %s (%sleader.heap, %sfollower.heap); the leader's top by in-use bytes:\n\n```\n%s```\n\n",
		b.outDir, prefix, prefix, pprofTop(filepath.Join(b.outDir, prefix+"leader.heap")))
	// Ended as a kubelet would, so that a next leader scenario on this fleet starts them
	// again (a job runs one execution at a time).
	if err := b.finishExecutions(ctx, f, ids, pods); err != nil {
		return err
	}
	lead.stop()
	follow.stop()
	return nil
}

// waitCaughtUp waits until s holds the lease, has made a full pass, its sync queue is
// empty and no reconcile happened for 2 s, and returns when the last of that began.
func waitCaughtUp(ctx context.Context, s *server, f *fleet, timeout time.Duration) (time.Time, error) {
	var last float64 = -1
	lastAt := time.Now()
	var at time.Time
	err := poll(ctx, 100*time.Millisecond, timeout, "the leader is caught up", func() (bool, error) {
		holder, _, _, err := f.db.LeaseHolder(ctx, store.SyncLeaseName)
		if err != nil || !s.holds(holder) {
			return false, err
		}
		m, err := s.get(ctx, "/metrics")
		if err != nil {
			return false, err
		}
		reconciled := metricSum(m, "datajobs_sync_reconciles_total")
		if reconciled != last || metricSum(m, `datajobs_sync_passes_total{result="ok",target="default"}`) == 0 || metricSum(m, "datajobs_sync_queue_depth") != 0 {
			last, lastAt = reconciled, time.Now()
			return false, nil
		}
		at = lastAt
		return time.Since(lastAt) >= 2*time.Second, nil
	})
	return at, err
}

// runExecutions starts running executions, one on each of the fleet's first jobs,
// through the service, with every node cordoned (by the caller), plays the kubelet of their pods (made
// Running) and waits until the database records them all running. It returns the ids
// and the pods.
func (b *bench) runExecutions(ctx context.Context, f *fleet, running int) ([]string, []*corev1.Pod, error) {
	ids := make([]string, running)
	idx := make(map[string]int, running)
	for i := range ids {
		idx[f.names[i]] = i
	}
	if err := parallel(ctx, f.names[:running], 8, func(ctx context.Context, name string) error {
		ex, err := f.svc.StartExecution(ctx, team, name, service.ExecutionRequest{}, "bench", "bench-leader")
		ids[idx[name]] = ex.ID
		return err
	}); err != nil {
		return ids, nil, fmt.Errorf("start executions: %w", err)
	}
	want := make(map[string]bool, running)
	for _, id := range ids {
		want[id] = true
	}
	pods := map[string]*corev1.Pod{}
	if err := poll(ctx, 500*time.Millisecond, 10*time.Minute, fmt.Sprintf("the pods of %d executions", running), func() (bool, error) {
		list, err := b.admin.CoreV1().Pods(f.ns).List(ctx, metav1.ListOptions{LabelSelector: kube.LabelJobName})
		if err != nil {
			return false, err
		}
		for i := range list.Items {
			if p := &list.Items[i]; want[p.Labels[kube.LabelJobName]] {
				pods[p.Labels[kube.LabelJobName]] = p
			}
		}
		return len(pods) == running, nil
	}); err != nil {
		return ids, nil, err
	}
	podList := make([]*corev1.Pod, 0, len(pods))
	for _, p := range pods {
		podList = append(podList, p)
	}
	state := corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}}
	if err := parallel(ctx, podList, 16, func(ctx context.Context, p *corev1.Pod) error {
		for {
			if err := devenv.SetPodStatus(ctx, b.admin, p, corev1.PodRunning, "", state); !apierrors.IsConflict(err) {
				return err
			}
		}
	}); err != nil {
		return ids, nil, fmt.Errorf("make pods running: %w", err)
	}
	if err := waitExecutions(ctx, f, ids, "running"); err != nil {
		return ids, nil, err
	}
	return ids, podList, nil
}

// finishExecutions makes the executions' pods Succeeded, as their kubelet would, and
// waits until the database records them all succeeded.
func (b *bench) finishExecutions(ctx context.Context, f *fleet, ids []string, pods []*corev1.Pod) error {
	now := metav1.Now()
	state := corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Completed", StartedAt: now, FinishedAt: now}}
	if err := parallel(ctx, pods, 16, func(ctx context.Context, p *corev1.Pod) error {
		for {
			err := devenv.SetPodStatus(ctx, b.admin, p, corev1.PodSucceeded, "", state)
			if errors.Is(err, devenv.ErrPodFinished) {
				return nil
			}
			if !apierrors.IsConflict(err) {
				return err
			}
		}
	}); err != nil {
		return fmt.Errorf("end the executions' pods: %w", err)
	}
	return waitExecutions(ctx, f, ids, "succeeded")
}

// waitExecutions waits until the database records every execution of ids with status.
func waitExecutions(ctx context.Context, f *fleet, ids []string, status string) error {
	return poll(ctx, 100*time.Millisecond, 10*time.Minute, fmt.Sprintf("%d executions recorded %s", len(ids), status), func() (bool, error) {
		var got int
		err := f.conn.QueryRow(ctx, `SELECT count(*) FROM data_job_execution WHERE status = $1 AND id = ANY($2)`, status, ids).Scan(&got)
		return got == len(ids), err
	})
}

// cordonAll marks every schedulable node unschedulable and returns what restores them.
func cordonAll(ctx context.Context, b *bench) (func(), error) {
	nodes, err := b.admin.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	var cordoned []string
	set := func(ctx context.Context, name string, unschedulable bool) error {
		patch := fmt.Sprintf(`{"spec":{"unschedulable":%t}}`, unschedulable)
		_, err := b.admin.CoreV1().Nodes().Patch(ctx, name, "application/merge-patch+json", []byte(patch), metav1.PatchOptions{})
		return err
	}
	restore := func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		for _, name := range cordoned {
			if err := set(ctx, name, false); err != nil {
				b.log.WarnContext(ctx, "uncordon_failed", "node", name, "error", err)
			}
		}
	}
	for _, n := range nodes.Items {
		if n.Spec.Unschedulable {
			continue
		}
		if err := set(ctx, n.Name, true); err != nil {
			restore()
			return nil, fmt.Errorf("cordon node %s: %w", n.Name, err)
		}
		cordoned = append(cordoned, n.Name)
	}
	return restore, nil
}

// deleteJobs deletes the executions' Jobs (and so their pods), so that no node takes
// them once uncordoned.
func (b *bench) deleteJobs(f *fleet, ids []string) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	bg := metav1.DeletePropagationBackground
	_ = parallel(ctx, ids, 16, func(ctx context.Context, id string) error {
		if id == "" {
			return nil
		}
		err := b.admin.BatchV1().Jobs(f.ns).Delete(ctx, id, metav1.DeleteOptions{PropagationPolicy: &bg})
		if err != nil && !apierrors.IsNotFound(err) {
			b.log.WarnContext(ctx, "delete_job_failed", "job", id, "error", err)
		}
		return nil
	})
}

// retakeLease takes the benchmark's lease back once the serve processes let it go.
func (b *bench) retakeLease(ctx context.Context, f *fleet) {
	err := poll(ctx, 200*time.Millisecond, time.Minute, "the benchmark takes its lease back", func() (bool, error) {
		epoch, ok, err := f.db.TryAcquireLease(ctx, store.SyncLeaseName, "bench", time.Hour)
		if ok {
			f.epoch = epoch
		}
		return ok, err
	})
	if err != nil {
		b.log.WarnContext(ctx, "lease_not_retaken", "error", err)
	}
}

// memoryHeader is the header of memoryRow's table.
const memoryHeader = "| process | when | VmRSS | of it anonymous / the binary's pages (RssAnon / RssFile) | VmHWM (peak so far) | Go heap in use | Go heap objects' bytes | Go runtime total (sys) |\n|---|---|---|---|---|---|---|---|\n"

// memoryRow is one table row of s's memory: VmRSS, its anonymous and file-backed parts
// (the latter the executable's pages it touched, shared with every process of the same
// binary) and VmHWM from /proc, the Go heap from its /metrics.
func memoryRow(ctx context.Context, s *server, when string) string {
	pid := s.cmd.Process.Pid
	rss, _ := procStatus(pid, "VmRSS")
	anon, _ := procStatus(pid, "RssAnon")
	file, _ := procStatus(pid, "RssFile")
	hwm, _ := procStatus(pid, "VmHWM")
	m, err := s.get(ctx, "/metrics")
	if err != nil {
		return fmt.Sprintf("| %s | %s | %s | %s / %s | %s | (metrics: %v) | | |\n", s.name, when, mib(rss), mib(anon), mib(file), mib(hwm), err)
	}
	return fmt.Sprintf("| %s | %s | %s | %s / %s | %s | %s | %s | %s |\n", s.name, when, mib(rss), mib(anon), mib(file), mib(hwm),
		mib(uint64(metricSum(m, "go_memstats_heap_inuse_bytes"))), mib(uint64(metricSum(m, "go_memstats_heap_alloc_bytes"))),
		mib(uint64(metricSum(m, "go_memstats_sys_bytes"))))
}

// saveHeap writes s's heap profile (after a GC) to path.
func (b *bench) saveHeap(ctx context.Context, s *server, path string) error {
	if err := s.save(ctx, "/debug/pprof/heap?gc=1", path); err != nil {
		return fmt.Errorf("heap profile of %s: %w", s.name, err)
	}
	return nil
}

// pprofTop is the head of `go tool pprof -top -sample_index=inuse_space path`.
func pprofTop(path string) string {
	out, err := exec.Command("go", "tool", "pprof", "-top", "-sample_index=inuse_space", path).CombinedOutput()
	if err != nil {
		return fmt.Sprintf("go tool pprof: %v\n%s", err, out)
	}
	lines := strings.SplitAfter(string(out), "\n")
	return strings.Join(lines[:min(len(lines), 40)], "")
}

// reconciles lists the leader's datajobs_sync_reconciles_total by action and result.
func reconciles(m string) string {
	var out []string
	for line := range strings.SplitSeq(m, "\n") {
		if rest, ok := strings.CutPrefix(line, "datajobs_sync_reconciles_total{"); ok {
			labels, value, _ := strings.Cut(rest, "} ")
			out = append(out, strings.ReplaceAll(labels, `"`, "")+" "+value)
		}
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, ", ")
}

// metricSum adds up the samples of the metric whose name (and labels, when given) start
// a line of the text exposition m.
func metricSum(m, name string) float64 {
	var sum float64
	for line := range strings.SplitSeq(m, "\n") {
		rest, ok := strings.CutPrefix(line, name)
		if !ok || rest == "" || !strings.ContainsAny(rest[:1], " {") && !strings.HasSuffix(name, "}") {
			continue
		}
		fields := strings.Fields(line)
		if v, err := strconv.ParseFloat(fields[len(fields)-1], 64); err == nil {
			sum += v
		}
	}
	return sum
}

// procStatus is the field key (VmRSS, VmHWM: kB) of process pid's /proc status, in bytes.
func procStatus(pid int, key string) (uint64, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(raw), "\n") {
		if rest, ok := strings.CutPrefix(line, key+":"); ok {
			kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb * 1024, err
		}
	}
	return 0, fmt.Errorf("no %s for process %d", key, pid)
}
