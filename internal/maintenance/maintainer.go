// Package maintenance runs the leader's periodic services: missed runs, lateness,
// backfills, retention, the notification dispatch, and the sync change log's bound. Each
// service is one file with its Config, its ...Default constants and a runOnce that does
// one run and says what it did (Counts); a Maintainer starts a list of them for a term,
// runs each every Period (and when woken: a NOTIFY, a kick), records every run, and stops
// and waits for all of them in one place when the term ends. The shape is river's
// internal/maintenance; a controller (a reconciler keyed by name on a shared work queue:
// the CronJobs, the tracker) is the other shape a leader loop takes.
package maintenance

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/datajobs/datajobs/internal/controller"
	"github.com/datajobs/datajobs/internal/job"
)

// Counts is what one run of a service did, by what it counts ("deleted", "skipped", ...;
// a fixed set per service). A plain map, so that a service outside this package (the
// notification dispatcher) returns it without importing it.
type Counts = map[string]int

// Service is one periodic service as a Maintainer runs it.
type Service struct {
	// Name names the service in logs and metrics (snake_case, fixed: "missed_runs").
	Name string
	// Period is the time between two runs; a wake-up in between runs it sooner.
	Period time.Duration
	// AtStart runs it once when the term starts, before the first Period has passed.
	AtStart bool
	// Wake, when not nil, runs it soon after each Kick.
	Wake *Wake
	// Listen, when not empty, is a NOTIFY channel each notification of which wakes the
	// service, as does each (re)connection of its LISTEN (a notification may have been
	// missed meanwhile).
	Listen string
	// RunOnce does one run under the term's fence.
	RunOnce func(ctx context.Context, fence job.Fence) (Counts, error)
	// Start, when not nil, starts the service's own workers for the term before its first
	// run (the dispatcher's lanes, which its runs feed); the service's loop calls the
	// wait it returns when the term ends, after ctx is done.
	Start func(ctx context.Context, fence job.Fence) (wait func())
}

// Settings are what the services' Configs share: how often a service runs, its clock and
// where its lines go, defaulted by one method (withDefaults) with the service's own interval.
type Settings struct {
	// Interval is the period of the service's runs (default: the service's
	// ...IntervalDefault).
	Interval time.Duration
	// Now is the clock a run reads its times with (default time.Now).
	Now func() time.Time
	// Logger receives a line per run that did something (default slog.Default()).
	Logger *slog.Logger
}

// withDefaults is s with its zero settings set: interval, the service's default;
// time.Now; slog.Default().
func (s Settings) withDefaults(interval time.Duration) Settings {
	s.Interval = cmp.Or(s.Interval, interval)
	if s.Now == nil {
		s.Now = time.Now
	}
	s.Logger = cmp.Or(s.Logger, slog.Default())
	return s
}

// Wake asks a service for a run soon; kicks while one is pending are one run.
type Wake struct{ c chan struct{} }

// NewWake returns a wake-up signal for a Service.
func NewWake() *Wake { return &Wake{c: make(chan struct{}, 1)} }

// Kick asks for a run soon; it never blocks.
func (w *Wake) Kick() {
	select {
	case w.c <- struct{}{}:
	default:
	}
}

// Config configures a Maintainer.
type Config struct {
	// Listener LISTENs for the services with a Listen channel (required if one has).
	Listener controller.Listener
	// Logger receives the runs' failures and counts (default slog.Default()).
	Logger *slog.Logger
	// Metrics records every run (default: registered nowhere).
	Metrics *Metrics
}

// Maintainer runs a list of services for a term (Run).
type Maintainer struct {
	cfg      Config
	services []Service
}

// New returns a Maintainer of services. A service that listens needs cfg.Listener: New
// panics without it, as it does for a service with no period or no RunOnce (a wiring
// error, found by the first test that builds it).
func New(cfg Config, services ...Service) *Maintainer {
	for _, s := range services {
		if s.Period <= 0 || s.RunOnce == nil || s.Listen != "" && cfg.Listener == nil {
			panic(fmt.Sprintf("maintenance: service %q needs a period, a RunOnce, and a Listener if it listens", s.Name))
		}
	}
	cfg.Logger = cmp.Or(cfg.Logger, slog.Default())
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics(nil)
	}
	return &Maintainer{cfg: cfg, services: services}
}

// Run runs every service, fenced by term epoch, until ctx ends; on return every goroutine
// it started has stopped. It returns nil: a failed run is recorded and the service runs
// again at its next period.
func (m *Maintainer) Run(ctx context.Context, epoch int64) error {
	fence := job.Fence{Epoch: epoch}
	var wg sync.WaitGroup
	defer wg.Wait()
	for _, s := range m.services {
		wg.Go(func() { m.loop(ctx, fence, s) })
	}
	return nil
}

// loop runs s at the start (AtStart), every Period and on each wake-up, until ctx ends.
func (m *Maintainer) loop(ctx context.Context, fence job.Fence, s Service) {
	wake := s.Wake
	if wake == nil && s.Listen != "" {
		wake = NewWake()
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	if s.Start != nil {
		defer s.Start(ctx, fence)()
	}
	if s.Listen != "" {
		wg.Go(func() {
			controller.Listen(ctx, m.cfg.Listener, s.Listen, 500*time.Millisecond, m.cfg.Logger,
				func(bool) { wake.Kick() }, func(string) { wake.Kick() })
		})
	}
	var woken <-chan struct{}
	if wake != nil {
		woken = wake.c
	}
	if s.AtStart {
		m.run(ctx, fence, s)
	}
	controller.EveryOrWoken(ctx, s.Period, woken, func() bool { m.run(ctx, fence, s); return true })
}

// run runs s once and records it: its duration, its counts, and its error, which is
// logged unless the term ended meanwhile.
func (m *Maintainer) run(ctx context.Context, fence job.Fence, s Service) {
	start := time.Now()
	counts, err := s.RunOnce(ctx, fence)
	m.cfg.Metrics.ran(s.Name, time.Since(start), counts, err)
	if err != nil && ctx.Err() == nil {
		m.cfg.Logger.WarnContext(ctx, "maintenance_run_failed", "service", s.Name, "error", err)
	}
	args := []any{"service", s.Name}
	for k, n := range counts {
		if n != 0 {
			args = append(args, k, n)
		}
	}
	if len(args) > 2 {
		m.cfg.Logger.DebugContext(ctx, "maintenance_ran", args...)
	}
}
