package main

import (
	"context"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"         //nolint:depguard // the benchmark times the pool's acquires
	"github.com/jackc/pgx/v5/pgxpool" //nolint:depguard // the benchmark times the pool's acquires
)

// acquires times each connection the database pool hands out (a pgx tracer of the pool the
// API and the leader share, as in a server): how long a firing, a start or an event waited
// for a connection before its first statement.
type acquires struct {
	mu    sync.Mutex
	waits []time.Duration
}

type acquireStart struct{}

// TraceAcquireStart implements pgxpool.AcquireTracer.
func (a *acquires) TraceAcquireStart(ctx context.Context, _ *pgxpool.Pool, _ pgxpool.TraceAcquireStartData) context.Context {
	return context.WithValue(ctx, acquireStart{}, time.Now())
}

// TraceAcquireEnd implements pgxpool.AcquireTracer.
func (a *acquires) TraceAcquireEnd(ctx context.Context, _ *pgxpool.Pool, _ pgxpool.TraceAcquireEndData) {
	if t0, ok := ctx.Value(acquireStart{}).(time.Time); ok {
		a.mu.Lock()
		a.waits = append(a.waits, time.Since(t0))
		a.mu.Unlock()
	}
}

// TraceQueryStart implements pgx.QueryTracer (the pool takes its tracers as those).
func (a *acquires) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	return ctx
}

// TraceQueryEnd implements pgx.QueryTracer.
func (a *acquires) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// take returns the waits since the last take and forgets them.
func (a *acquires) take() []time.Duration {
	a.mu.Lock()
	defer a.mu.Unlock()
	w := a.waits
	a.waits = nil
	return w
}
