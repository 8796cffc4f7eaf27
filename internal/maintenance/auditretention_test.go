package maintenance

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/job"
)

// auditRetentionDB deletes what the test says, and records the retention it was asked for.
type auditRetentionDB struct {
	audit, revisions       int
	auditErr, revisionsErr error
	asked                  []job.Retention
}

func (d *auditRetentionDB) DeleteExpiredAudit(_ context.Context, _ job.Fence, r job.Retention) (int, error) {
	d.asked = append(d.asked, r)
	return d.audit, d.auditErr
}

func (d *auditRetentionDB) DeleteExpiredRevisions(_ context.Context, _ job.Fence, r job.Retention) (int, error) {
	d.asked = append(d.asked, r)
	return d.revisions, d.revisionsErr
}

// Issue 41, M1: the audit log and the revisions had no retention at all (no such service).
func TestAuditRetentionRunOnce(t *testing.T) {
	t.Parallel()
	audit := job.Retention{KeptPerJob: AuditKeptPerTeamDefault, MaxAge: AuditMaxAgeDefault, Batch: RetentionBatchDefault}
	revisions := job.Retention{KeptPerJob: RevisionsKeptPerJobDefault, MaxAge: RevisionsMaxAgeDefault, Batch: RetentionBatchDefault}
	for _, tc := range []struct {
		name       string
		cfg        AuditRetentionConfig
		db         auditRetentionDB
		asked      []job.Retention
		counts     Counts
		errContain string
	}{{
		name: "the audit rows, then the revisions, are deleted beyond their bounds (the defaults)",
		db:   auditRetentionDB{audit: 7, revisions: 2}, asked: []job.Retention{audit, revisions},
		counts: Counts{"audit": 7, "revisions": 2},
	}, {
		name:   "the bounds given are the bounds used",
		cfg:    AuditRetentionConfig{AuditKeptPerTeam: 5, AuditMaxAge: time.Hour, RevisionsKeptPerJob: 3, RevisionsMaxAge: time.Minute, Batch: 10},
		asked:  []job.Retention{{KeptPerJob: 5, MaxAge: time.Hour, Batch: 10}, {KeptPerJob: 3, MaxAge: time.Minute, Batch: 10}},
		counts: Counts{"audit": 0, "revisions": 0},
	}, {
		name: "an audit cut that fails leaves the revisions' cut to run, and is the run's error",
		db:   auditRetentionDB{auditErr: errors.New("deposed"), revisions: 1}, asked: []job.Retention{audit, revisions},
		counts: Counts{"audit": 0, "revisions": 1}, errContain: "deposed",
	}, {
		name: "revisions that fail to go are the run's error, the audit rows deleted still counted",
		db:   auditRetentionDB{audit: 2, revisionsErr: errors.New("timeout")}, asked: []job.Retention{audit, revisions},
		counts: Counts{"audit": 2, "revisions": 0}, errContain: "timeout",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			db := tc.db
			tc.cfg.Logger = slog.New(slog.DiscardHandler)
			s := NewAuditRetention(tc.cfg, &db)
			counts, err := s.runOnce(t.Context(), job.Fence{Epoch: 3})
			requireRun(t, tc.counts, tc.errContain, counts, err)
			require.Equal(t, tc.asked, db.asked)
		})
	}
}
