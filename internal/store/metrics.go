package store

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/datajobs/datajobs/internal/metric"
)

// Metrics is what the store's transactions meet from each other: deadlocks (one lock
// order makes them a defect, not a cost: docs/architecture.md, "A job's rows") and the
// time writers wait for a job's row lock.
type Metrics struct {
	// Deadlocks counts transactions PostgreSQL aborted as a deadlock's victim
	// (datajobs_store_deadlocks_total). InTx runs them again; each cost deadlock_timeout.
	Deadlocks prometheus.Counter
	// SerializationFailures counts transactions aborted by a serialization failure.
	SerializationFailures prometheus.Counter
	// JobLockWait is the time from asking for a job's row lock to holding it, one round
	// trip included, by writer (api, synchronizer).
	JobLockWait *prometheus.HistogramVec
}

// NewMetrics registers the store's metrics on reg (nil: registered nowhere).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	f := metric.On(reg)
	return &Metrics{
		Deadlocks:             f.Counter("datajobs_store_deadlocks_total", "Transactions PostgreSQL aborted as a deadlock's victim (run again, up to 3 times)."),
		SerializationFailures: f.Counter("datajobs_store_serialization_failures_total", "Transactions aborted by a serialization failure (run again, up to 3 times)."),
		JobLockWait:           f.HistogramVec("datajobs_store_job_lock_wait_seconds", "Time from asking for a job's row locks to holding them, one round trip included, by writer.", prometheus.ExponentialBuckets(0.0005, 2, 14), "writer"),
	}
}

// conflictTracer counts the statements PostgreSQL aborted for their timing with another
// transaction, wherever they were sent (a transaction of InTx, a group commit's one
// statement, a pipelined batch), so that no writer's deadlock goes uncounted.
type conflictTracer struct{ m *Metrics }

func (c conflictTracer) note(err error) {
	switch sqlState(err) {
	case sqlStateDeadlock:
		c.m.Deadlocks.Inc()
	case sqlStateSerialization:
		c.m.SerializationFailures.Inc()
	}
}

// TraceQueryStart implements pgx.QueryTracer.
func (c conflictTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	return ctx
}

// TraceQueryEnd implements pgx.QueryTracer.
func (c conflictTracer) TraceQueryEnd(_ context.Context, _ *pgx.Conn, d pgx.TraceQueryEndData) {
	c.note(d.Err)
}

// TraceBatchStart implements pgx.BatchTracer.
func (c conflictTracer) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}

// TraceBatchQuery implements pgx.BatchTracer.
func (c conflictTracer) TraceBatchQuery(_ context.Context, _ *pgx.Conn, d pgx.TraceBatchQueryData) {
	c.note(d.Err)
}

// TraceBatchEnd implements pgx.BatchTracer; the failing query was counted already.
func (c conflictTracer) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}
