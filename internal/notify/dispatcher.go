package notify

import (
	"cmp"
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/datajobs/datajobs/internal/backoff"
	"github.com/datajobs/datajobs/internal/controller"
	"github.com/datajobs/datajobs/internal/job"
)

// Store is what the dispatcher reads and writes (internal/store).
type Store interface {
	UnexpandedEvents(ctx context.Context, limit int) ([]job.NotificationEvent, error)
	ExpandEvents(ctx context.Context, fence job.Fence, now time.Time, ids []int64, targets []job.NotificationTarget) (bool, error)
	DueDeliveries(ctx context.Context, now time.Time, limit int, failureStatuses []string) ([]job.NotificationDelivery, error)
	RecordDeliveries(ctx context.Context, fence job.Fence, outs []job.DeliveryOutcome) (int, error)
	MessagesSent(ctx context.Context, channel string, recipients []string, since time.Time, failureStatuses []string) ([]job.MessageSent, error)
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
	// Settings are the dispatcher's loop: Interval, how often the outbox is read
	// (default 1s); Workers, the webhook messages sent at once (default 8); the clock and
	// the logger.
	controller.Settings
	// EmailWorkers is the number of e-mails sent at once, apart from the webhooks so
	// that a slow receiver never holds a mail (default 4).
	EmailWorkers int
	// TeamShare is the most messages of one team in flight at once in each of the two
	// (default 2): a team whose receivers hang holds that many workers, no more.
	TeamShare int
	// RateLimit bounds the e-mails per team and recipient, failures apart (RateLimit;
	// Messages < 0: no limit).
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
	Metrics                  *Metrics
}

// Dispatcher delivers the outbox while its leader term lasts: the leader's maintenance
// starts its lanes for the term (Start) and runs RunOnce every Period, which plans what
// is due and feeds the lanes without waiting for them.
type Dispatcher struct {
	cfg    Config
	db     Store
	render renderer

	mu      sync.Mutex
	failing map[string]string // channel → the last error, while its last attempt failed
	term    *termLanes        // the lanes Start runs for a term, nil between terms

	runMu sync.Mutex // one RunOnce at a time: it plans only groups its lanes do not hold

	prunedAt time.Time // when the retention last ran (Pass's goroutine only)
}

// The defaults of Config, which the flags of `datajobs serve` use too.
const (
	MaxAgeDefault            = 24 * time.Hour
	RetryBaseDefault         = 5 * time.Second
	RetryMaxDefault          = 10 * time.Minute
	IntervalDefault          = time.Second
	WorkersDefault           = 8
	EmailWorkersDefault      = 4
	TeamShareDefault         = 2
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
	cfg.Settings = cfg.WithDefaults(WorkersDefault, IntervalDefault)
	cfg.EmailWorkers = cmp.Or(cfg.EmailWorkers, EmailWorkersDefault)
	cfg.TeamShare = cmp.Or(cfg.TeamShare, TeamShareDefault)
	cfg.RateLimit.Messages = cmp.Or(cfg.RateLimit.Messages, RateLimitMessagesDefault)
	cfg.RateLimit.Window = cmp.Or(cfg.RateLimit.Window, RateWindowDefault)
	cfg.SuppressFor = cmp.Or(cfg.SuppressFor, SuppressForDefault)
	cfg.Retention = cmp.Or(cfg.Retention, RetentionDefault)
	cfg.PruneEvery = cmp.Or(cfg.PruneEvery, PruneEveryDefault)
	cfg.PruneBatch = cmp.Or(cfg.PruneBatch, PruneBatchDefault)
	cfg.PruneBatches = cmp.Or(cfg.PruneBatches, PruneBatchesDefault)
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

// termLanes are the lanes of fence's term.
type termLanes struct {
	fence job.Fence
	lanes *lanes
}

// Start starts the lanes that send fence's messages, fed by each RunOnce of the term,
// until ctx ends; the returned wait returns once every worker has stopped (the
// maintainer calls it when the term ends).
func (d *Dispatcher) Start(ctx context.Context, fence job.Fence) (wait func()) {
	l := d.newLanes()
	d.mu.Lock()
	d.term = &termLanes{fence: fence, lanes: l}
	d.mu.Unlock()
	done := make(chan struct{})
	go func() {
		defer close(done)
		l.run(ctx, false, func(ctx context.Context, m message) { d.deliver(ctx, fence, m) })
		d.mu.Lock()
		defer d.mu.Unlock()
		if d.term != nil && d.term.lanes == l {
			d.term = nil
		}
	}()
	return func() { <-done }
}

func (d *Dispatcher) newLanes() *lanes {
	return newLanes(d.cfg.TeamShare, d.cfg.Workers, d.cfg.EmailWorkers)
}

// Pass expands new events, sends what is due and records the outcomes, once.
func (d *Dispatcher) Pass(ctx context.Context, fence job.Fence) error {
	_, err := d.RunOnce(ctx, fence)
	return err
}

// RunOnce expands new events and plans the due deliveries into messages; it returns how
// many events it expanded, messages it planned and deliveries it postponed. In a term
// Start began it feeds the messages to the term's lanes and returns; otherwise (a test,
// a one-shot) it sends them itself, through lanes of its own, and returns when they are
// sent. A run that fails is tried again at the next: the outbox keeps every event until
// it is delivered.
func (d *Dispatcher) RunOnce(ctx context.Context, fence job.Fence) (map[string]int, error) {
	d.runMu.Lock()
	defer d.runMu.Unlock()
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
	l, fed := d.lanesOf(fence)
	busy := l.busyGroups() // before the read: what they hold may be recorded meanwhile
	now := d.cfg.Now()
	due, err := d.db.DueDeliveries(ctx, now, dueBatch, failureStatuses())
	if err != nil {
		return counts, err
	}
	due = slices.DeleteFunc(due, func(dl job.NotificationDelivery) bool { return busy[groupOf(dl)] })
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
	l.add(msgs)
	if !fed {
		l.run(ctx, true, func(ctx context.Context, m message) { d.deliver(ctx, fence, m) })
	}
	counts["messages"] = len(msgs)
	if err := d.prune(ctx, fence); err != nil {
		return counts, err
	}
	return counts, d.observe(ctx)
}

// lanesOf returns the lanes of fence's term and true, or new lanes and false when Start
// runs none for it.
func (d *Dispatcher) lanesOf(fence job.Fence) (*lanes, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.term != nil && d.term.fence == fence {
		return d.term.lanes, true
	}
	return d.newLanes(), false
}

// expandBatch events are expanded per statement, at most expandRounds times a pass;
// dueBatch deliveries are read per pass.
const expandBatch, expandRounds, dueBatch = 500, 10, 1000

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
