package maintenance

import (
	"cmp"
	"context"
	"time"

	"github.com/datajobs/datajobs/internal/job"
)

// The defaults of AuditRetentionConfig, which the flags of `datajobs serve` use too. An
// audit row is at most about 2 KiB (store.AuditPathMaxBytes), so a team's log stays under
// about 200 MB; a revision is at most a job's spec, so a job's stay under 100 specs.
const (
	AuditKeptPerTeamDefault    = 100_000
	AuditMaxAgeDefault         = 90 * 24 * time.Hour
	RevisionsKeptPerJobDefault = 100
	RevisionsMaxAgeDefault     = 365 * 24 * time.Hour
)

// AuditRetentionConfig configures the retention of the audit log and of the revisions
// (issue 41, M1: without it any team member could fill the database's disk through them).
type AuditRetentionConfig struct {
	// Settings are the cleanup's period (default RetentionIntervalDefault) and logger,
	// which receives a line per cleanup that deleted rows (it reads no clock: the store's).
	Settings
	// AuditKeptPerTeam is the number of audit rows kept per team, newest first (default
	// AuditKeptPerTeamDefault).
	AuditKeptPerTeam int
	// AuditMaxAge removes audit rows older than this (default AuditMaxAgeDefault).
	AuditMaxAge time.Duration
	// RevisionsKeptPerJob is the number of revisions kept per job, newest first (default
	// RevisionsKeptPerJobDefault).
	RevisionsKeptPerJob int
	// RevisionsMaxAge removes revisions older than this, never a job's newest (default
	// RevisionsMaxAgeDefault).
	RevisionsMaxAge time.Duration
	// Batch is the number of rows deleted per statement (default RetentionBatchDefault).
	Batch int
}

// auditRetentionStore is what the audit retention deletes from.
type auditRetentionStore interface {
	// DeleteExpiredAudit counts r.KeptPerJob per team.
	DeleteExpiredAudit(ctx context.Context, fence job.Fence, r job.Retention) (int, error)
	DeleteExpiredRevisions(ctx context.Context, fence job.Fence, r job.Retention) (int, error)
}

// AuditRetention deletes the audit rows, then the revisions, beyond the retention,
// fenced: a deposed leader deletes nothing. Between its cuts the audit log stays
// append-only (migration 0034).
type AuditRetention struct {
	cfg AuditRetentionConfig
	db  auditRetentionStore
}

// NewAuditRetention returns the audit log's and revisions' retention service.
func NewAuditRetention(cfg AuditRetentionConfig, db auditRetentionStore) *AuditRetention {
	cfg.Settings = cfg.withDefaults(RetentionIntervalDefault)
	cfg.AuditKeptPerTeam = cmp.Or(cfg.AuditKeptPerTeam, AuditKeptPerTeamDefault)
	cfg.AuditMaxAge = cmp.Or(cfg.AuditMaxAge, AuditMaxAgeDefault)
	cfg.RevisionsKeptPerJob = cmp.Or(cfg.RevisionsKeptPerJob, RevisionsKeptPerJobDefault)
	cfg.RevisionsMaxAge = cmp.Or(cfg.RevisionsMaxAge, RevisionsMaxAgeDefault)
	cfg.Batch = cmp.Or(cfg.Batch, RetentionBatchDefault)
	return &AuditRetention{cfg: cfg, db: db}
}

// Service is the service as a Maintainer runs it.
func (s *AuditRetention) Service() Service {
	return Service{Name: "audit_retention", Period: s.cfg.Interval, RunOnce: s.runOnce}
}

// runOnce deletes what is beyond the retention: the audit rows, then the revisions (one
// failing does not keep the other).
func (s *AuditRetention) runOnce(ctx context.Context, fence job.Fence) (Counts, error) {
	audit, auditErr := s.db.DeleteExpiredAudit(ctx, fence, job.Retention{
		KeptPerJob: s.cfg.AuditKeptPerTeam, MaxAge: s.cfg.AuditMaxAge, Batch: s.cfg.Batch,
	})
	logCleaned(ctx, s.cfg.Logger, "audit", audit)
	revisions, err := s.db.DeleteExpiredRevisions(ctx, fence, job.Retention{
		KeptPerJob: s.cfg.RevisionsKeptPerJob, MaxAge: s.cfg.RevisionsMaxAge, Batch: s.cfg.Batch,
	})
	logCleaned(ctx, s.cfg.Logger, "revisions", revisions)
	return Counts{"audit": audit, "revisions": revisions}, cmp.Or(auditErr, err)
}
