// Package leader elects one replica to do work that must not run twice at once (the
// synchronizer), on a lease row in PostgreSQL. The lease carries an epoch, a fencing
// token that grows with every term, so the leader's database writes can be conditioned on
// still holding it. The package knows nothing about what the leader does.
//
// Timing (defaults): a leader renews every 2 s and stops its work when it has not renewed
// for 7 s, before its 10 s lease can expire; others retry every 2 s or at the holder's
// expiry if that is sooner, so a killed leader is replaced within 10 s (at its lease's
// expiry) and a gracefully stopped one, which releases the lease, within 2 s.
package leader

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// Leases is the lease store the elector needs (implemented by *store.Store). Every call
// uses the database's clock.
type Leases interface {
	// TryAcquireLease takes the lease if it is free or already ours; epoch is the term's.
	TryAcquireLease(ctx context.Context, name, holder string, ttl time.Duration) (epoch int64, acquired bool, err error)
	// RenewLease extends our term; false when the term is over.
	RenewLease(ctx context.Context, name, holder string, epoch int64, ttl time.Duration) (bool, error)
	// ReleaseLease ends our term now.
	ReleaseLease(ctx context.Context, name, holder string, epoch int64) error
	// LeaseExpiresIn is how long the current term has left (0: none).
	LeaseExpiresIn(ctx context.Context, name string) (time.Duration, error)
}

// DefaultLeaseDuration is Config.LeaseDuration's default, which the synchronizer's
// --lease-duration and `sync --once`'s lease use too.
const DefaultLeaseDuration = 10 * time.Second

// Config configures an Elector. Durations must satisfy
// RenewInterval < RenewDeadline < LeaseDuration, so the leader stops working before
// anyone else can take the lease.
type Config struct {
	// Name is the lease to campaign for, one per kind of leader work. Required.
	Name string
	// Identity names this replica in the lease row and logs; it must be unique among
	// replicas (default: hostname-pid-random).
	Identity string
	// LeaseDuration is how long a lease lasts without renewal: the time a crashed leader
	// blocks the others (default 10 s). The other durations default to fractions of it,
	// so setting it alone is enough.
	LeaseDuration time.Duration
	// RenewInterval is how often the leader renews (default LeaseDuration/5: 2 s).
	RenewInterval time.Duration
	// RenewDeadline is how long the leader keeps working without a successful renewal
	// before it stops, measured from the start of the last successful renew (default
	// LeaseDuration*7/10: 7 s). The gap to LeaseDuration is the time lead has to return
	// after its context ends.
	RenewDeadline time.Duration
	// RetryInterval is how often a follower tries to take the lease (default
	// LeaseDuration/5: 2 s), or sooner: at the holder's expiry. A crashed leader is
	// replaced within LeaseDuration, a gracefully stopped one within RetryInterval.
	RetryInterval time.Duration
	// Logger receives leadership changes and renewal failures (default slog.Default()).
	Logger *slog.Logger
	// Metrics, if set, records leadership (see NewMetrics).
	Metrics *Metrics
	// Slots, shared by the electors of one replica, bounds the leases it holds at once
	// (default nil: no bound).
	Slots *Slots
}

// Elector campaigns for a lease and runs the leader's work while it holds it.
type Elector struct {
	cfg    Config
	leases Leases
	log    *slog.Logger

	running  sync.Mutex // one Run at a time
	isLeader atomic.Bool
	epoch    atomic.Int64
	// slotted is true while a term holds its slot of cfg.Slots (Run gives it back).
	slotted bool
}

// New validates cfg, fills its defaults and returns an elector that has not started.
func New(cfg Config, leases Leases) (*Elector, error) {
	if cfg.Name == "" {
		return nil, errors.New("leader: lease name is required")
	}
	if leases == nil {
		return nil, errors.New("leader: leases are required")
	}
	if cfg.Identity == "" {
		id, err := DefaultIdentity()
		if err != nil {
			return nil, err
		}
		cfg.Identity = id
	}
	cfg.LeaseDuration = cmp.Or(cfg.LeaseDuration, DefaultLeaseDuration)
	cfg.RenewInterval = cmp.Or(cfg.RenewInterval, cfg.LeaseDuration/5)
	cfg.RenewDeadline = cmp.Or(cfg.RenewDeadline, cfg.LeaseDuration*7/10)
	cfg.RetryInterval = cmp.Or(cfg.RetryInterval, cfg.LeaseDuration/5)
	cfg.Logger = cmp.Or(cfg.Logger, slog.Default())
	if cfg.RenewInterval <= 0 || cfg.RetryInterval <= 0 {
		return nil, fmt.Errorf("leader: renew interval %s and retry interval %s must be positive", cfg.RenewInterval, cfg.RetryInterval)
	}
	if cfg.RenewInterval >= cfg.RenewDeadline || cfg.RenewDeadline >= cfg.LeaseDuration {
		return nil, fmt.Errorf("leader: need renew interval %s < renew deadline %s < lease duration %s",
			cfg.RenewInterval, cfg.RenewDeadline, cfg.LeaseDuration)
	}
	return &Elector{
		cfg:    cfg,
		leases: leases,
		log:    cfg.Logger.With("lease", cfg.Name, "identity", cfg.Identity),
	}, nil
}

// DefaultIdentity is unique per process, even for two replicas in one pod or a replica
// restarted with the same pid.
func DefaultIdentity() (string, error) {
	host, err := os.Hostname()
	if err != nil {
		return "", fmt.Errorf("leader: identity: %w", err)
	}
	b := make([]byte, 4)
	_, _ = rand.Read(b) // never fails
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b)), nil
}

// Identity is this replica's name in the lease row.
func (e *Elector) Identity() string { return e.cfg.Identity }

// IsLeader reports whether this replica holds the lease and runs lead now (for /readyz,
// status pages and tests).
func (e *Elector) IsLeader() bool { return e.isLeader.Load() }

// Epoch is the fencing token of the current or last term of this replica (0 before the
// first).
func (e *Elector) Epoch() int64 { return e.epoch.Load() }

// Run campaigns until ctx ends. Each time it gets the lease it runs lead(leaderCtx, epoch)
// and keeps renewing. leaderCtx ends as soon as the lease is lost or has not been renewed
// for RenewDeadline, and Run waits for lead to return before it campaigns again, so the
// work stops before another replica can take the lease; lead must therefore return
// promptly once its context ends. If lead returns on its own, the term ends too and the
// lease is released. When ctx ends, Run waits for lead, releases the lease at once so that
// another replica takes over without waiting for expiry, and returns the release error,
// if any (the lease then expires on its own).
func (e *Elector) Run(ctx context.Context, lead func(ctx context.Context, epoch int64)) error {
	if !e.running.TryLock() {
		return errors.New("leader: Run called twice at once")
	}
	defer e.running.Unlock()
	for {
		epoch, start, ok := e.campaign(ctx)
		if !ok {
			return nil
		}
		if ctx.Err() == nil {
			if lost := e.lead(ctx, epoch, start, lead); lost {
				e.giveSlot()
				continue // nothing to release; campaign at once, the lease is taken
			}
		}
		err := e.release(ctx, epoch)
		e.giveSlot()
		if ctx.Err() != nil {
			return err
		}
		if err != nil {
			// The lease expires on its own; the database is likely unreachable.
			e.log.WarnContext(ctx, "lease_release_failed", "epoch", epoch, "error", err)
		}
		// Give the others a chance before trying again.
		if !sleep(ctx, e.cfg.RetryInterval) {
			return nil
		}
	}
}

// campaign tries to take the lease every RetryInterval until it does or ctx ends. start
// is the local time before the winning attempt: the lease lasts at least LeaseDuration
// from then.
func (e *Elector) campaign(ctx context.Context) (epoch int64, start time.Time, ok bool) {
	failing := false
	for {
		start = time.Now()
		if !e.cfg.Slots.take(e.cfg.Name) {
			// This replica holds its share of the leases: another replica takes this one.
			if !sleep(ctx, e.cfg.RetryInterval) {
				return 0, time.Time{}, false
			}
			continue
		}
		callCtx, cancel := context.WithTimeout(ctx, e.cfg.RenewDeadline)
		epoch, acquired, err := e.leases.TryAcquireLease(callCtx, e.cfg.Name, e.cfg.Identity, e.cfg.LeaseDuration)
		cancel()
		if !acquired {
			e.cfg.Slots.give(e.cfg.Name)
		}
		switch {
		case acquired:
			e.slotted = true
			return epoch, start, true // Run releases it at once if ctx has ended
		case ctx.Err() != nil:
			return 0, time.Time{}, false
		case err != nil:
			if !failing { // log once per outage, not every RetryInterval
				e.log.WarnContext(ctx, "lease_unreachable", "error", err)
			}
			failing = true
		default:
			failing = false
		}
		if !sleep(ctx, e.untilRetry(ctx, err == nil)) {
			return 0, time.Time{}, false
		}
	}
}

// expiryMargin is how long after the holder's expiry a follower tries again: the query
// that measured the time left took some of it already, so a few milliseconds suffice.
const expiryMargin = 5 * time.Millisecond

// untilRetry is how long a follower waits before its next attempt: RetryInterval, or less
// when the holder's term ends sooner (refused says the lease is held, not unreachable).
// Without it a crashed leader's lease sat expired for up to RetryInterval, 2 s of the 13 s
// the failover benchmark allows.
func (e *Elector) untilRetry(ctx context.Context, refused bool) time.Duration {
	if !refused {
		return e.cfg.RetryInterval
	}
	callCtx, cancel := context.WithTimeout(ctx, e.cfg.RenewDeadline)
	defer cancel()
	left, err := e.leases.LeaseExpiresIn(callCtx, e.cfg.Name)
	if err != nil {
		return e.cfg.RetryInterval
	}
	return min(e.cfg.RetryInterval, left+expiryMargin)
}

// lead runs one term: it starts fn, renews every RenewInterval, and ends the term when
// the lease is lost, not renewed within RenewDeadline, fn returns, or ctx ends. It returns
// only after fn has returned; lost reports that the term is over in the database already,
// otherwise the caller releases it.
func (e *Elector) lead(ctx context.Context, epoch int64, renewed time.Time, fn func(context.Context, int64)) (lost bool) {
	held := &term{}
	held.extend(renewed.Add(e.cfg.RenewDeadline))
	leaderCtx, stop := context.WithCancel(context.WithValue(ctx, termKey{}, held))
	defer stop()
	done := make(chan struct{})
	e.setLeader(true, epoch)
	e.log.InfoContext(ctx, "leader_started", "epoch", epoch)
	go func() {
		defer close(done)
		fn(leaderCtx, epoch)
	}()
	reason := ""
	defer func() {
		stop()
		<-done
		e.setLeader(false, epoch)
		e.log.InfoContext(ctx, "leader_stopped", "epoch", epoch, "reason", reason)
	}()

	ticker := time.NewTicker(e.cfg.RenewInterval)
	defer ticker.Stop()
	deadline := time.NewTimer(time.Until(renewed.Add(e.cfg.RenewDeadline)))
	defer deadline.Stop()
	for {
		select {
		case <-ctx.Done():
			reason = "shutdown"
			return false
		case <-done:
			reason = "lead returned"
			return false
		case <-deadline.C:
			// The caller still releases: if the database is back, the others need not
			// wait for expiry.
			reason = "renew deadline passed"
			return false
		case <-ticker.C:
			start := time.Now()
			callCtx, cancel := context.WithDeadline(ctx, renewed.Add(e.cfg.RenewDeadline))
			ok, err := e.leases.RenewLease(callCtx, e.cfg.Name, e.cfg.Identity, epoch, e.cfg.LeaseDuration)
			cancel()
			switch {
			case ctx.Err() != nil:
				// The ctx.Done case ends the term.
			case err != nil:
				e.log.WarnContext(ctx, "lease_renew_failed", "epoch", epoch, "error", err,
					"not_renewed_for", time.Since(renewed).Round(time.Millisecond).String())
			case !ok:
				reason = "lease lost"
				return true
			case e.cfg.Slots.yield(e.cfg.Name):
				reason = "beyond this replica's share of the leases"
				return false
			default:
				renewed = start
				held.extend(renewed.Add(e.cfg.RenewDeadline))
				deadline.Reset(time.Until(renewed.Add(e.cfg.RenewDeadline)))
			}
		}
	}
}

// release ends the term in the database, even while ctx is ending, waiting at most
// RenewInterval: past that the lease soon expires anyway.
func (e *Elector) release(ctx context.Context, epoch int64) error {
	callCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.cfg.RenewInterval)
	defer cancel()
	if err := e.leases.ReleaseLease(callCtx, e.cfg.Name, e.cfg.Identity, epoch); err != nil {
		return fmt.Errorf("leader: release lease %s epoch %d: %w", e.cfg.Name, epoch, err)
	}
	return nil
}

func (e *Elector) setLeader(leader bool, epoch int64) {
	e.epoch.Store(epoch)
	e.isLeader.Store(leader)
	if m := e.cfg.Metrics; m != nil {
		v := 0.0
		if leader {
			v = 1
		}
		m.isLeader.WithLabelValues(e.cfg.Name).Set(v)
		m.epoch.WithLabelValues(e.cfg.Name).Set(float64(epoch))
		m.transitions.WithLabelValues(e.cfg.Name).Inc()
	}
}

// giveSlot gives back the slot of the term that ended.
func (e *Elector) giveSlot() {
	if e.slotted {
		e.slotted = false
		e.cfg.Slots.give(e.cfg.Name)
	}
}

// sleep waits for d or until ctx ends; it reports whether ctx is still alive.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// ErrTermOver is what Check returns once the term may be over: its lease was not renewed
// in time (the process was paused, or the database unreachable), or the term ended.
var ErrTermOver = errors.New("leader: the lease of this term may have passed to another replica")

// term is the validity of one term: its renewer extends it, the leader's writers read it.
type term struct {
	until atomic.Pointer[time.Time]
}

func (t *term) extend(until time.Time) { t.until.Store(&until) }

type termKey struct{}

// Check reports whether the term that ctx was given by Run (the leader's context) still
// holds its lease, by the renewer's in-memory deadline: the start of the last successful
// renewal plus RenewDeadline, which is before the lease can expire in the database. It
// costs no round trip, so a leader calls it right before every external write: a leader
// paused (SIGSTOP, a frozen VM, CPU throttling) past its deadline resumes with its writes
// refused, even before its renewer has run and ended the term. Times are monotonic, so a
// wall clock step changes nothing. A context from outside Run has no term, and Check
// returns nil: the caller did not ask for leadership (a dry run, a test).
func Check(ctx context.Context) error {
	t, ok := ctx.Value(termKey{}).(*term)
	if !ok {
		return nil
	}
	if ctx.Err() != nil || !time.Now().Before(*t.until.Load()) {
		return ErrTermOver
	}
	return nil
}
