package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Leases are rows of leader_lease: one per leadership, held by one replica until
// expires_at. All times are the database's now(), so the clocks of the replicas never
// matter. The epoch is a fencing token: it grows with every new term of leadership, and
// the leader's writes are conditioned on it (LeaseHeldCondition), so a replica that lost
// the lease without noticing cannot overwrite the new leader's work. Every term of every
// lease takes its epoch from one sequence (0068), so an epoch names one term of one lease:
// the shards of the synchronizer (one lease per execution target) fence by it alone.

// TryAcquireLease takes the lease name for holder for ttl, if it is free (never held,
// expired or released) or already held by holder. It returns the epoch of the term:
// a new, larger epoch when a term begins, the same epoch when holder already held the
// lease and merely extended it. acquired is false when another holder has it.
func (s *Store) TryAcquireLease(ctx context.Context, name, holder string, ttl time.Duration) (epoch int64, acquired bool, err error) {
	// One statement, so two replicas racing for a free lease cannot both win: the loser's
	// ON CONFLICT sees the winner's committed row and its WHERE filters the update out.
	const q = `
INSERT INTO leader_lease AS l (name, holder, epoch, acquired_at, renewed_at, expires_at)
VALUES ($1, $2, nextval('leader_lease_epoch'), now(), now(), now() + $3::interval)
ON CONFLICT (name) DO UPDATE SET
    epoch       = CASE WHEN l.holder = excluded.holder AND l.expires_at > now() THEN l.epoch ELSE excluded.epoch END,
    acquired_at = CASE WHEN l.holder = excluded.holder AND l.expires_at > now() THEN l.acquired_at ELSE now() END,
    holder      = excluded.holder,
    renewed_at  = now(),
    expires_at  = excluded.expires_at
WHERE l.expires_at <= now() OR l.holder = excluded.holder
RETURNING epoch`
	err = s.leases.QueryRow(ctx, q, name, holder, ttl).Scan(&epoch)
	return epoch, err == nil, rowError(err, nil, "acquire lease "+name)
}

// RenewLease extends the lease of holder's term epoch to ttl from now. It returns false,
// and changes nothing, when that term is over: the lease expired, was released, or
// another holder took it. An expired lease is never revived, because another replica may
// have already seen it free.
func (s *Store) RenewLease(ctx context.Context, name, holder string, epoch int64, ttl time.Duration) (bool, error) {
	const q = `
UPDATE leader_lease SET renewed_at = now(), expires_at = now() + $4::interval
WHERE name = $1 AND holder = $2 AND epoch = $3 AND expires_at > now()`
	tag, err := s.leases.Exec(ctx, q, name, holder, epoch, ttl)
	if err != nil {
		return false, translate(fmt.Errorf("renew lease %s: %w", name, err))
	}
	return tag.RowsAffected() == 1, nil
}

// ReleaseLease ends holder's term epoch now, so that another replica can take the lease
// at its next attempt instead of waiting for it to expire (graceful shutdown). Releasing
// a term that is already over does nothing.
func (s *Store) ReleaseLease(ctx context.Context, name, holder string, epoch int64) error {
	const q = `
UPDATE leader_lease SET expires_at = now()
WHERE name = $1 AND holder = $2 AND epoch = $3 AND expires_at > now()`
	if _, err := s.leases.Exec(ctx, q, name, holder, epoch); err != nil {
		return translate(fmt.Errorf("release lease %s: %w", name, err))
	}
	return nil
}

// LeaseExpiresIn is how long the lease name's current term has left by the database's
// clock: 0 when it has expired or was never taken. A replica refused the lease sleeps no
// longer than this before it tries again, so a crashed leader is replaced at its lease's
// expiry, not up to a retry interval later.
func (s *Store) LeaseExpiresIn(ctx context.Context, name string) (time.Duration, error) {
	const q = `SELECT greatest(extract(epoch FROM expires_at - now()), 0)::float8 FROM leader_lease WHERE name = $1`
	var secs float64
	err := s.leases.QueryRow(ctx, q, name).Scan(&secs)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, translate(fmt.Errorf("read lease %s: %w", name, err))
	}
	return time.Duration(secs * float64(time.Second)), nil
}

// LeaseHolder reports who holds, or last held, the lease name, for status pages and
// metrics. expiresAt in the past means nobody holds it. It returns an empty holder and a
// zero epoch when the lease was never taken.
func (s *Store) LeaseHolder(ctx context.Context, name string) (holder string, epoch int64, expiresAt time.Time, err error) {
	const q = `SELECT holder, epoch, expires_at FROM leader_lease WHERE name = $1`
	err = s.pool.QueryRow(ctx, q, name).Scan(&holder, &epoch, &expiresAt)
	return holder, epoch, expiresAt, rowError(err, nil, "read lease "+name)
}

// LeaseHeldCondition returns a SQL boolean expression, true while term epoch holds the
// lease name, for the WHERE clause of every write a leader makes, so that a deposed leader
// cannot write: `UPDATE t SET ... WHERE key = $1 AND ` + LeaseHeldCondition("$2", "$3").
// nameArg and epochArg are the query's placeholders for the lease name and the epoch
// (positional like "$2" or pgx named like "@lease_epoch").
//
// FOR SHARE locks the lease row until the writing transaction ends, so a takeover (which
// updates the row) waits for a fenced write already in flight and a fenced write that
// waits for a takeover sees the new epoch and writes nothing. Every write conditioned this
// way is therefore ordered before or after each change of term, never across one. It also
// delays the leader's own renewal, so keep fenced transactions short.
func LeaseHeldCondition(nameArg, epochArg string) string {
	return `EXISTS (SELECT 1 FROM leader_lease WHERE name = ` + nameArg + ` AND epoch = ` + epochArg +
		` AND expires_at > now() FOR SHARE)`
}

// LeaseConfigFingerprint is the fingerprint of the configuration the last leader of the
// lease name worked with (see SetLeaseConfigFingerprint), empty when none was recorded.
func (s *Store) LeaseConfigFingerprint(ctx context.Context, name string) (string, error) {
	var fp string
	err := s.pool.QueryRow(ctx, `SELECT config_fingerprint FROM leader_lease WHERE name = $1`, name).Scan(&fp)
	return fp, rowError(err, nil, "read lease "+name+" fingerprint")
}

// SetLeaseConfigFingerprint records the fingerprint of the configuration term epoch works
// with, while that term holds the lease name; it reports whether it wrote.
func (s *Store) SetLeaseConfigFingerprint(ctx context.Context, name string, epoch int64, fingerprint string) (bool, error) {
	const q = `UPDATE leader_lease SET config_fingerprint = $3 WHERE name = $1 AND epoch = $2 AND expires_at > now()`
	tag, err := s.pool.Exec(ctx, q, name, epoch, fingerprint)
	if err != nil {
		return false, translate(fmt.Errorf("record lease %s fingerprint: %w", name, err))
	}
	return tag.RowsAffected() == 1, nil
}
