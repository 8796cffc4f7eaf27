package notify

import (
	"cmp"
	"context"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/datajobs/datajobs/internal/backoff"
	"github.com/datajobs/datajobs/internal/job"
)

// Store is what the dispatcher reads and writes (internal/store).
type Store interface {
	UnexpandedEvents(ctx context.Context, limit int) ([]job.NotificationEvent, error)
	ExpandEvents(ctx context.Context, fence job.Fence, now time.Time, ids []int64, targets []job.NotificationTarget) (bool, error)
	DueDeliveries(ctx context.Context, now time.Time, limit int) ([]job.NotificationDelivery, error)
	RecordDeliveries(ctx context.Context, fence job.Fence, outs []job.DeliveryOutcome) (int, error)
	MessagesSent(ctx context.Context, channel string, recipients []string, since time.Time) (map[string][]time.Time, error)
	OutboxStats(ctx context.Context) (job.OutboxStats, error)
	SuppressRecipients(ctx context.Context, fence job.Fence, sups []job.Suppression) error
	SuppressedRecipients(ctx context.Context, channel string, recipients []string, now time.Time) (map[string]job.Suppression, error)
	PruneNotifications(ctx context.Context, fence job.Fence, before time.Time, limit int) (int, error)
}

// Config configures a Dispatcher.
type Config struct {
	// Channels are the transports by channel name (ChannelEmail, ChannelWebhook); an
	// event's recipients on a channel that is not configured get no delivery.
	Channels map[string]Channel
	// Targets, when not nil, adds recipients of an event beyond its e-mail contacts (the
	// team's webhooks and the platform-wide one).
	// It is given a batch of events and returns their targets, each with its EventID.
	Targets func(ctx context.Context, events []job.NotificationEvent) ([]job.NotificationTarget, error)
	// MaxAge is how long a delivery is retried before it is marked failed (default 24h).
	MaxAge time.Duration
	// RetryBase and RetryMax bound the exponential backoff between attempts (defaults
	// 5s and 10m).
	RetryBase, RetryMax time.Duration
	// Interval is how often the outbox is read (default 1s).
	Interval time.Duration
	// Workers is the number of messages sent at once (default 8).
	Workers int
	// RateLimit bounds the e-mails per recipient (RateLimit; Messages < 0: no limit).
	RateLimit RateLimit
	// ConsoleURL is the console's external base URL (--ui-public-url) the messages link
	// to; empty: no link.
	ConsoleURL string
	// SuppressFor is how long a recipient refused for good (RecipientRefused) is sent
	// nothing (--notification-suppression-period, default 7 days; negative: until an
	// operator removes it).
	SuppressFor time.Duration
	// Retention is how long finished events are kept, with their deliveries, before the
	// leader deletes them (--notification-retention, default 30 days; negative: forever).
	Retention time.Duration
	// PruneEvery is how often the retention runs (default 1m); each run deletes in
	// batches of PruneBatch (default 1000) rows, at most PruneBatches (default 10).
	PruneEvery               time.Duration
	PruneBatch, PruneBatches int
	// Now is the clock (default time.Now).
	Now     func() time.Time
	Logger  *slog.Logger
	Metrics *Metrics
}

// Dispatcher delivers the outbox while its leader term lasts: the leader's maintenance
// runs it every Period (RunOnce).
type Dispatcher struct {
	cfg    Config
	db     Store
	render renderer

	mu      sync.Mutex
	failing map[string]string // channel → the last error, while its last attempt failed

	prunedAt time.Time // when the retention last ran (Pass's goroutine only)
}

// The defaults of Config, which the flags of `datajobs serve` use too.
const (
	MaxAgeDefault            = 24 * time.Hour
	RetryBaseDefault         = 5 * time.Second
	RetryMaxDefault          = 10 * time.Minute
	IntervalDefault          = time.Second
	WorkersDefault           = 8
	RateLimitMessagesDefault = 10
	RateWindowDefault        = time.Hour
	SuppressForDefault       = 7 * 24 * time.Hour
	RetentionDefault         = 30 * 24 * time.Hour
	PruneEveryDefault        = time.Minute
	PruneBatchDefault        = 1000
	PruneBatchesDefault      = 10
)

// New returns a dispatcher of db's outbox.
func New(cfg Config, db Store) *Dispatcher {
	cfg.MaxAge = cmp.Or(cfg.MaxAge, MaxAgeDefault)
	cfg.RetryBase = cmp.Or(cfg.RetryBase, RetryBaseDefault)
	cfg.RetryMax = cmp.Or(cfg.RetryMax, RetryMaxDefault)
	cfg.Interval = cmp.Or(cfg.Interval, IntervalDefault)
	cfg.Workers = cmp.Or(cfg.Workers, WorkersDefault)
	cfg.RateLimit.Messages = cmp.Or(cfg.RateLimit.Messages, RateLimitMessagesDefault)
	cfg.RateLimit.Window = cmp.Or(cfg.RateLimit.Window, RateWindowDefault)
	cfg.SuppressFor = cmp.Or(cfg.SuppressFor, SuppressForDefault)
	cfg.Retention = cmp.Or(cfg.Retention, RetentionDefault)
	cfg.PruneEvery = cmp.Or(cfg.PruneEvery, PruneEveryDefault)
	cfg.PruneBatch = cmp.Or(cfg.PruneBatch, PruneBatchDefault)
	cfg.PruneBatches = cmp.Or(cfg.PruneBatches, PruneBatchesDefault)
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	cfg.Logger = cmp.Or(cfg.Logger, slog.Default())
	return &Dispatcher{cfg: cfg, db: db, render: renderer{consoleURL: cfg.ConsoleURL}, failing: map[string]string{}}
}

// Failing reports the channels whose last attempt failed, with the error (the /healthz
// detail); empty while delivery works.
func (d *Dispatcher) Failing() map[string]string {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make(map[string]string, len(d.failing))
	for k, v := range d.failing {
		out[k] = v
	}
	return out
}

// Period is how often the leader's maintenance runs the dispatcher (Config.Interval).
func (d *Dispatcher) Period() time.Duration { return d.cfg.Interval }

// Pass expands new events, sends what is due and records the outcomes, once.
func (d *Dispatcher) Pass(ctx context.Context, fence job.Fence) error {
	_, err := d.RunOnce(ctx, fence)
	return err
}

// RunOnce is one Pass as the leader's maintenance runs it, every Period of its term: it
// returns how many events it expanded, messages it sent and deliveries it postponed. A
// pass that fails is tried again at the next: the outbox keeps every event until it is
// delivered.
func (d *Dispatcher) RunOnce(ctx context.Context, fence job.Fence) (map[string]int, error) {
	counts := map[string]int{"expanded": 0, "messages": 0, "postponed": 0}
	// Expand every new event before sending (a burst of outcomes is sent in one pass,
	// not one expansion batch a tick), up to expandRounds batches.
	for range expandRounds {
		n, err := d.expand(ctx, fence)
		if err != nil {
			return counts, err
		}
		counts["expanded"] += n
		if n < expandBatch {
			break
		}
	}
	now := d.cfg.Now()
	due, err := d.db.DueDeliveries(ctx, now, 1000)
	if err != nil {
		return counts, err
	}
	due, err = d.suppressed(ctx, fence, due, now)
	if err != nil {
		return counts, err
	}
	msgs, postponed, err := d.plan(ctx, due, now)
	if err != nil {
		return counts, err
	}
	if _, err := d.db.RecordDeliveries(ctx, fence, postponed); err != nil {
		return counts, err
	}
	d.count(postponed, "postponed")
	counts["postponed"] = len(postponed)
	d.send(ctx, fence, msgs)
	counts["messages"] = len(msgs)
	if err := d.prune(ctx, fence); err != nil {
		return counts, err
	}
	return counts, d.observe(ctx)
}

// expandBatch events are expanded per statement, at most expandRounds times a pass.
const expandBatch, expandRounds = 500, 10

// expand writes the deliveries of the events not yet expanded: one per e-mail contact
// (deduplicated, case-insensitively) and one per Targets recipient.
func (d *Dispatcher) expand(ctx context.Context, fence job.Fence) (int, error) {
	events, err := d.db.UnexpandedEvents(ctx, expandBatch)
	if err != nil || len(events) == 0 {
		return 0, err
	}
	ids := make([]int64, 0, len(events))
	var targets []job.NotificationTarget
	seen := map[job.NotificationTarget]bool{} // a target is per event: EventID is in it
	add := func(t job.NotificationTarget) {
		if _, ok := d.cfg.Channels[t.Channel]; ok && t.Recipient != "" && !seen[t] {
			seen[t] = true
			targets = append(targets, t)
		}
	}
	for _, e := range events {
		ids = append(ids, e.ID)
		for _, r := range e.Recipients {
			add(job.NotificationTarget{EventID: e.ID, Channel: ChannelEmail, Recipient: strings.ToLower(strings.TrimSpace(r))})
		}
	}
	if d.cfg.Targets != nil {
		more, err := d.cfg.Targets(ctx, events)
		if err != nil {
			return 0, err
		}
		for _, t := range more {
			add(t)
		}
	}
	if ok, err := d.db.ExpandEvents(ctx, fence, d.cfg.Now(), ids, targets); err != nil || !ok {
		return 0, err // a deposed term expands nothing: no second round
	}
	return len(events), nil
}

// plan groups the due deliveries into messages, per recipient, under the e-mail rate
// limit, and returns the deliveries it postpones (with their next attempt time).
func (d *Dispatcher) plan(ctx context.Context, due []job.NotificationDelivery, now time.Time) ([]message, []job.DeliveryOutcome, error) {
	type key struct{ channel, recipient string }
	var order []key
	groups := map[key][]job.NotificationDelivery{}
	var emails []string
	for _, dl := range due {
		k := key{dl.Channel, dl.Recipient}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
			if k.channel == ChannelEmail {
				emails = append(emails, k.recipient)
			}
		}
		groups[k] = append(groups[k], dl)
	}
	sent := map[string][]time.Time{}
	if len(emails) > 0 && d.cfg.RateLimit.Messages >= 0 {
		var err error
		if sent, err = d.db.MessagesSent(ctx, ChannelEmail, emails, now.Add(-d.cfg.RateLimit.Window)); err != nil {
			return nil, nil, err
		}
	}
	var (
		msgs      []message
		postponed []job.DeliveryOutcome
	)
	for _, k := range order {
		if k.channel != ChannelEmail || d.cfg.RateLimit.Messages < 0 {
			for _, dl := range groups[k] {
				msgs = append(msgs, message{channel: k.channel, recipient: k.recipient, deliveries: []job.NotificationDelivery{dl}})
			}
			continue
		}
		ms, until := planRecipient(k.channel, k.recipient, groups[k], sent[k.recipient], d.cfg.RateLimit)
		msgs = append(msgs, ms...)
		if !until.IsZero() {
			for _, dl := range groups[k] {
				postponed = append(postponed, job.DeliveryOutcome{
					NotificationTarget: dl.NotificationTarget,
					State:              job.DeliveryPending, Error: dl.LastError, NextAttemptAt: until, At: now,
				})
			}
		}
	}
	return msgs, postponed, nil
}

// send delivers msgs, Workers at a time, and records each outcome as it comes.
func (d *Dispatcher) send(ctx context.Context, fence job.Fence, msgs []message) {
	work := make(chan message)
	var wg sync.WaitGroup
	for range min(d.cfg.Workers, len(msgs)) {
		wg.Go(func() {
			for m := range work {
				d.deliver(ctx, fence, m)
			}
		})
	}
	for _, m := range msgs {
		select {
		case work <- m:
		case <-ctx.Done():
		}
	}
	close(work)
	wg.Wait()
}

// deliver sends one message and records what became of its deliveries.
func (d *Dispatcher) deliver(ctx context.Context, fence job.Fence, m message) {
	if ctx.Err() != nil {
		return
	}
	events := make([]job.NotificationEvent, len(m.deliveries))
	for i, dl := range m.deliveries {
		events[i] = dl.Event
	}
	id := m.id()
	err := d.cfg.Channels[m.channel].Deliver(ctx, d.render.delivery(id, m.channel, m.recipient, events))
	if ctx.Err() != nil {
		return // the term ended mid-send: the next leader sends it again, under the same id
	}
	now := d.cfg.Now()
	outs := make([]job.DeliveryOutcome, len(m.deliveries))
	result := job.DeliveryDelivered
	for i, dl := range m.deliveries {
		o := job.DeliveryOutcome{NotificationTarget: dl.NotificationTarget, State: job.DeliveryDelivered, MessageID: id, Attempted: true, NextAttemptAt: now, At: now}
		switch {
		case err == nil:
		case IsPermanent(err):
			o.State, o.Error = job.DeliveryBounced, err.Error()
		case now.Sub(dl.Event.CreatedAt) >= d.cfg.MaxAge:
			o.State, o.Error = job.DeliveryFailed, err.Error()
		default:
			o.State, o.Error = job.DeliveryPending, err.Error()
			o.NextAttemptAt = d.nextAttempt(now, dl, err)
		}
		outs[i], result = o, o.State
	}
	d.setFailing(m.channel, err)
	if isRecipientRefused(err) {
		d.suppress(ctx, fence, m, err, now)
	}
	if err != nil {
		d.cfg.Logger.WarnContext(ctx, "notification_delivery_failed", "channel", m.channel, "message_id", id,
			"events", len(events), "result", result, "error", err)
	}
	if _, werr := d.db.RecordDeliveries(context.WithoutCancel(ctx), fence, outs); werr != nil {
		d.cfg.Logger.WarnContext(ctx, "notification_record_failed", "message_id", id, "error", werr)
	}
	d.count(outs, "")
}

// nextAttempt is when a delivery that failed at now is tried again: after the wait the
// transport asked for (Retry-After), else after the exponential backoff, and never after
// the event's maximum age, when it gets its last attempt.
func (d *Dispatcher) nextAttempt(now time.Time, dl job.NotificationDelivery, err error) time.Time {
	wait := retryAfterOf(err)
	if wait == 0 {
		wait = backoff.Delay(d.cfg.RetryBase, d.cfg.RetryMax, dl.Attempts+1)
	}
	next := now.Add(wait)
	if deadline := dl.Event.CreatedAt.Add(d.cfg.MaxAge); next.After(deadline) {
		next = deadline
	}
	return next
}

func (d *Dispatcher) setFailing(channel string, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err == nil {
		delete(d.failing, channel)
		return
	}
	d.failing[channel] = err.Error()
}

// count adds outs to the deliveries counter: under result, or under each one's state
// (a pending one was retried).
func (d *Dispatcher) count(outs []job.DeliveryOutcome, result string) {
	if d.cfg.Metrics == nil {
		return
	}
	for _, o := range outs {
		r := cmp.Or(result, o.State)
		if r == job.DeliveryPending {
			r = "retried"
		}
		d.cfg.Metrics.deliveries.WithLabelValues(o.Channel, r).Inc()
	}
}

// observe sets the outbox gauges.
func (d *Dispatcher) observe(ctx context.Context) error {
	if d.cfg.Metrics == nil {
		return nil
	}
	st, err := d.db.OutboxStats(ctx)
	if err != nil {
		return err
	}
	d.cfg.Metrics.depth.Set(float64(st.Pending))
	age := 0.0
	if !st.OldestPending.IsZero() {
		age = d.cfg.Now().Sub(st.OldestPending).Seconds()
	}
	d.cfg.Metrics.oldest.Set(age)
	return nil
}
