package store

import (
	"context"
	"fmt"

	"github.com/datajobs/datajobs/internal/job"
)

// TeamQuotas are limits per team. The store checks them in the transaction that would
// exceed them, under a lock of the team held to its end, so that concurrent requests
// cannot pass a limit together. Zero means no limit.
type TeamQuotas struct {
	// MaxJobs caps the data jobs of a team (creating one, or moving one into the team).
	MaxJobs int
	// MaxSourceBytes caps the bytes of the stored sources archives of a team's jobs.
	MaxSourceBytes int64
}

// lockTeam serialises, until tx ends, the writes that count against team's quotas. An
// advisory lock: there is no team row to lock.
func lockTeam(ctx context.Context, tx Tx, team string) error {
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('datajobs.team:' || $1, 0))`, team); err != nil {
		return fmt.Errorf("lock team %s: %w", team, err)
	}
	return nil
}

// overQuota locks team and reports whether its usage, which the query usage reads (the
// team is $1), is over limit; a limit <= 0 is none.
func overQuota(ctx context.Context, tx Tx, team string, limit int64, usage string) (bool, error) {
	if limit <= 0 {
		return false, nil
	}
	if err := lockTeam(ctx, tx, team); err != nil {
		return false, err
	}
	var n int64
	if err := tx.QueryRow(ctx, usage, team).Scan(&n); err != nil {
		return false, fmt.Errorf("read the quota use of team %s: %w", team, err)
	}
	return n > limit, nil
}

// checkJobsQuota fails when team has as many jobs as its quota allows, so that one more
// would exceed it. It locks the team first.
func (s *Store) checkJobsQuota(ctx context.Context, tx Tx, team string) error {
	over, err := overQuota(ctx, tx, team, int64(s.quotas.MaxJobs), `SELECT count(*) + 1 FROM data_job WHERE team = $1`)
	if over {
		return job.TeamJobsQuota(team, s.quotas.MaxJobs)
	}
	return err
}

// checkSourcesQuota fails when the sources of team's jobs take more bytes than its quota,
// as this transaction left them. It locks the team first: call it after the write.
func (s *Store) checkSourcesQuota(ctx context.Context, tx Tx, team string) error {
	over, err := overQuota(ctx, tx, team, s.quotas.MaxSourceBytes, `
SELECT coalesce(sum(s.size_bytes), 0)::bigint FROM data_job_source s JOIN data_job j ON j.name = s.job_name
WHERE j.team = $1`)
	if over {
		return job.TeamSourcesQuota(team, s.quotas.MaxSourceBytes)
	}
	return err
}
