package notify

import (
	"context"
	"fmt"
	"time"

	"github.com/datajobs/datajobs/internal/job"
)

// The dispatcher's upkeep: bounce suppression (a recipient refused for good is sent
// nothing for a while) and the outbox's retention (finished events are deleted after a
// while, in bounded batches).

// suppressed marks the due e-mail deliveries whose recipient is suppressed at now as
// suppressed, never attempted (recorded and counted here), and returns the others.
func (d *Dispatcher) suppressed(ctx context.Context, fence job.Fence, due []job.NotificationDelivery, now time.Time) ([]job.NotificationDelivery, error) {
	var emails []string
	for _, dl := range due {
		if dl.Channel == ChannelEmail {
			emails = append(emails, dl.Recipient)
		}
	}
	if len(emails) == 0 {
		return due, nil
	}
	sups, err := d.db.SuppressedRecipients(ctx, ChannelEmail, emails, now)
	if err != nil || len(sups) == 0 {
		return due, err
	}
	rest := due[:0:0]
	var outs []job.DeliveryOutcome
	for _, dl := range due {
		sp, ok := sups[dl.Recipient]
		if dl.Channel != ChannelEmail || !ok {
			rest = append(rest, dl)
			continue
		}
		outs = append(outs, job.DeliveryOutcome{
			NotificationTarget: dl.NotificationTarget, State: job.DeliverySuppressed,
			Error: suppressionText(sp), NextAttemptAt: now, At: now,
		})
	}
	if _, err := d.db.RecordDeliveries(ctx, fence, outs); err != nil {
		return nil, err
	}
	d.count(outs, "")
	return rest, nil
}

// suppressionText is a suppressed delivery's last_error: since when, until when, why.
func suppressionText(sp job.Suppression) string {
	until := "until it is removed (datajobs notifications unsuppress)"
	if sp.Until != nil {
		until = "until " + sp.Until.UTC().Format(time.RFC3339)
	}
	return fmt.Sprintf("not sent: the recipient's server refused it for good at %s, so it is suppressed %s: %s",
		sp.At.UTC().Format(time.RFC3339), until, sp.Reason)
}

// suppress records the recipient of m, refused for good by err at now, as suppressed
// for SuppressFor. A failure to record it is logged: the next delivery to the recipient
// is then refused again, and suppresses it.
func (d *Dispatcher) suppress(ctx context.Context, fence job.Fence, m message, err error, now time.Time) {
	sp := job.Suppression{Channel: m.channel, Recipient: m.recipient, Reason: err.Error(), EventID: m.deliveries[0].EventID, At: now}
	if d.cfg.SuppressFor > 0 {
		until := now.Add(d.cfg.SuppressFor)
		sp.Until = &until
	}
	if werr := d.db.SuppressRecipients(context.WithoutCancel(ctx), fence, []job.Suppression{sp}); werr != nil {
		d.cfg.Logger.WarnContext(ctx, "notification_suppress_failed", "channel", m.channel, "error", werr)
		return
	}
	d.cfg.Logger.InfoContext(ctx, "notification_recipient_suppressed", "channel", m.channel, "until", sp.Until)
}

// prune runs the retention at most every PruneEvery: it deletes the finished events older
// than Retention, PruneBatch at a time, at most PruneBatches per run so that a pass stays
// short (a backlog goes over the next runs).
func (d *Dispatcher) prune(ctx context.Context, fence job.Fence) error {
	now := d.cfg.Now()
	if d.cfg.Retention < 0 || now.Sub(d.prunedAt) < d.cfg.PruneEvery {
		return nil
	}
	d.prunedAt = now
	total := 0
	for range d.cfg.PruneBatches {
		n, err := d.db.PruneNotifications(ctx, fence, now.Add(-d.cfg.Retention), d.cfg.PruneBatch)
		if err != nil {
			return err
		}
		total += n
		if n < d.cfg.PruneBatch {
			break
		}
	}
	if total > 0 {
		d.cfg.Logger.InfoContext(ctx, "notification_events_pruned", "events", total, "retention", d.cfg.Retention.String())
	}
	return nil
}
