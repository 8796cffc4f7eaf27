package tracker

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/datajobs/datajobs/internal/controller"
	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/kube"
)

// The log of a finished execution is read from its pod and kept in the database after its
// final status, on a queue of its own (execTerm.logQueue), so that a slow log read delays
// no status. The final status's statement marks the log pending; until it is kept the API
// reads the log from the pod, and a pending log whose pod is gone (the Job deleted by hand
// right after it finished, before this queue read it) is answered as not kept (410), never
// as an empty log.

// attempts are the pods of a finished execution whose logs are to be kept, oldest first
// (kube.Attempts); kept by pointer, so that a newer queueing is told apart.
type attempts struct{ pods []*corev1.Pod }

// queueLog asks for the log of the finished execution id, printed by its pods (one per
// attempt, oldest first), to be kept. Past MaxKept waiting, the oldest one is not kept
// (logDropped).
func (t *execTerm) queueLog(ctx context.Context, id string, pods []*corev1.Pod) {
	t.mu.Lock()
	gone, dropped := t.logPods.put(id, &attempts{pods: pods})
	t.x.cfg.Metrics.kept.WithLabelValues("log").Set(float64(t.logPods.len()))
	t.mu.Unlock()
	if dropped {
		t.logDropped(ctx, gone)
	}
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
		if pods := kube.Attempts(controlledBy(t.podsNamed(id), byID[id])); len(pods) > 0 {
			t.queueLog(ctx, id, pods)
		}
	}
	return nil
}

// keepLog reads and keeps the log of the finished execution id (a log queue item). A read
// that fails is retried with backoff while the pod is there; a pod that is gone leaves
// the log pending: it was not kept, and the API says so.
func (t *execTerm) keepLog(ctx context.Context, id string) (controller.Result, error) {
	t.mu.Lock()
	pods, _ := t.logPods.get(id)
	t.mu.Unlock()
	if pods == nil {
		return controller.Result{}, nil // kept meanwhile, or dropped past the bound
	}
	text, truncated, err := t.x.logs.AttemptsLog(ctx, pods.pods, 0, t.x.cfg.LogBytes)
	switch {
	case errors.Is(err, kube.ErrPodGone):
		t.logLost(ctx, id)
	case err != nil:
		if ctx.Err() == nil {
			t.x.cfg.Metrics.logsUnreadable.Inc()
		}
		return controller.Result{}, fmt.Errorf("keep log of execution %s: %w", id, err)
	default:
		if _, err := t.x.db.StoreExecutionLog(ctx, t.fence, id, job.StoredLog{Logs: text, Truncated: truncated}); err != nil {
			return controller.Result{}, err
		}
	}
	t.mu.Lock()
	if cur, _ := t.logPods.get(id); cur == pods {
		t.logPods.take(id)
		t.x.cfg.Metrics.kept.WithLabelValues("log").Set(float64(t.logPods.len()))
	}
	t.mu.Unlock()
	return controller.Result{}, nil
}

// logLost tells that the log of the finished execution id cannot be kept: its pod went
// before it was read. Its log stays pending, which the API answers as not kept.
func (t *execTerm) logLost(ctx context.Context, id string) {
	t.x.log.WarnContext(ctx, "execution_log_lost", "execution", id)
	t.x.cfg.Metrics.logsLost.Inc()
}
