package maintenance

import (
	"cmp"
	"context"
	"log/slog"
	"time"

	"github.com/datajobs/datajobs/internal/job"
)

// The defaults of RetentionConfig, which the flags of `datajobs serve` use too.
const (
	RetentionIntervalDefault    = 10 * time.Minute
	ExecutionsKeptPerJobDefault = 100
	ExecutionsMaxAgeDefault     = 14 * 24 * time.Hour
	RetentionBatchDefault       = 500
	StagedSourcesMaxAgeDefault  = time.Hour
)

// RetentionConfig configures the executions' retention.
type RetentionConfig struct {
	// Settings are the cleanup's period (default RetentionIntervalDefault), the clock the
	// staged sources' age is read with, and the logger, which receives a line per cleanup
	// that deleted rows.
	Settings
	// Retention bounds the finished executions kept, and the finished backfills (the same
	// bounds; defaults ExecutionsKeptPerJobDefault per job, ExecutionsMaxAgeDefault,
	// deleted RetentionBatchDefault at a time).
	Retention job.Retention
	// StagedSourcesMaxAge is how long sources staged for an apply (docs/gitops.md) wait
	// for the apply that takes them before they are deleted (default
	// StagedSourcesMaxAgeDefault): the CLI stages them just before it applies.
	StagedSourcesMaxAge time.Duration
}

// retentionStore is what the retention deletes from.
type retentionStore interface {
	DeleteExpiredExecutions(ctx context.Context, fence job.Fence, r job.Retention) (int, error)
	DeleteExpiredBackfills(ctx context.Context, fence job.Fence, r job.Retention) (int, error)
	DeleteExpiredStagedSources(ctx context.Context, fence job.Fence, before time.Time) (int, error)
}

// Retention deletes the finished executions, then the finished backfills, beyond the
// retention, then the sources staged for an apply that no apply took, fenced: a deposed leader deletes nothing.
type Retention struct {
	cfg RetentionConfig
	db  retentionStore
}

// NewRetention returns the executions' retention service.
func NewRetention(cfg RetentionConfig, db retentionStore) *Retention {
	cfg.Settings = cfg.withDefaults(RetentionIntervalDefault)
	cfg.Retention.KeptPerJob = cmp.Or(cfg.Retention.KeptPerJob, ExecutionsKeptPerJobDefault)
	cfg.Retention.MaxAge = cmp.Or(cfg.Retention.MaxAge, ExecutionsMaxAgeDefault)
	cfg.Retention.Batch = cmp.Or(cfg.Retention.Batch, RetentionBatchDefault)
	cfg.StagedSourcesMaxAge = cmp.Or(cfg.StagedSourcesMaxAge, StagedSourcesMaxAgeDefault)
	return &Retention{cfg: cfg, db: db}
}

// Service is the service as a Maintainer runs it.
func (s *Retention) Service() Service {
	return Service{Name: "execution_retention", Period: s.cfg.Interval, RunOnce: s.runOnce}
}

// runOnce deletes what is beyond the retention: the executions, then the backfills, then
// the staged sources.
func (s *Retention) runOnce(ctx context.Context, fence job.Fence) (Counts, error) {
	counts := Counts{}
	for _, step := range []struct {
		rows   string
		delete func() (int, error)
	}{
		{"executions", func() (int, error) { return s.db.DeleteExpiredExecutions(ctx, fence, s.cfg.Retention) }},
		{"backfills", func() (int, error) { return s.db.DeleteExpiredBackfills(ctx, fence, s.cfg.Retention) }},
		{"staged_sources", func() (int, error) {
			return s.db.DeleteExpiredStagedSources(ctx, fence, s.cfg.Now().Add(-s.cfg.StagedSourcesMaxAge))
		}},
	} {
		n, err := step.delete()
		counts[step.rows] = n
		logCleaned(ctx, s.cfg.Logger, step.rows, n)
		if err != nil {
			return counts, err
		}
	}
	return counts, nil
}

// logCleaned logs, on logger, what a retention deleted of rows, if anything.
func logCleaned(ctx context.Context, logger *slog.Logger, rows string, n int) {
	if n > 0 {
		logger.InfoContext(ctx, "retention_cleaned", "rows", rows, "deleted", n)
	}
}
