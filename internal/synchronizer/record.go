package synchronizer

import (
	"context"
	"errors"
	"time"

	"github.com/datajobs/datajobs/internal/controller"
	"github.com/datajobs/datajobs/internal/job"
)

// recorder takes the database bookkeeping of applied CronJobs off the workers' critical
// path. A worker hands over the actual row of a write Kubernetes confirmed and goes on
// with the next job; the recorder writes the rows in group commits (batcher): a row
// handed over while no write is in flight is written at once, in one round trip, and the
// rows handed over during a write go together into the next one, in one fenced statement
// (Store.RecordAppliedAll). Each job is then finished with the outcome of its row. A
// converge so costs the creates plus a few statements, not a database round trip each,
// and a single change never waits for company.
//
// The job name stays in the work queue's processing set until its row is written, so no
// other reconcile of that name can start meanwhile: a name's writes are still ordered
// (Kubernetes, then its row), and a batch never holds a name twice. A change of a job
// that is being recorded waits for that one statement, no longer.
type recorder struct {
	db     Store
	fence  job.Fence
	writes *controller.Batcher[pendingRecord]
}

// pendingRecord is one actual row to write, and what to do once it is written (wrote) or
// refused by the fence (!wrote), or the write failed (err).
type pendingRecord struct {
	actual job.ActualDeployment
	done   func(wrote bool, err error)
}

// errRecorderStopped is the outcome of a record handed over after the term ended.
var errRecorderStopped = errors.New("the term is over: the applied CronJob was not recorded")

func newRecorder(db Store, fence job.Fence, maxBatch int) *recorder {
	r := &recorder{db: db, fence: fence}
	r.writes = controller.NewBatcher(maxBatch, r.write)
	return r
}

// add hands over one row; done is called exactly once, from the recorder's goroutine (or
// from add itself once the recorder has stopped).
func (r *recorder) add(a job.ActualDeployment, done func(wrote bool, err error)) {
	if !r.writes.Add(pendingRecord{actual: a, done: done}) {
		done(false, errRecorderStopped)
	}
}

// stop ends run once it has written what was handed over; call it after the last add.
func (r *recorder) stop() { r.writes.Stop() }

// run writes batches until stop, and then what is left.
func (r *recorder) run(ctx context.Context) { r.writes.Run(ctx) }

// write records one batch and finishes each of its jobs.
func (r *recorder) write(ctx context.Context, batch []pendingRecord) {
	if ctx.Err() != nil {
		// The term ended: write under a short context of its own, so that what Kubernetes
		// confirmed is recorded if the term still holds the lease (the fence decides).
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
	}
	rows := make([]job.ActualDeployment, len(batch))
	for i, p := range batch {
		rows[i] = p.actual
	}
	wrote, err := r.db.RecordAppliedAll(ctx, r.fence, rows)
	for i, p := range batch {
		if err != nil {
			p.done(false, err)
			continue
		}
		p.done(wrote[i], nil)
	}
}
