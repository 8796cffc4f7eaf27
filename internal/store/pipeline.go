package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/datajobs/datajobs/internal/job"
)

// pipeline queues statements of one transaction that need no answer before the next one
// is sent, and sends them together: one round trip, not one each. A deploy was eight
// round trips (begin, lock, read, upsert, revision, generation, notify, commit) and is
// three; over a network each costs its latency, and even on loopback a deploy's p50 at
// one client fell from 3.1–3.3 to 2.1–2.2 ms (bench/api). The server still runs the
// statements one after the other, each with its own snapshot.
type pipeline struct{ b pgx.Batch }

// exec queues q; its failure is reported by send as failed(err).
func (p *pipeline) exec(failed func(error) error, q string, args ...any) {
	p.b.Queue(q, args...).Fn = func(br pgx.BatchResults) error {
		if _, err := br.Exec(); err != nil {
			return failed(err)
		}
		return nil
	}
}

// queryRow queues q, whose one row scan reads when it arrives.
func (p *pipeline) queryRow(scan func(pgx.Row) error, q string, args ...any) {
	p.b.Queue(q, args...).Fn = func(br pgx.BatchResults) error { return scan(br.QueryRow()) }
}

// query queues q, whose rows collect reads (and closes) when they arrive.
func (p *pipeline) query(collect func(pgx.Rows) error, q string, args ...any) {
	p.b.Queue(q, args...).Fn = func(br pgx.BatchResults) error {
		rows, _ := br.Query() // its error is the rows' (pgx.CollectRows reports it)
		return collect(rows)
	}
}

// send sends what is queued on tx in one round trip and returns the first failure.
func (p *pipeline) send(ctx context.Context, tx Tx) error {
	if p.b.Len() == 0 {
		return nil
	}
	// A pgx.Batch keeps its queries after it is sent: the pipeline starts empty again, or
	// its next send would run these a second time (the stepper's step sent every node-end
	// UPDATE twice, 8b9aa3b).
	b := p.b
	p.b = pgx.Batch{}
	return tx.SendBatch(ctx, &b).Close()
}

// wrapped is the failure of op: err wrapped with it.
func wrapped(op string) func(error) error {
	return func(err error) error { return fmt.Errorf("%s: %w", op, err) }
}

// lockState queues lockState's two statements; st is what the second reads. The lock is a
// statement of its own (see lockState); pipelined, the read still starts once the lock is
// held, and so reads with a snapshot taken after it.
func (p *pipeline) lockState(team, name string, st *job.JobState, held func()) {
	p.lockJobs(lockForUpdate, []string{name}, held)
	p.queryRow(func(row pgx.Row) (err error) {
		*st, err = scanState(row, team, name)
		return err
	}, stateQuery, name)
}

// notify queues a notification of payload on channel; PostgreSQL delivers it at commit.
func (p *pipeline) notify(channel, payload string) {
	p.exec(wrapped(fmt.Sprintf("notify %s on %s", payload, channel)), `SELECT pg_notify($1, $2)`, channel, payload)
}

// bumpGeneration queues bumpGeneration's statements.
func (p *pipeline) bumpGeneration(name string) {
	p.exec(wrapped("bump generation of "+name), `UPDATE data_job SET generation = generation + 1, updated_at = now() WHERE name = $1`, name)
	p.notify(DesiredChannel, name)
}

// inLockedTx is InTx on the state of the job name of team, its row locked as lockState
// locks it: the BEGIN, the lock and the read go to the server in one round trip, and fn
// runs on what they read.
func (s *Store) inLockedTx(ctx context.Context, team, name string, fn func(tx Tx, st job.JobState) error) error {
	var st job.JobState
	return s.inTxFrom(ctx, func(first *pipeline) {
		st = job.JobState{}
		first.lockState(team, name, &st, s.lockTimer("api"))
	}, func(tx Tx) error { return fn(tx, st) })
}

// inTxFrom is InTx whose BEGIN and first statements (queue queues them) go to the server
// in one round trip; fn runs on what they read.
func (s *Store) inTxFrom(ctx context.Context, queue func(first *pipeline), fn func(tx Tx) error) error {
	return s.retried(ctx, func() error {
		var first pipeline
		first.b.BeginTx(pgx.TxOptions{})
		queue(&first)
		br := s.pool.SendBatch(ctx, &first.b)
		tx := br.Tx()
		defer func() { _ = tx.Rollback(ctx) }() // after the commit, it does nothing
		if err := br.Close(); err != nil {
			return err
		}
		if err := fn(tx); err != nil {
			return err
		}
		return tx.Commit(ctx)
	})
}

// The modes in which a writer takes a job's row lock, the first lock of every transaction
// that writes a job's rows (docs/architecture.md, "A job's rows"). The API changes the
// job's configuration and takes it for update; the tracker writes the job's last
// execution and takes it for no-key update; the synchronizer writes none of the job's
// columns and takes it for key share, the lock its own writes' foreign-key checks would
// take later (the job's list row, written twice in a group commit, is checked against its
// job: CI's "deadlock detected" between a deploy and the record of the same job).
// Each waits for the API's lock; the synchronizer and the tracker do not wait for each
// other.
const (
	lockForUpdate      = "FOR UPDATE"
	lockForNoKeyUpdate = "FOR NO KEY UPDATE"
	lockForKeyShare    = "FOR KEY SHARE"
)

// lockJobs queues the lock of the rows of the jobs names in mode, in name order, so that
// two writers of several jobs take them in the same order. A name with no job locks
// nothing. The lock's result arrives once it is held: held, when set, is called then.
func (p *pipeline) lockJobs(mode string, names []string, held func()) {
	p.b.Queue(`SELECT FROM data_job WHERE name = ANY($1::text[]) ORDER BY name `+mode, names).Fn = func(br pgx.BatchResults) error {
		if _, err := br.Exec(); err != nil {
			return fmt.Errorf("lock jobs %s (%d): %w", names[0], len(names), err)
		}
		if held != nil {
			held()
		}
		return nil
	}
}

// lockTimer returns the held callback of a lockJobs queued now by writer: it observes the
// time since into the store's lock wait histogram.
func (s *Store) lockTimer(writer string) func() {
	start := time.Now()
	return func() { s.metrics.JobLockWait.WithLabelValues(writer).Observe(time.Since(start).Seconds()) }
}
