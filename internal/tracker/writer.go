package tracker

import (
	"context"
	"errors"

	"github.com/datajobs/datajobs/internal/controller"
	"github.com/datajobs/datajobs/internal/job"
)

// The workers' status writes go through the term's batcher (controller.Batcher, the same group
// commit as the CronJob side's records): a status written while no other is in flight is
// written at once, alone; those handed over during a write go together into the next
// statement (Store.RecordExecutions). One status is one row written whatever the batch;
// under a burst the statements are fewer than the rows.

// writeRequest is one status write waiting for the batcher.
type writeRequest struct {
	u    job.ExecutionUpdate
	done chan writeResult // buffered: the batcher never waits for the worker
}

type writeResult struct {
	wrote bool
	err   error
}

// errWriterStopped is the outcome of a status handed over after the term ended.
var errWriterStopped = errors.New("the term is over: the execution status was not recorded")

// newStatusWriter returns the term's batcher of status writes, a batch bounded by four
// per worker.
func (t *execTerm) newStatusWriter() *controller.Batcher[writeRequest] {
	return controller.NewBatcher(4*t.x.cfg.Workers, t.writeBatch)
}

// write hands a status write to the batcher and waits for its outcome.
func (t *execTerm) write(ctx context.Context, u job.ExecutionUpdate) (bool, error) {
	req := writeRequest{u: u, done: make(chan writeResult, 1)}
	if !t.writes.Add(req) {
		return false, errWriterStopped
	}
	select {
	case r := <-req.done:
		return r.wrote, r.err
	case <-ctx.Done():
		return false, context.Cause(ctx)
	}
}

// writeBatch writes one batch, at most one status per execution in a statement: a second
// status of one execution goes into a statement of its own after the first, in order.
// (A worker waits for its write and the queue gives an execution to one worker at a time,
// so a batch holds an execution twice only across a term's end.)
func (t *execTerm) writeBatch(ctx context.Context, batch []writeRequest) {
	for len(batch) > 0 {
		var now, later []writeRequest
		ids := make(map[string]bool, len(batch))
		for _, r := range batch {
			if ids[r.u.ID] {
				later = append(later, r)
				continue
			}
			ids[r.u.ID] = true
			now = append(now, r)
		}
		switch err := t.writeTogether(ctx, now); {
		case err == nil: // each status has its outcome
		case ctx.Err() != nil:
			t.deliver(now, nil, err)
		default:
			// One row PostgreSQL refuses fails its statement: each status is then written
			// alone, so that it fails only its own execution (issue 41, L1).
			for _, r := range now {
				_ = t.writeTogether(ctx, []writeRequest{r}) // alone: never an error back
			}
		}
		batch = later
	}
}

// writeTogether writes the statuses of distinct executions in one statement and hands
// each its outcome, unless the statement failed for more than one: it returns the error
// then, the caller deciding what the statuses learn.
func (t *execTerm) writeTogether(ctx context.Context, rs []writeRequest) error {
	us := make([]job.ExecutionUpdate, len(rs))
	for i, r := range rs {
		us[i] = r.u
	}
	wrote, err := t.x.db.RecordExecutions(ctx, t.fence, us)
	if err != nil && len(rs) > 1 {
		return err
	}
	t.deliver(rs, wrote, err)
	return nil
}

// deliver hands each status its outcome: err, or whether it was written.
func (t *execTerm) deliver(rs []writeRequest, wrote []bool, err error) {
	for i, r := range rs {
		if err != nil {
			r.done <- writeResult{err: err}
			continue
		}
		if wrote[i] && r.u.Status.Final() {
			t.x.cfg.OnFinal() // a run ended: a backfill may start its next
		}
		r.done <- writeResult{wrote: wrote[i]}
	}
}
