package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/datajobs/datajobs/internal/job"
)

// The dispatcher's bounce suppression and the outbox's retention (migration 0023,
// internal/notify). Writes are fenced by the synchronizer's lease like the rest of the
// dispatcher's; an operator's removal of a suppression is not (it is no leader's work).

// SuppressRecipients records that each of sups was refused permanently, while fence's
// term holds the lease: a recipient already suppressed gets the newer reason and end.
func (s *Store) SuppressRecipients(ctx context.Context, fence job.Fence, sups []job.Suppression) error {
	if len(sups) == 0 {
		return nil
	}
	until := make([]*time.Time, len(sups))
	for i, sp := range sups {
		until[i] = sp.Until
	}
	args := columns(sups, func(sp job.Suppression) []any { return []any{sp.Channel, sp.Recipient, sp.Reason, sp.EventID, sp.At} })
	q := `INSERT INTO notification_suppression (channel, recipient, reason, event_id, created_at, until)
SELECT t.* FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[], $5::timestamptz[], $6::timestamptz[])
	AS t(channel, recipient, reason, event_id, created_at, until)
WHERE ` + syncLeaseHeld("$7") + `
ON CONFLICT (channel, recipient) DO UPDATE SET reason = excluded.reason, event_id = excluded.event_id,
	created_at = excluded.created_at, until = excluded.until`
	if _, err := s.pool.Exec(ctx, q, append(args, until, fence.Epoch)...); err != nil {
		return translate(fmt.Errorf("suppress %d notification recipients: %w", len(sups), err))
	}
	return nil
}

// SuppressedRecipients reads which of recipients of channel are suppressed at now.
func (s *Store) SuppressedRecipients(ctx context.Context, channel string, recipients []string, now time.Time) (map[string]job.Suppression, error) {
	rows, _ := s.pool.Query(ctx, `SELECT channel, recipient, reason, event_id, created_at, until FROM notification_suppression
WHERE channel = $1 AND recipient = ANY($2::text[]) AND (until IS NULL OR until > $3)`, channel, recipients, now)
	list, err := pgx.CollectRows(rows, scanSuppression)
	if err != nil {
		return nil, rowError(err, nil, "read suppressed notification recipients")
	}
	out := make(map[string]job.Suppression, len(list))
	for _, sp := range list {
		out[sp.Recipient] = sp
	}
	return out, nil
}

// Suppressions lists every suppression of channel whose end has not passed at now, by
// recipient (`datajobs notifications suppressions`).
func (s *Store) Suppressions(ctx context.Context, channel string, now time.Time) ([]job.Suppression, error) {
	rows, _ := s.pool.Query(ctx, `SELECT channel, recipient, reason, event_id, created_at, until FROM notification_suppression
WHERE channel = $1 AND (until IS NULL OR until > $2) ORDER BY recipient`, channel, now)
	out, err := pgx.CollectRows(rows, scanSuppression)
	return out, rowError(err, nil, "list suppressed notification recipients")
}

// RemoveSuppression lifts the suppression of recipient of channel (an operator fixed the
// address or the mailbox), reporting whether there was one.
func (s *Store) RemoveSuppression(ctx context.Context, channel, recipient string) (bool, error) {
	tag, err := s.pool.Exec(ctx, `DELETE FROM notification_suppression WHERE channel = $1 AND recipient = $2`, channel, recipient)
	if err != nil {
		return false, translate(fmt.Errorf("remove the suppression of %s: %w", recipient, err))
	}
	return tag.RowsAffected() > 0, nil
}

func scanSuppression(r pgx.CollectableRow) (job.Suppression, error) {
	var sp job.Suppression
	return sp, r.Scan(&sp.Channel, &sp.Recipient, &sp.Reason, &sp.EventID, &sp.At, &sp.Until)
}

// PruneNotifications deletes up to limit events recorded before before whose deliveries
// are all finished (none pending; an event not expanded yet is kept too), oldest first,
// with their deliveries, while fence's term holds the lease. It returns how many it
// deleted: fewer than limit when no more are due.
func (s *Store) PruneNotifications(ctx context.Context, fence job.Fence, before time.Time, limit int) (int, error) {
	q := `DELETE FROM notification_event WHERE id IN (
	SELECT e.id FROM notification_event e
	WHERE e.created_at < $1 AND e.expanded_at IS NOT NULL
		AND NOT EXISTS (SELECT 1 FROM notification_delivery d WHERE d.event_id = e.id AND d.state = 'pending')
	ORDER BY e.created_at LIMIT $2
) AND ` + syncLeaseHeld("$3")
	tag, err := s.pool.Exec(ctx, q, before, limit, fence.Epoch)
	if err != nil {
		return 0, translate(fmt.Errorf("prune notification events: %w", err))
	}
	return int(tag.RowsAffected()), nil
}
