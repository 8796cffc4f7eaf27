package main

import (
	"context"
	"fmt"
	"time"

	"github.com/datajobs/datajobs/internal/service"
)

// floor starts n manual executions one after the other, each once the last one's Job
// was seen, and returns the times from each start's answer to its Job seen.
func (e *env) floor(ctx context.Context, n int) ([]time.Duration, error) {
	var out []time.Duration
	for range n {
		ex, err := e.Svc.StartExecution(ctx, team, jobName, service.ExecutionRequest{}, "bench", "op")
		if err != nil {
			return nil, fmt.Errorf("start %s: %w", jobName, err)
		}
		t1 := time.Now()
		seen, err := e.seen.Wait(ctx, ex.ID)
		if err != nil {
			return nil, err
		}
		out = append(out, seen.Sub(t1))
	}
	return out, nil
}

// floorAt starts rate manual executions a second for seconds, round the jobs names (each
// its own goroutine, on a ticker), as the triggers' events come: the floor of the events'
// latency at that rate, the tracker's Job creation with no firer in the way. It returns the
// times from each start's answer (its row committed) to its Job seen, the executions, and
// how many starts failed.
func (e *env) floorAt(ctx context.Context, names []string, rate, seconds int) ([]time.Duration, []string, int, error) {
	started, failed := paced(rate, seconds, "start", func(i int) (string, error) {
		ex, err := e.Svc.StartExecution(ctx, team, names[i%len(names)], service.ExecutionRequest{}, "bench", fmt.Sprintf("floor-%d", i))
		return ex.ID, err
	})
	out := make([]time.Duration, 0, len(started))
	ids := make([]string, 0, len(started))
	for id, at := range started {
		seen, err := e.seen.Wait(ctx, id)
		if err != nil {
			return nil, nil, failed, err
		}
		out = append(out, seen.Sub(at))
		ids = append(ids, id)
	}
	return out, ids, failed, nil
}
