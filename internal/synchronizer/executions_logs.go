package synchronizer

import (
	"context"
	"fmt"
	"maps"
	"slices"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/kube"
)

// The log of a finished execution is read from its pod and kept in the database after its
// final status, on a queue of its own (execTerm.logQueue), so that a slow log read delays
// no status; until it is kept the API reads the log from the pod.

// queueLog asks for the log of the finished execution id, printed by pod, to be kept.
func (t *execTerm) queueLog(id string, pod *corev1.Pod) {
	t.mu.Lock()
	t.logPods[id] = pod
	t.mu.Unlock()
	t.logQueue.Add(id)
}

// queueMissingLogs queues the logs of the final executions among the Jobs that have none
// kept (the previous leader stopped in between).
func (t *execTerm) queueMissingLogs(ctx context.Context, jobs []*batchv1.Job) error {
	if len(jobs) == 0 {
		return nil
	}
	byID := make(map[string]*batchv1.Job, len(jobs))
	for _, j := range jobs {
		byID[j.Name] = j
	}
	missing, err := t.x.db.FinalWithoutLog(ctx, slices.Collect(maps.Keys(byID)))
	if err != nil {
		return fmt.Errorf("executions pass: %w", err)
	}
	for _, id := range missing {
		if p := kube.LatestPod(controlledBy(t.podsNamed(id), byID[id])); p != nil {
			t.queueLog(id, p)
		}
	}
	return nil
}

// keepLog reads and keeps the log of the finished execution id (a log queue item).
func (t *execTerm) keepLog(ctx context.Context, id string) (result, error) {
	t.mu.Lock()
	pod := t.logPods[id]
	t.mu.Unlock()
	if pod == nil {
		return result{}, nil
	}
	text, truncated, err := t.x.logs.PodLog(ctx, pod, 0, t.x.cfg.LogBytes)
	if err != nil {
		if ctx.Err() != nil {
			return result{}, err
		}
		// Keep an empty one rather than ask a cluster that could not answer, and say so.
		t.x.log.WarnContext(ctx, "execution_log_unreadable", "execution", id, "error", err)
		t.x.cfg.Metrics.logsUnreadable.Inc()
	}
	if _, err := t.x.db.StoreExecutionLog(ctx, t.fence, id, job.StoredLog{Logs: text, Truncated: truncated}); err != nil {
		return result{}, err
	}
	t.mu.Lock()
	if t.logPods[id] == pod {
		delete(t.logPods, id)
	}
	t.mu.Unlock()
	return result{}, nil
}
