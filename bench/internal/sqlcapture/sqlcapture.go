// Package sqlcapture records the statements a store sends (a pgx tracer), for the list
// benchmarks to replay them without the service (bench/graphql) or to ask PostgreSQL how
// it runs them (bench/ui -explain).
package sqlcapture

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5" //nolint:depguard // the benchmarks replay and explain the store's statements
)

// Statement is one statement with its arguments.
type Statement struct {
	SQL  string
	Args []any
}

// Capture records the statements sent while on (Start to Stop). Set it as the store's
// Tracer.
type Capture struct {
	on    atomic.Bool
	mu    sync.Mutex
	stmts []Statement
}

// Start records from now on.
func (c *Capture) Start() { c.on.Store(true) }

// Stop ends the recording and returns what it recorded.
func (c *Capture) Stop() []Statement {
	c.on.Store(false)
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.stmts
	c.stmts = nil
	return s
}

func (c *Capture) add(sql string, args []any) {
	if c.on.Load() {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.stmts = append(c.stmts, Statement{SQL: sql, Args: args})
	}
}

// TraceQueryStart implements pgx.QueryTracer.
func (c *Capture) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	c.add(d.SQL, d.Args)
	return ctx
}

// TraceQueryEnd implements pgx.QueryTracer.
func (c *Capture) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// TraceBatchStart implements pgx.BatchTracer.
func (c *Capture) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}

// TraceBatchQuery implements pgx.BatchTracer.
func (c *Capture) TraceBatchQuery(_ context.Context, _ *pgx.Conn, d pgx.TraceBatchQueryData) {
	c.add(d.SQL, d.Args)
}

// TraceBatchEnd implements pgx.BatchTracer.
func (c *Capture) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// Explained is what EXPLAIN (ANALYZE, BUFFERS) says of the statements of one request,
// added up: the server's time, without the network or the client.
type Explained struct {
	Statements          int
	Planning, Execution time.Duration
	SharedHit, SharedRd int64
}

// Explain runs EXPLAIN (ANALYZE, BUFFERS) of each statement but transaction control
// (BEGIN, COMMIT) runs times and returns the runs with the median and the least total
// time (planning and execution): on a busy machine the least is the statements' own cost.
func Explain(ctx context.Context, conn *pgx.Conn, stmts []Statement, runs int) (median, least Explained, err error) {
	var all []Explained
	for range runs {
		var e Explained
		for _, s := range stmts {
			if w := strings.ToLower(strings.Fields(s.SQL)[0]); w == "begin" || w == "commit" || w == "rollback" {
				continue
			}
			var out []byte
			if err := conn.QueryRow(ctx, "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) "+s.SQL, s.Args...).Scan(&out); err != nil {
				return Explained{}, Explained{}, fmt.Errorf("explain %.80s: %w", s.SQL, err)
			}
			var plans []struct {
				Plan struct {
					Hit  int64 `json:"Shared Hit Blocks"`
					Read int64 `json:"Shared Read Blocks"`
				}
				Planning  float64 `json:"Planning Time"`
				Execution float64 `json:"Execution Time"`
			}
			if err := json.Unmarshal(out, &plans); err != nil {
				return Explained{}, Explained{}, fmt.Errorf("explain: %w", err)
			}
			if len(plans) != 1 {
				return Explained{}, Explained{}, fmt.Errorf("explain: %d plans", len(plans))
			}
			p := plans[0]
			e.Statements++
			e.Planning += time.Duration(p.Planning * float64(time.Millisecond))
			e.Execution += time.Duration(p.Execution * float64(time.Millisecond))
			e.SharedHit, e.SharedRd = e.SharedHit+p.Plan.Hit, e.SharedRd+p.Plan.Read
		}
		all = append(all, e)
	}
	slices.SortFunc(all, func(a, b Explained) int { return cmp.Compare(a.Planning+a.Execution, b.Planning+b.Execution) })
	return all[len(all)/2], all[0], nil
}
