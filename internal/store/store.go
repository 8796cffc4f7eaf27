// Package store is the PostgreSQL layer of datajobs: the only package that knows SQL or
// pgx. It owns the schema (embedded, numbered migrations), the queries of the API and of
// the synchronizer, and the translation of database errors into domain errors.
package store

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/multitracer"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/datajobs/datajobs/internal/job"
)

// Store is a pool of connections to the datajobs database, and a small pool of its own
// for the leader lease, so that API load saturating the main pool never delays a
// renewal past the lease (the one LISTEN connection all listens share is also its own: see Listen).
type Store struct {
	pool   *pgxpool.Pool
	quotas TeamQuotas
	leases *pgxpool.Pool
	// probe is one connection of its own for Ping: readiness must not wait behind the
	// API's queries for a connection of a saturated main pool, or every replica would
	// leave its Service at once under load.
	probe *pgxpool.Pool
	// probeFailed is set while Ping fails: the main pool's connections may then be dead.
	probeFailed atomic.Bool
	// listenKeepalive is how long a LISTEN connection waits for a notification before it
	// checks that the server still answers.
	listenKeepalive time.Duration
	metrics         *Metrics
	log             *slog.Logger
	// listener is the one LISTEN connection every Listen shares (listen.go).
	listener *listener
	// replica serves the list reads of requests that allow it (replica.go); nil: none.
	replica *replica
}

// Config configures the connection pool.
type Config struct {
	// URL is a PostgreSQL connection URL or key=value string. Required.
	URL string
	// MaxConns caps the main pool (default: pgx's, the larger of 4 and the number of
	// CPUs). The lease pool (2 connections), the probe's connection and the one LISTEN
	// connection come on top.
	MaxConns int32
	// StatementTimeout bounds every statement of the main pool (PostgreSQL's
	// statement_timeout; default 0: none). Migrations run without it.
	StatementTimeout time.Duration
	// Tracer, when set, sees every statement the pool sends (tests count statements with
	// it, e.g. to prove a page is not read with one query per job). Default: none.
	Tracer pgx.QueryTracer
	// Quotas are the limits per team the writes enforce (default: none but
	// MaxActiveExecutions, DefaultMaxActiveExecutions).
	Quotas TeamQuotas
	// ListenKeepalive is how long a LISTEN connection waits for a notification before it
	// asks the server whether the connection still works, and how long it waits for the
	// answer (default 30s): a connection cut silently is noticed within twice that.
	ListenKeepalive time.Duration
	// Metrics counts deadlocks and lock waits (default: registered nowhere).
	Metrics *Metrics
	// Logger receives the warning of a transaction run again (default slog.Default()).
	Logger *slog.Logger
	// ReadURL, when set, is a streaming replica of URL's database that serves the list
	// reads of requests marked WithReplicaReads (replica.go); its role needs
	// pg_read_all_stats to see whether it streams. Default: none, the primary serves all.
	ReadURL string
	// ReadMaxLag is the most the replica may lag and still serve (default DefaultReadMaxLag).
	ReadMaxLag time.Duration
}

// Open connects to the database. It does not fail when the database is down: the pool
// connects lazily, so the service can start and report itself not ready.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	pc, err := pgxpool.ParseConfig(cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("parse database url: %w", redact(err))
	}
	if cfg.MaxConns > 0 {
		pc.MaxConns = cfg.MaxConns
	}
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics(nil)
	}
	pc.ConnConfig.Tracer = conflictTracer{cfg.Metrics}
	if cfg.Tracer != nil {
		pc.ConnConfig.Tracer = multitracer.New(cfg.Tracer, conflictTracer{cfg.Metrics})
	}
	lc := pc.Copy()
	lc.MaxConns, lc.MinConns = 2, 0
	prc := pc.Copy()
	prc.MaxConns, prc.MinConns = 1, 0
	if cfg.StatementTimeout > 0 {
		pc.ConnConfig.RuntimeParams["statement_timeout"] = strconv.FormatInt(cfg.StatementTimeout.Milliseconds(), 10)
	}
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("open database pool: %w", redact(err))
	}
	leases, err := pgxpool.NewWithConfig(ctx, lc)
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("open lease pool: %w", redact(err))
	}
	probe, err := pgxpool.NewWithConfig(ctx, prc)
	if err != nil {
		pool.Close()
		leases.Close()
		return nil, fmt.Errorf("open probe pool: %w", redact(err))
	}
	s := &Store{
		pool: pool, leases: leases, probe: probe, quotas: cfg.Quotas.withDefaults(),
		listenKeepalive: cmp.Or(cfg.ListenKeepalive, 30*time.Second),
		metrics:         cfg.Metrics, log: cmp.Or(cfg.Logger, slog.Default()),
	}
	s.listener = newListener(s)
	if cfg.ReadURL != "" {
		if s.replica, err = openReplica(ctx, cfg, pc); err != nil {
			s.Close()
			return nil, err
		}
	}
	return s, nil
}

// Close closes every connection of the pools and the LISTEN connection.
func (s *Store) Close() {
	s.listener.shutdown()
	s.pool.Close()
	s.leases.Close()
	s.probe.Close()
	if s.replica != nil {
		s.replica.pool.Close()
	}
}

// Ping checks that the database answers, on the store's probe connection (not the main
// pool): a pool saturated by API load is not a database that is down. When it answers
// again after a failed Ping, the main pool's connections are reset: those of before the
// outage (a restart terminated them) would otherwise fail the next requests one by one.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.probe.Ping(ctx); err != nil {
		s.probeFailed.Store(true)
		return translate(fmt.Errorf("ping database: %w", err))
	}
	if s.probeFailed.Swap(false) {
		s.pool.Reset()
	}
	return nil
}

// Tx is the part of a transaction the store's queries need.
type Tx = pgx.Tx

// InTx runs fn in one transaction, committed when fn returns nil and rolled back otherwise.
// Writers of a job's rows take them in one order (docs/architecture.md, "A job's rows"),
// so they queue instead of deadlocking; a transaction PostgreSQL still aborts as a
// deadlock's victim (or a serialization failure) is run again, up to txAttempts times in
// all, as a safety net that logs at warn (and datajobs_store_deadlocks_total counts). fn
// must therefore have no effect outside tx that a second run would repeat.
func (s *Store) InTx(ctx context.Context, fn func(tx Tx) error) error {
	return s.retried(ctx, func() error { return pgx.BeginFunc(ctx, s.pool, fn) })
}

// retried runs a transaction (run begins, runs and ends it) as InTx does: again while it
// fails retryably, up to txAttempts times in all, each time after a random pause of up
// to attempt × txRetryPause. Run again at once, the deadlock's victim met the winner
// while that one was still finishing and lost again: TestATransactionThatLostADeadlockIsRunAgain
// saw two crossed transactions lose three deadlocks in a row in half of its runs.
func (s *Store) retried(ctx context.Context, run func() error) error {
	var err error
	for attempt := 1; attempt <= txAttempts; attempt++ {
		if err = run(); !retryable(err) || attempt == txAttempts {
			break
		}
		s.log.WarnContext(ctx, "transaction_run_again", "attempt", attempt, "error", err)
		pause := time.NewTimer(rand.N(time.Duration(attempt) * txRetryPause))
		select {
		case <-ctx.Done():
			pause.Stop()
			return translate(err)
		case <-pause.C:
		}
	}
	return translate(err)
}

// txAttempts bounds InTx's runs of one transaction; txRetryPause is the scale of the
// random pause before each rerun.
const (
	txAttempts   = 4
	txRetryPause = 50 * time.Millisecond
)

// The SQLSTATEs of a transaction aborted for its timing with another.
const (
	sqlStateDeadlock      = "40P01"
	sqlStateSerialization = "40001"
)

// retryable tells a transaction that failed only because of its timing with another:
// a deadlock's victim or a serialization failure.
func retryable(err error) bool {
	code := sqlState(err)
	return code == sqlStateDeadlock || code == sqlStateSerialization
}

// rowError is the error of reading one row: notFound when there is none (nil: no row is
// no error), the failure of op otherwise.
func rowError(err, notFound error, op string) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, pgx.ErrNoRows):
		return notFound
	default:
		return translate(fmt.Errorf("%s: %w", op, err))
	}
}

// collect reads every row of rows with scan, the scanner of one row that the readers of
// a single row (QueryRow) share; pgx.CollectRows cannot take it as it is. A failure is that
// of op.
func collect[T any](rows pgx.Rows, scan func(pgx.Row) (T, error), op string) ([]T, error) {
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (T, error) { return scan(row) })
	if err != nil {
		return nil, translate(fmt.Errorf("%s: %w", op, err))
	}
	return out, nil
}

// columns turns rows into one array per column, the parameters of an unnest(...) that
// writes many rows in one statement; values lists the columns of one row, in order.
func columns[T any](rows []T, values func(T) []any) []any {
	var cols [][]any
	for i, r := range rows {
		vals := values(r)
		if i == 0 {
			cols = make([][]any, len(vals))
		}
		for c, v := range vals {
			cols[c] = append(cols[c], v)
		}
	}
	out := make([]any, len(cols))
	for c := range cols {
		out[c] = cols[c]
	}
	return out
}

// translate turns connection-level failures and statements cancelled by the statement
// timeout into the domain's "unavailable" errors, so the API answers 503 instead of 500
// while the database is down or too slow. Other errors pass through.
func translate(err error) error {
	if err == nil || job.KindOf(err) != 0 {
		return err
	}
	if isConnectionError(err) {
		return job.Unavailable("database", err)
	}
	switch sqlState(err) {
	case queryCanceled:
		return job.TooSlow("the database's statement timeout (--db-statement-timeout)", err)
	case retiredKey:
		return job.Unavailable("this replica's secrets key file (older than the last rotation)", err)
	}
	return err
}

// retiredKey is the code of the trigger that refuses a data key wrapped under a key a
// rotation retired (migration 0041, RetireKeys).
const retiredKey = "DJ001"

// queryCanceled is PostgreSQL's code for a statement cancelled by statement_timeout (or
// by a cancel request).
const queryCanceled = "57014"

func isConnectionError(err error) bool {
	if code := sqlState(err); code != "" {
		// Class 08: connection exception; 57P0x: the server is shutting down or restarting.
		return strings.HasPrefix(code, "08") || strings.HasPrefix(code, "57P0")
	}
	var connectErr *pgconn.ConnectError
	if errors.As(err, &connectErr) {
		return true
	}
	return pgconn.SafeToRetry(err) || errors.Is(err, pgx.ErrTxClosed) || isNetError(err)
}
