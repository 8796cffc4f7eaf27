package store

import (
	"context"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/datajobs/datajobs/internal/job"
)

// The bounds of an audit row (issue 41, M1): what RecordAudit keeps of a request. A
// longer path or name is cut, with AuditCutMark at its end, so a row stays under 2 KiB
// whatever a caller sends; migration 0034's CHECK refuses a row not cut.
const (
	// AuditPathMaxBytes is the most of a request's path an audit row keeps.
	AuditPathMaxBytes = 1024
	// AuditNameMaxBytes is the most of a team, job, actor or op id an audit row keeps.
	AuditNameMaxBytes = 256
	// AuditCutMark ends a value that was cut.
	AuditCutMark = "…"
)

// auditText is s as an audit row keeps it: valid UTF-8 without NUL (PostgreSQL's text
// takes neither), cut at a rune boundary to at most maxBytes, the cut marked.
func auditText(s string, maxBytes int) string {
	s = strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
	if len(s) <= maxBytes {
		return s
	}
	cut := maxBytes - len(AuditCutMark)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + AuditCutMark
}

// boundedAudit is e as an audit row keeps it.
func boundedAudit(e job.AuditEntry) job.AuditEntry {
	e.Team, e.Actor = auditText(e.Team, AuditNameMaxBytes), auditText(e.Actor, AuditNameMaxBytes)
	e.OpID, e.JobName = auditText(e.OpID, AuditNameMaxBytes), auditText(e.JobName, AuditNameMaxBytes)
	e.Method, e.Route = auditText(e.Method, AuditNameMaxBytes), auditText(e.Route, AuditNameMaxBytes)
	e.Path = auditText(e.Path, AuditPathMaxBytes)
	return e
}

// DeleteExpiredAudit deletes the audit rows beyond r (r.KeptPerJob counts rows per team
// here, newest kept; r.MaxAge; r.Batch rows a statement) while fence holds the lease, and
// returns how many it deleted. It is the one statement the append-only trigger lets
// delete (migration 0034): its transaction alone sets datajobs.audit_retention.
func (s *Store) DeleteExpiredAudit(ctx context.Context, fence job.Fence, r job.Retention) (int, error) {
	q := `DELETE FROM audit_log WHERE id IN (
	SELECT id FROM (
		SELECT id, created_at, row_number() OVER (PARTITION BY team ORDER BY id DESC) AS rn FROM audit_log
	) x WHERE rn > $1 OR created_at < now() - $2::interval
	LIMIT $3
) AND ` + syncLeaseHeld("$4")
	total := 0
	for {
		n, err := s.cutAudit(ctx, q, fence, r)
		total += n
		if err != nil || n < r.Batch {
			return total, err
		}
	}
}

// cutAudit runs one retention statement q of the audit log in a transaction that lets it
// delete.
func (s *Store) cutAudit(ctx context.Context, q string, fence job.Fence, r job.Retention) (int, error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return 0, translate(fmt.Errorf("delete expired audit rows: %w", err))
	}
	defer tx.Rollback(ctx) //nolint:errcheck // after Commit, a no-op
	if _, err := tx.Exec(ctx, `SELECT set_config('datajobs.audit_retention', 'cut', true)`); err != nil {
		return 0, translate(fmt.Errorf("delete expired audit rows: %w", err))
	}
	tag, err := tx.Exec(ctx, q, r.KeptPerJob, r.MaxAge, r.Batch, fence.Epoch)
	if err != nil {
		return 0, translate(fmt.Errorf("delete expired audit rows: %w", err))
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, translate(fmt.Errorf("delete expired audit rows: %w", err))
	}
	return int(tag.RowsAffected()), nil
}

// DeleteExpiredRevisions deletes the revisions beyond r (r.KeptPerJob per job incarnation,
// newest kept; r.MaxAge, never a job's newest revision; r.Batch rows a statement) while
// fence holds the lease, and returns how many it deleted.
func (s *Store) DeleteExpiredRevisions(ctx context.Context, fence job.Fence, r job.Retention) (int, error) {
	q := `DELETE FROM data_job_revision WHERE (job_uid, revision) IN (
	SELECT job_uid, revision FROM (
		SELECT job_uid, revision, created_at, row_number() OVER (PARTITION BY job_uid ORDER BY revision DESC) AS rn
		FROM data_job_revision
	) x WHERE rn > $1 OR (rn > 1 AND created_at < now() - $2::interval)
	LIMIT $3
) AND ` + syncLeaseHeld("$4")
	return s.deleteExpired(ctx, q, fence, r, "revisions")
}
