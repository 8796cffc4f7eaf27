package store

import (
	"context"
	"fmt"
)

// CompactJobListCounts adds up the delta rows of data_job_list_count (migration 0031) into
// one row per team and next-run key, so that a count reads a few rows per team. The
// triggers append a row for every statement that creates, deletes, moves, enables,
// disables or reschedules jobs (an upserted counter would lock each team's writers behind
// one another); this deletes every row it sees and writes their sums in one statement.
// Rows appended meanwhile by transactions it does not see stay for the next call, and two
// calls at once delete disjoint rows, so the sums never change. It returns how many rows
// it folded.
func (s *Store) CompactJobListCounts(ctx context.Context) (int64, error) {
	const q = `
WITH gone AS (DELETE FROM data_job_list_count RETURNING team, next_run_key, jobs),
kept AS (
    INSERT INTO data_job_list_count (team, next_run_key, jobs)
    SELECT team, next_run_key, sum(jobs) FROM gone GROUP BY 1, 2 HAVING sum(jobs) <> 0
    RETURNING 1)
SELECT (SELECT count(*) FROM gone) - (SELECT count(*) FROM kept)`
	var folded int64
	if err := s.pool.QueryRow(ctx, q).Scan(&folded); err != nil {
		return 0, translate(fmt.Errorf("compact job list counts: %w", err))
	}
	return folded, nil
}
