package tracker

import (
	"cmp"
	"context"

	"github.com/datajobs/datajobs/internal/job"
)

// The term's view of execution rows (execTerm.rows): only the leader writes a status, so
// an event about a known execution needs no read; a NOTIFY from the API (a start, a
// cancel) marks the id stale, and its row is read again.

// row returns the execution's row from the term's view, read from the database when the
// view has none or the API changed it since; nil when there is no row (a run not
// recorded yet, or one deleted).
func (t *execTerm) row(ctx context.Context, id string) (*job.TrackedExecution, error) {
	t.mu.Lock()
	row, known := t.rows[id]
	known = known && !t.stale[id]
	delete(t.stale, id)
	t.mu.Unlock()
	if known {
		return &row, nil
	}
	row, ok, err := t.x.db.LoadExecution(ctx, id)
	if err != nil {
		t.markStale(id)
		return nil, err
	}
	if !ok {
		return nil, nil
	}
	t.mu.Lock()
	if !t.stale[id] { // else a NOTIFY came meanwhile and the id is queued again
		t.rows[id] = row
	}
	t.mu.Unlock()
	return &row, nil
}

// refresh replaces the view of executions under way by those a pass read.
func (t *execTerm) refresh(active []job.TrackedExecution) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for id, r := range t.rows {
		if !r.Status.Final() {
			delete(t.rows, id) // under way when last seen, not any more: read it when needed
		}
	}
	for _, e := range active {
		t.rows[e.ID] = e
	}
}

func (t *execTerm) markStale(id string) {
	t.mu.Lock()
	t.stale[id] = true
	t.mu.Unlock()
}

// forget drops an execution from the term's view: its next event reads the row.
func (t *execTerm) forget(id string) {
	t.mu.Lock()
	delete(t.rows, id)
	t.mu.Unlock()
}

// wrote updates the term's view after a status of u was committed.
func (t *execTerm) wrote(row *job.TrackedExecution, u job.ExecutionUpdate) {
	var r job.TrackedExecution
	if row != nil {
		r = *row
	} else {
		r = job.TrackedExecution{ID: u.ID, JobName: u.JobName, JobUID: u.JobUID, Type: u.Type, OpID: u.OpID, StartedBy: u.StartedBy}
	}
	r.Status, r.Message = u.Status, u.Message
	if r.StartTime == nil {
		r.StartTime = u.StartTime
	}
	t.mu.Lock()
	if cur, ok := t.rows[u.ID]; ok {
		r.CancelRequested = r.CancelRequested || cur.CancelRequested
		r.CancelMessage = cmp.Or(r.CancelMessage, cur.CancelMessage)
	}
	t.rows[u.ID] = r
	t.mu.Unlock()
}

// createdJob notes in the view that the Job of manual start id was created.
func (t *execTerm) createdJob(id string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if r, ok := t.rows[id]; ok {
		r.JobCreated = true
		t.rows[id] = r
	}
}
