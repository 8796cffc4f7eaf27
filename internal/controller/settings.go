package controller

import (
	"cmp"
	"log/slog"
	"time"
)

// Settings are what a controller's Config sets of its loop (the tracker's, the firer's,
// the stepper's): one struct with one defaults method (WithDefaults), so that a
// controller names only its own defaults.
type Settings struct {
	// Workers is how many keys are reconciled at once (default: the controller's
	// default workers).
	Workers int
	// Interval is the period of the resync, the controller's periodic look (default: the
	// controller's default interval).
	Interval time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Logger receives the reconciles' events and failures (default slog.Default()).
	Logger *slog.Logger
}

// WithDefaults is s with its zero settings set: workers and interval, the controller's
// defaults, time.Now and slog.Default().
func (s Settings) WithDefaults(workers int, interval time.Duration) Settings {
	s.Workers = cmp.Or(s.Workers, workers)
	s.Interval = cmp.Or(s.Interval, interval)
	if s.Now == nil {
		s.Now = time.Now
	}
	s.Logger = cmp.Or(s.Logger, slog.Default())
	return s
}
