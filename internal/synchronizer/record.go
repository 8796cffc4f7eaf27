package synchronizer

import (
	"context"
	"errors"
	"time"

	"github.com/datajobs/datajobs/internal/job"
)

// recorder takes the database bookkeeping of applied CronJobs off the workers' critical
// path. A worker hands over the actual row of a write Kubernetes confirmed and goes on
// with the next job; the recorder writes what has gathered in one fenced statement
// (Store.RecordAppliedAll) and then finishes each job with the outcome of its row. A
// converge so costs the creates plus a small constant, not a database round trip each.
//
// The job name stays in the work queue's processing set until its row is written, so no
// other reconcile of that name can start meanwhile: a name's writes are still ordered
// (Kubernetes, then its row), and a batch never holds a name twice.
type recorder struct {
	db       Store
	fence    job.Fence
	maxBatch int
	maxDelay time.Duration
	in       chan pendingRecord
	closed   chan struct{} // closed by stop: no more records will come
}

// pendingRecord is one actual row to write, and what to do once it is written (wrote) or
// refused by the fence (!wrote), or the write failed (err).
type pendingRecord struct {
	actual job.ActualDeployment
	done   func(wrote bool, err error)
}

// errRecorderStopped is the outcome of a record handed over after the term ended.
var errRecorderStopped = errors.New("the term is over: the applied CronJob was not recorded")

func newRecorder(db Store, fence job.Fence, maxBatch int, maxDelay time.Duration) *recorder {
	return &recorder{
		db: db, fence: fence, maxBatch: maxBatch, maxDelay: maxDelay,
		in: make(chan pendingRecord, maxBatch), closed: make(chan struct{}),
	}
}

// add hands over one row; done is called exactly once, from the recorder's goroutine (or
// from add itself once the recorder has stopped).
func (r *recorder) add(a job.ActualDeployment, done func(wrote bool, err error)) {
	select {
	case r.in <- pendingRecord{actual: a, done: done}:
	case <-r.closed:
		done(false, errRecorderStopped)
	}
}

// stop ends run once it has written what was handed over; call it after the last add.
func (r *recorder) stop() { close(r.closed) }

// run writes batches until stop. A batch starts with the first row handed over and is
// written when it holds maxBatch rows or maxDelay after it started, whichever comes
// first. After stop, run writes what is left with a short context of its own (the term's
// may be over; the fence decides whether the rows may still be written) and returns.
func (r *recorder) run(ctx context.Context) {
	for {
		var batch []pendingRecord
		select {
		case p := <-r.in:
			batch = append(batch, p)
		case <-r.closed:
			r.drain()
			return
		}
		timer := time.NewTimer(r.maxDelay)
	gather:
		for len(batch) < r.maxBatch {
			select {
			case p := <-r.in:
				batch = append(batch, p)
			case <-timer.C:
				break gather
			case <-r.closed:
				break gather
			}
		}
		timer.Stop()
		r.write(ctx, batch)
	}
}

// drain writes the rows still buffered once no more can come.
func (r *recorder) drain() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for {
		var batch []pendingRecord
	gather:
		for len(batch) < r.maxBatch {
			select {
			case p := <-r.in:
				batch = append(batch, p)
			default:
				break gather
			}
		}
		if len(batch) == 0 {
			return
		}
		r.write(ctx, batch)
	}
}

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
