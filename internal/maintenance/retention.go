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
)

// RetentionConfig configures the executions' retention.
type RetentionConfig struct {
	// Interval is the period of the cleanup (default RetentionIntervalDefault).
	Interval time.Duration
	// Retention bounds the finished executions kept, and the finished backfills (the same
	// bounds; defaults ExecutionsKeptPerJobDefault per job, ExecutionsMaxAgeDefault,
	// deleted RetentionBatchDefault at a time).
	Retention job.Retention
	// Logger receives a line per cleanup that deleted rows (default slog.Default()).
	Logger *slog.Logger
}

// retentionStore is what the retention deletes from.
type retentionStore interface {
	DeleteExpiredExecutions(ctx context.Context, fence job.Fence, r job.Retention) (int, error)
	DeleteExpiredBackfills(ctx context.Context, fence job.Fence, r job.Retention) (int, error)
}

// Retention deletes the finished executions, then the finished backfills, beyond the
// retention, fenced: a deposed leader deletes nothing.
type Retention struct {
	cfg RetentionConfig
	db  retentionStore
}

// NewRetention returns the executions' retention service.
func NewRetention(cfg RetentionConfig, db retentionStore) *Retention {
	cfg.Interval = cmp.Or(cfg.Interval, RetentionIntervalDefault)
	cfg.Retention.KeptPerJob = cmp.Or(cfg.Retention.KeptPerJob, ExecutionsKeptPerJobDefault)
	cfg.Retention.MaxAge = cmp.Or(cfg.Retention.MaxAge, ExecutionsMaxAgeDefault)
	cfg.Retention.Batch = cmp.Or(cfg.Retention.Batch, RetentionBatchDefault)
	cfg.Logger = cmp.Or(cfg.Logger, slog.Default())
	return &Retention{cfg: cfg, db: db}
}

// Service is the service as a Maintainer runs it.
func (s *Retention) Service() Service {
	return Service{Name: "execution_retention", Period: s.cfg.Interval, RunOnce: s.runOnce}
}

// runOnce deletes what is beyond the retention: the executions, then the backfills.
func (s *Retention) runOnce(ctx context.Context, fence job.Fence) (Counts, error) {
	execs, err := s.db.DeleteExpiredExecutions(ctx, fence, s.cfg.Retention)
	logCleaned(ctx, s.cfg.Logger, "executions", execs)
	if err != nil {
		return Counts{"executions": execs}, err
	}
	backfills, err := s.db.DeleteExpiredBackfills(ctx, fence, s.cfg.Retention)
	logCleaned(ctx, s.cfg.Logger, "backfills", backfills)
	return Counts{"executions": execs, "backfills": backfills}, err
}

// logCleaned logs, on logger, what a retention deleted of rows, if anything.
func logCleaned(ctx context.Context, logger *slog.Logger, rows string, n int) {
	if n > 0 {
		logger.InfoContext(ctx, "retention_cleaned", "rows", rows, "deleted", n)
	}
}
