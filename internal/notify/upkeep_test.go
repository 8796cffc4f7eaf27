package notify_test

import (
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/notify"
	"github.com/datajobs/datajobs/internal/testenv"
)

// states are the delivery states of the job's events by recipient, newest event first:
// "state/attempts".
func (f *fixture) states(recipient string) []string {
	f.t.Helper()
	events, deliveries, err := f.db.JobNotifications(f.t.Context(), "team-a", "nightly-load", 50)
	require.NoError(f.t, err)
	var out []string
	for _, e := range events {
		for _, d := range deliveries[e.ID] {
			if d.Recipient == recipient {
				out = append(out, d.State+"/"+string(rune('0'+d.Attempts)))
			}
		}
	}
	return out
}

func (f *fixture) sql(q string, args ...any) int {
	f.t.Helper()
	conn, err := pgx.Connect(f.t.Context(), f.dbURL)
	require.NoError(f.t, err)
	defer conn.Close(f.t.Context())
	var n int
	require.NoError(f.t, conn.QueryRow(f.t.Context(), q, args...).Scan(&n))
	return n
}

// A recipient whose server refused it for good (Mailpit answering 5xx to RCPT TO) is
// recorded, and for the suppression period it is sent nothing: its deliveries end
// `suppressed`, never attempted, although a server that would take it (a second Mailpit)
// is there; after the period it is mailed again. The other contact is mailed all along.
// Guards a dispatcher that keeps mailing a dead mailbox with every run (a sender's
// reputation, and the provider's patience, are spent on it).
func TestARecipientRefusedForGoodIsSuppressedForThePeriod(t *testing.T) {
	t.Parallel()
	f := newFixture(t, notify.RateLimit{}, "^ok@example\\.com$", job.Contacts{NotifiedOnJobSuccess: []string{"ok@example.com", "gone@example.com"}})
	period := func(c *notify.Config) { c.SuppressFor = 24 * time.Hour; c.RateLimit.Messages = -1 }
	f.mailTo(f.mail, period)
	f.finish("nightly-load-1", job.ExecSucceeded, "", "ok\n")
	f.pass()
	require.Equal(t, []string{"bounced/1"}, f.states("gone@example.com"))
	require.Equal(t, 1, f.sql(`SELECT count(*) FROM notification_suppression WHERE recipient = 'gone@example.com' AND reason LIKE '%RCPT TO%'`))

	open := testenv.StartMailpit(t, "") // takes every recipient
	f.mailTo(open, period)
	f.advance(time.Hour)
	f.finish("nightly-load-2", job.ExecSucceeded, "", "ok\n")
	f.pass()
	f.advance(time.Hour)
	f.pass()
	require.Equal(t, []string{"suppressed/0", "bounced/1"}, f.states("gone@example.com"), "not attempted while suppressed")
	mails := testenv.Mails(t, open.HTTPAddr)
	require.Len(t, mails, 1, "only ok@ is mailed: %+v", mails)
	require.Equal(t, "ok@example.com", mails[0].To[0].Address)
	_, deliveries, err := f.db.JobNotifications(t.Context(), "team-a", "nightly-load", 1)
	require.NoError(t, err)
	for _, ds := range deliveries {
		for _, d := range ds {
			if d.State == job.DeliverySuppressed {
				require.Contains(t, d.LastError, "suppressed until", "the listing says why and until when")
			}
		}
	}

	f.advance(23 * time.Hour) // the period is over
	f.finish("nightly-load-3", job.ExecSucceeded, "", "ok\n")
	f.pass()
	require.Equal(t, []string{"delivered/1", "suppressed/0", "bounced/1"}, f.states("gone@example.com"))
	require.Len(t, testenv.Mails(t, open.HTTPAddr), 3, "run 2 to ok@, run 3 to both")
}

// With no period (negative), a suppression lasts until an operator removes it; then the
// next event reaches the recipient.
func TestASuppressionWithoutAPeriodLastsUntilItIsRemoved(t *testing.T) {
	t.Parallel()
	f := newFixture(t, notify.RateLimit{}, "^nobody$", job.Contacts{NotifiedOnJobSuccess: []string{"gone@example.com"}})
	forever := func(c *notify.Config) { c.SuppressFor = -1 }
	f.mailTo(f.mail, forever)
	f.finish("nightly-load-1", job.ExecSucceeded, "", "ok\n")
	f.pass()
	open := testenv.StartMailpit(t, "")
	f.mailTo(open, forever)
	f.advance(10 * 24 * time.Hour) // longer than any period; within the retention
	f.finish("nightly-load-2", job.ExecSucceeded, "", "ok\n")
	f.pass()
	require.Equal(t, []string{"suppressed/0", "bounced/1"}, f.states("gone@example.com"))
	sups, err := f.db.Suppressions(t.Context(), notify.ChannelEmail, time.Now())
	require.NoError(t, err)
	require.Len(t, sups, 1)
	require.Nil(t, sups[0].Until)

	removed, err := f.db.RemoveSuppression(t.Context(), notify.ChannelEmail, "gone@example.com")
	require.NoError(t, err)
	require.True(t, removed)
	f.finish("nightly-load-3", job.ExecSucceeded, "", "ok\n")
	f.pass()
	require.Equal(t, []string{"delivered/1", "suppressed/0", "bounced/1"}, f.states("gone@example.com"))
	require.Len(t, testenv.Mails(t, open.HTTPAddr), 1)
}

// The retention deletes finished events (delivered, failed, bounced: their deliveries
// with them) recorded before it, in bounded batches, and keeps newer events and any
// event with a delivery still pending, however old. Guards an outbox that grows with
// every run forever, and a retention that deletes an event before it was delivered.
func TestTheRetentionDeletesOldFinishedEventsInBatches(t *testing.T) {
	t.Parallel()
	f := newFixture(t, notify.RateLimit{}, "", job.Contacts{NotifiedOnJobSuccess: []string{"team@example.com"}})
	f.mailTo(f.mail, func(c *notify.Config) {
		c.RateLimit.Messages, c.Retention, c.PruneBatch, c.PruneBatches, c.PruneEvery = -1, 30*24*time.Hour, 2, 2, time.Hour
		c.MaxAge = 365 * 24 * time.Hour
	})
	for i := range 5 {
		f.finish("nightly-load-old-"+string(rune('a'+i)), job.ExecSucceeded, "", "ok\n")
	}
	f.finish("nightly-load-new", job.ExecSucceeded, "", "ok\n")
	f.pass()
	require.Len(t, f.mails(), 6)
	require.NoError(t, f.mail.Stop()) // from here on every delivery fails: pending
	f.finish("nightly-load-pending", job.ExecSucceeded, "", "ok\n")
	f.pass()
	f.sql(`WITH u AS (UPDATE notification_event SET created_at = created_at - interval '31 days'
		WHERE key NOT LIKE '%nightly-load-new%' RETURNING 1) SELECT count(*) FROM u`)
	require.Equal(t, 7, f.sql(`SELECT count(*) FROM notification_event`))

	f.advance(2 * time.Hour) // the next retention run
	f.pass()
	require.Equal(t, 3, f.sql(`SELECT count(*) FROM notification_event`), "two batches of two: four of the five old delivered ones")
	f.pass()
	require.Equal(t, 3, f.sql(`SELECT count(*) FROM notification_event`), "the retention runs once per PruneEvery")
	f.advance(2 * time.Hour)
	f.pass()
	require.Equal(t, 2, f.sql(`SELECT count(*) FROM notification_event`), "the fifth, at the next run")
	require.Equal(t, 0, f.sql(`SELECT count(*) FROM notification_delivery d LEFT JOIN notification_event e ON e.id = d.event_id WHERE e.id IS NULL`))
	require.Equal(t, 1, f.sql(`SELECT count(*) FROM notification_event WHERE key LIKE '%nightly-load-pending%'`), "pending, however old: kept")
	require.Equal(t, 1, f.sql(`SELECT count(*) FROM notification_event WHERE key LIKE '%nightly-load-new%'`), "within the retention: kept")
}
