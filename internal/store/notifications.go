package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/datajobs/datajobs/internal/job"
)

// The dispatcher's side of the outbox (internal/notify): it expands events into one
// delivery per target, reads the deliveries that are due, and records each attempt. Its
// writes are fenced by the synchronizer's lease like every leader write: a deposed leader
// writes nothing, so two replicas never both own a delivery.

const eventColumns = `e.id, e.key, e.kind, e.job_name, e.team, e.recipients, e.payload, e.created_at`

func eventDest(e *job.NotificationEvent) []any {
	return []any{&e.ID, &e.Key, &e.Kind, &e.JobName, &e.Team, &e.Recipients, &e.Payload, &e.CreatedAt}
}

// LogTailWait is how long an execution's finished event waits for the leader to keep the
// run's log (its final status is recorded first, the log read from the pod after), so
// that its mails quote the log's last lines. The log queue keeps a log within a second or
// two; a log still pending after this (its pod gone, the queue far behind) is not waited for.
const LogTailWait = 30 * time.Second

// UnexpandedEvents reads up to limit events that have no deliveries yet, oldest first,
// but for an execution's finished event whose log is pending (LogTailWait).
func (s *Store) UnexpandedEvents(ctx context.Context, limit int) ([]job.NotificationEvent, error) {
	rows, _ := s.pool.Query(ctx, `SELECT `+eventColumns+` FROM notification_event e WHERE e.expanded_at IS NULL
	AND NOT (e.kind = '`+EventExecutionFinished+`' AND e.created_at > now() - $2::interval AND EXISTS (
		SELECT 1 FROM data_job_execution_log l WHERE l.execution_id = e.payload->>'execution_id' AND l.pending))
ORDER BY e.id LIMIT $1`, limit, LogTailWait)
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (job.NotificationEvent, error) {
		var e job.NotificationEvent
		return e, r.Scan(eventDest(&e)...)
	})
	return out, rowError(err, nil, "read unexpanded notification events")
}

// ExpandEvents writes the deliveries of events ids (targets, possibly none), due at now,
// and marks the events expanded, in one statement, while fence's term holds the lease. It reports
// whether it wrote (false: the term is over).
func (s *Store) ExpandEvents(ctx context.Context, fence job.Fence, now time.Time, ids []int64, targets []job.NotificationTarget) (bool, error) {
	if len(ids) == 0 {
		return true, nil
	}
	q := `WITH ok AS (SELECT 1 WHERE ` + syncLeaseHeld("$5") + `),
ins AS (
	INSERT INTO notification_delivery (event_id, channel, recipient, next_attempt_at)
	SELECT t.*, $6::timestamptz FROM unnest($2::bigint[], $3::text[], $4::text[]) AS t(event_id, channel, recipient), ok
	ON CONFLICT DO NOTHING
)
UPDATE notification_event SET expanded_at = now() FROM ok WHERE id = ANY($1::bigint[]) AND expanded_at IS NULL`
	args := columns(targets, func(t job.NotificationTarget) []any { return []any{t.EventID, t.Channel, t.Recipient} })
	if len(targets) == 0 {
		args = []any{[]int64{}, []string{}, []string{}}
	}
	tag, err := s.pool.Exec(ctx, q, append([]any{ids}, append(args, fence.Epoch, now)...)...)
	if err != nil {
		return false, translate(fmt.Errorf("expand %d notification events: %w", len(ids), err))
	}
	return tag.RowsAffected() > 0, nil
}

const deliveryColumns = `d.event_id, d.channel, d.recipient, d.state, d.attempts, d.next_attempt_at, d.last_error,
	d.message_id, d.delivered_at, ` + eventColumns

func scanDelivery(r pgx.CollectableRow) (job.NotificationDelivery, error) {
	var d job.NotificationDelivery
	dest := append([]any{
		&d.EventID, &d.Channel, &d.Recipient, &d.State, &d.Attempts, &d.NextAttemptAt,
		&d.LastError, &d.MessageID, &d.DeliveredAt,
	}, eventDest(&d.Event)...)
	return d, r.Scan(dest...)
}

// DueDeliveries reads up to limit pending deliveries whose next attempt is at now or
// before, in turns: every team's first before any team's second, and within a team its
// execution failures first (failureStatuses), then the longest waiting. One team's
// backlog never hides another team's deliveries from the dispatcher.
func (s *Store) DueDeliveries(ctx context.Context, now time.Time, limit int, failureStatuses []string) ([]job.NotificationDelivery, error) {
	rows, _ := s.pool.Query(ctx, `SELECT `+deliveryColumns+` FROM notification_delivery d
JOIN notification_event e ON e.id = d.event_id
WHERE d.state = 'pending' AND d.next_attempt_at <= $1
ORDER BY row_number() OVER (PARTITION BY e.team ORDER BY `+failureFirst+`, d.next_attempt_at, d.event_id),
	`+failureFirst+`, d.next_attempt_at, d.event_id LIMIT $2`, now, limit, failureStatuses)
	out, err := pgx.CollectRows(rows, scanDelivery)
	return out, rowError(err, nil, "read due notification deliveries")
}

// failureFirst orders an execution's failure (a status in $3) before other events.
const failureFirst = `(e.kind = '` + EventExecutionFinished + `' AND e.payload->>'status' = ANY($3::text[])) DESC`

// RecordDeliveries records the outcomes of attempts (or postponements) in one
// statement, while fence's term holds the lease, only over deliveries still pending. It
// returns how many it wrote.
func (s *Store) RecordDeliveries(ctx context.Context, fence job.Fence, outs []job.DeliveryOutcome) (int, error) {
	if len(outs) == 0 {
		return 0, nil
	}
	q := `UPDATE notification_delivery d SET state = o.state, message_id = o.message_id, last_error = o.error,
	attempts = d.attempts + CASE WHEN o.attempted THEN 1 ELSE 0 END, next_attempt_at = o.next_attempt_at,
	delivered_at = CASE WHEN o.state = 'delivered' THEN o.at END
FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::bool[], $8::timestamptz[], $10::timestamptz[])
	AS o(event_id, channel, recipient, state, message_id, error, attempted, next_attempt_at, at)
WHERE d.event_id = o.event_id AND d.channel = o.channel AND d.recipient = o.recipient AND d.state = 'pending'
	AND ` + syncLeaseHeld("$9")
	args := columns(outs, func(o job.DeliveryOutcome) []any {
		return []any{o.EventID, o.Channel, o.Recipient, o.State, o.MessageID, o.Error, o.Attempted, o.NextAttemptAt}
	})
	at := make([]time.Time, len(outs))
	for i, o := range outs {
		at[i] = o.At
	}
	tag, err := s.pool.Exec(ctx, q, append(args, fence.Epoch, at)...)
	if err != nil {
		return 0, translate(fmt.Errorf("record %d notification deliveries: %w", len(outs), err))
	}
	return int(tag.RowsAffected()), nil
}

// MessagesSent reads, for each recipient of channel, the messages (a digest counts once)
// sent to it since since: when each was accepted, for which team, and whether it told
// an execution's failure (a status in failureStatuses), oldest first: the rate limit's
// windows, one per team, recipient and kind of message.
func (s *Store) MessagesSent(ctx context.Context, channel string, recipients []string, since time.Time, failureStatuses []string) ([]job.MessageSent, error) {
	rows, _ := s.pool.Query(ctx, `SELECT e.team, d.recipient,
	bool_and(e.kind = '`+EventExecutionFinished+`' AND e.payload->>'status' = ANY($4::text[])), min(d.delivered_at) AS at
FROM notification_delivery d JOIN notification_event e ON e.id = d.event_id
WHERE d.channel = $1 AND d.recipient = ANY($2::text[]) AND d.delivered_at > $3
GROUP BY e.team, d.recipient, d.message_id ORDER BY at`, channel, recipients, since, failureStatuses)
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (job.MessageSent, error) {
		var m job.MessageSent
		return m, r.Scan(&m.Team, &m.Recipient, &m.Failure, &m.At)
	})
	return out, rowError(err, nil, "read messages sent")
}

// OutboxStats reads the outbox's depth and the age of its oldest undelivered event.
func (s *Store) OutboxStats(ctx context.Context) (job.OutboxStats, error) {
	var (
		st     job.OutboxStats
		oldest *time.Time
	)
	err := s.pool.QueryRow(ctx, `SELECT count(*), min(created_at) FROM (
	SELECT e.created_at FROM notification_event e WHERE e.expanded_at IS NULL
	UNION ALL SELECT e.created_at FROM notification_delivery d JOIN notification_event e ON e.id = d.event_id WHERE d.state = 'pending'
) p`).Scan(&st.Pending, &oldest)
	if oldest != nil {
		st.OldestPending = *oldest
	}
	return st, rowError(err, nil, "read outbox stats")
}

// JobNotifications reads the last limit events of the job name of team, newest first,
// each with its deliveries (none while it is not expanded).
func (s *Store) JobNotifications(ctx context.Context, team, name string, limit int) ([]job.NotificationEvent, map[int64][]job.NotificationDelivery, error) {
	rows, _ := s.pool.Query(ctx, `SELECT `+eventColumns+` FROM notification_event e
WHERE e.team = $1 AND e.job_name = $2 ORDER BY e.id DESC LIMIT $3`, team, name, limit)
	events, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (job.NotificationEvent, error) {
		var e job.NotificationEvent
		return e, r.Scan(eventDest(&e)...)
	})
	if err != nil {
		return nil, nil, rowError(err, nil, "read notifications of "+name)
	}
	ids := make([]int64, len(events))
	for i, e := range events {
		ids[i] = e.ID
	}
	rows, _ = s.pool.Query(ctx, `SELECT `+deliveryColumns+` FROM notification_delivery d
JOIN notification_event e ON e.id = d.event_id WHERE d.event_id = ANY($1::bigint[]) ORDER BY d.event_id, d.channel, d.recipient`, ids)
	ds, err := pgx.CollectRows(rows, scanDelivery)
	if err != nil {
		return nil, nil, rowError(err, nil, "read notification deliveries of "+name)
	}
	by := map[int64][]job.NotificationDelivery{}
	for _, d := range ds {
		by[d.EventID] = append(by[d.EventID], d)
	}
	return events, by, nil
}
