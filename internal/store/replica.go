package store

import (
	"cmp"
	"context"
	"fmt"
	"regexp"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Reads from a PostgreSQL streaming replica (issue 44): a request its caller marks
// (WithReplicaReads: the jobs lists, GraphQL, the console) reads its lists there when
// the replica is streaming, lags at most the bound, and has replayed the caller's last
// write; otherwise the primary serves it. The first list read of a request decides for
// all of them, so one answer never mixes the two.

// DefaultReadMaxLag is the most a replica may lag behind the primary and still serve.
const DefaultReadMaxLag = 5 * time.Second

// replica is the pool of the replica and its staleness bound.
type replica struct {
	pool   *pgxpool.Pool
	maxLag time.Duration
}

// ReadState is what a request may read from the replica, and where its reads went.
type ReadState struct {
	minLSN string // the caller's last write as pg_lsn text; "" none known

	mu      sync.Mutex
	decided bool
	replica bool
	lag     time.Duration
}

type readStateKey struct{}

// WithReplicaReads marks ctx's list reads as allowed on the replica once it has replayed
// minLSN (the caller's last write, ValidLSN; "" none). The state says afterwards where
// the reads went (Served).
func WithReplicaReads(ctx context.Context, minLSN string) (context.Context, *ReadState) {
	st := &ReadState{minLSN: minLSN}
	return context.WithValue(ctx, readStateKey{}, st), st
}

// Served reports whether the request's reads were served by the replica, and its lag
// behind the primary when they were (0: it had replayed all it had received).
func (st *ReadState) Served() (fromReplica bool, lag time.Duration) {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.replica, st.lag
}

// lsnPattern is PostgreSQL's text form of a WAL position (pg_lsn).
var lsnPattern = regexp.MustCompile(`^[0-9A-F]{1,8}/[0-9A-F]{1,8}$`)

// ValidLSN reports whether s is a WAL position as CurrentLSN writes it; anything else a
// client sends back is ignored, never passed to the database.
func ValidLSN(s string) bool { return lsnPattern.MatchString(s) }

// HasReplica reports whether reads may be served by a replica (Config.ReadURL).
func (s *Store) HasReplica() bool { return s.replica != nil }

// CurrentLSN is the primary's WAL position now: at or past every commit before the call,
// so a write's answer can hand it to its caller for its next reads. It is the insert
// position, not pg_current_wal_lsn()'s write position: with synchronous_commit off a
// commit returns before its record is written, so the write position could stand before
// it, and a replica that had replayed all the primary had written served the caller's
// next read without its own write (make test at f5c2c19, the test environment's
// synchronous_commit=off).
func (s *Store) CurrentLSN(ctx context.Context) (string, error) {
	var lsn string
	if err := s.pool.QueryRow(ctx, `SELECT pg_current_wal_insert_lsn()::text`).Scan(&lsn); err != nil {
		return "", translate(fmt.Errorf("current wal position: %w", err))
	}
	return lsn, nil
}

// openReplica opens the replica's pool with the settings of the primary's (primary).
func openReplica(ctx context.Context, cfg Config, primary *pgxpool.Config) (*replica, error) {
	rc, err := pgxpool.ParseConfig(cfg.ReadURL)
	if err != nil {
		return nil, fmt.Errorf("parse database read url: %w", redact(err))
	}
	rc.MaxConns = primary.MaxConns
	rc.ConnConfig.Tracer = primary.ConnConfig.Tracer
	for k, v := range primary.ConnConfig.RuntimeParams {
		if _, set := rc.ConnConfig.RuntimeParams[k]; !set {
			rc.ConnConfig.RuntimeParams[k] = v
		}
	}
	pool, err := pgxpool.NewWithConfig(ctx, rc)
	if err != nil {
		return nil, fmt.Errorf("open database read pool: %w", redact(err))
	}
	return &replica{pool: pool, maxLag: cmp.Or(cfg.ReadMaxLag, DefaultReadMaxLag)}, nil
}

// reads is the pool a list read of ctx uses: the replica's when ctx allows it and the
// replica is fit (decided once per request), else the primary's.
func (s *Store) reads(ctx context.Context) *pgxpool.Pool {
	st, _ := ctx.Value(readStateKey{}).(*ReadState)
	if s.replica == nil || st == nil {
		return s.pool
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if !st.decided {
		st.decided = true
		st.lag, st.replica = s.replica.fit(ctx, st.minLSN)
		if !st.replica {
			st.lag = 0
		}
	}
	if st.replica {
		return s.replica.pool
	}
	return s.pool
}

// fit reports the replica's lag and whether it may serve: streaming from its primary,
// lagging at most maxLag, and past minLSN. The lag is an upper bound: when the replica
// has replayed all it received, the age of the primary's last message (the primary may
// have written since); else the age of the last transaction it replayed. Any error reading that sends reads to the
// primary (the replica down is no outage of the API).
func (r *replica) fit(ctx context.Context, minLSN string) (time.Duration, bool) {
	var min any // NULL when no write is known: every position is past it
	if ValidLSN(minLSN) {
		min = minLSN
	}
	var (
		streaming, replayed bool
		lagSeconds          float64
	)
	err := r.pool.QueryRow(ctx, `
		SELECT COALESCE((SELECT status = 'streaming' FROM pg_stat_wal_receiver), false),
		       COALESCE(pg_last_wal_replay_lsn() >= $1::pg_lsn, true),
		       GREATEST(0, COALESCE(EXTRACT(EPOCH FROM now() - CASE
		           WHEN pg_last_wal_receive_lsn() = pg_last_wal_replay_lsn()
		           THEN (SELECT last_msg_send_time FROM pg_stat_wal_receiver)
		           ELSE pg_last_xact_replay_timestamp() END), 0))::float8`,
		min).Scan(&streaming, &replayed, &lagSeconds)
	lag := time.Duration(lagSeconds * float64(time.Second))
	return lag, err == nil && streaming && replayed && lag <= r.maxLag
}
