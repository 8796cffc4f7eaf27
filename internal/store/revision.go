package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/datajobs/datajobs/internal/job"
)

// The revisions of job renderings (migration 0015) come from one sequence, which only
// grows and which a backup restores to its value of then. The synchronizer's restore guard
// compares the revisions live CronJobs carry with it.

// IssuedRevision is the highest revision the database has ever issued (0: none yet). A
// crash may make the sequence skip values, never go back; a restored backup takes it
// back to the backup's value.
func (s *Store) IssuedRevision(ctx context.Context) (int64, error) {
	var rev int64
	const q = `SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM data_job_revision_seq`
	if err := s.pool.QueryRow(ctx, q).Scan(&rev); err != nil {
		return 0, translate(fmt.Errorf("read the issued job revision: %w", err))
	}
	return rev, nil
}

// AdvanceRevision moves the revision sequence past rev, so that every change from now on
// is newer than the CronJobs a restored database found in the cluster, and reports whether
// it was done: only while fence's term holds the synchronizer lease. It never moves the
// sequence back.
func (s *Store) AdvanceRevision(ctx context.Context, fence job.Fence, rev int64) (bool, error) {
	q := `SELECT setval('data_job_revision_seq', GREATEST(q.last_value, $1::bigint), true)
FROM data_job_revision_seq q WHERE ` + syncLeaseHeld("$2")
	var now int64
	err := s.pool.QueryRow(ctx, q, rev, fence.Epoch).Scan(&now)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, translate(fmt.Errorf("advance the job revision past %d: %w", rev, err))
	}
	return true, nil
}
