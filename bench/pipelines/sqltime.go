package main

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5" //nolint:depguard // the benchmark times the store's statements
)

// sqlTimes adds up, per statement, the time the store's pool waited for it (a pgx
// tracer, on while on is set): where a step's time goes on the database's side, lock
// waits included. A statement of a batch is timed from the one before it.
type sqlTimes struct {
	ok atomic.Bool
	mu sync.Mutex
	by map[string]*sqlTime
}

type sqlTime struct {
	n     int
	total time.Duration
}

type startKey struct{}

type batchClock struct{ last time.Time }

func (s *sqlTimes) add(sql string, d time.Duration) {
	if !s.ok.Load() {
		return
	}
	key := strings.Join(strings.Fields(sql), " ")
	if len(key) > 90 {
		key = key[:90]
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.by == nil {
		s.by = map[string]*sqlTime{}
	}
	t := s.by[key]
	if t == nil {
		t = &sqlTime{}
		s.by[key] = t
	}
	t.n++
	t.total += d
}

// TraceQueryStart implements pgx.QueryTracer.
func (s *sqlTimes) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	return context.WithValue(context.WithValue(ctx, startKey{}, time.Now()), sqlKey{}, d.SQL)
}

type sqlKey struct{}

// TraceQueryEnd implements pgx.QueryTracer.
func (s *sqlTimes) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryEndData) {
	if t, ok := ctx.Value(startKey{}).(time.Time); ok {
		sql, _ := ctx.Value(sqlKey{}).(string)
		s.add(sql, time.Since(t))
	}
}

// TraceBatchStart implements pgx.BatchTracer.
func (s *sqlTimes) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return context.WithValue(ctx, startKey{}, &batchClock{last: time.Now()})
}

// TraceBatchQuery implements pgx.BatchTracer.
func (s *sqlTimes) TraceBatchQuery(ctx context.Context, _ *pgx.Conn, d pgx.TraceBatchQueryData) {
	if c, ok := ctx.Value(startKey{}).(*batchClock); ok {
		now := time.Now()
		s.add(d.SQL, now.Sub(c.last))
		c.last = now
	}
}

// TraceBatchEnd implements pgx.BatchTracer.
func (s *sqlTimes) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// print writes the statements that took the most time in all, top n.
func (s *sqlTimes) print(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	keys := make([]string, 0, len(s.by))
	for k := range s.by {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int { return cmp.Compare(s.by[b].total, s.by[a].total) })
	for _, k := range keys[:min(n, len(keys))] {
		t := s.by[k]
		fmt.Printf("  %8s in all, %5d × %8s  %s\n", t.total.Round(time.Millisecond), t.n, (t.total / time.Duration(t.n)).Round(100*time.Microsecond), k)
	}
}
