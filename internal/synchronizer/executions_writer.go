package synchronizer

import (
	"context"

	"github.com/datajobs/datajobs/internal/job"
)

// writeRequest is one status write waiting for the writer.
type writeRequest struct {
	u    job.ExecutionUpdate
	done chan writeResult // buffered: the writer never waits for the worker
}

type writeResult struct {
	wrote bool
	err   error
}

// write hands a status write to the writer and waits for its outcome.
func (t *execTerm) write(ctx context.Context, u job.ExecutionUpdate) (bool, error) {
	req := writeRequest{u: u, done: make(chan writeResult, 1)}
	select {
	case t.writes <- req:
	case <-ctx.Done():
		return false, context.Cause(ctx)
	}
	select {
	case r := <-req.done:
		return r.wrote, r.err
	case <-ctx.Done():
		return false, context.Cause(ctx)
	}
}

// writer writes the workers' statuses, each statement taking every write waiting (at
// most one per execution: a second one waits for the next statement). One status is one
// row written whatever the batch; under a burst the statements are fewer than the rows.
func (t *execTerm) writer(ctx context.Context) {
	var next []writeRequest
	for {
		batch := next
		next = nil
		if len(batch) == 0 {
			select {
			case <-ctx.Done():
				return
			case r := <-t.writes:
				batch = append(batch, r)
			}
		}
		ids := make(map[string]bool, len(batch))
		for _, r := range batch {
			ids[r.u.ID] = true
		}
	drain:
		for len(batch) < 4*t.x.cfg.Workers {
			select {
			case r := <-t.writes:
				if ids[r.u.ID] {
					next = append(next, r)
					continue
				}
				ids[r.u.ID] = true
				batch = append(batch, r)
			default:
				break drain
			}
		}
		us := make([]job.ExecutionUpdate, len(batch))
		for i, r := range batch {
			us[i] = r.u
		}
		wrote, err := t.x.db.RecordExecutions(ctx, t.fence, us)
		for i, r := range batch {
			if err != nil {
				r.done <- writeResult{err: err}
			} else {
				r.done <- writeResult{wrote: wrote[i]}
			}
		}
	}
}
