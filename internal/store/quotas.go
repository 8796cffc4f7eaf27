package store

import (
	"cmp"
	"context"
	"fmt"
	"math"

	"github.com/datajobs/datajobs/internal/job"
)

// TeamQuotas are limits per team. The store checks them in the transaction that would
// exceed them, under a lock of the team held to its end, so that concurrent requests
// cannot pass a limit together. Zero means no limit.
type TeamQuotas struct {
	// MaxJobs caps the data jobs of a team (creating one, or moving one into the team).
	MaxJobs int
	// MaxSourceBytes caps the bytes of the stored sources archives of a team's jobs and of
	// those staged for its applies.
	MaxSourceBytes int64
	// MaxActiveExecutions caps the manual executions (starts, re-runs, backfill runs) of a
	// team submitted or running at once (default DefaultMaxActiveExecutions; negative: no
	// limit). A start over it is refused, a backfill waits. Without it backfills ×
	// max_parallel × jobs had no bound (issue 41, L6). Scheduled runs are not counted: the
	// CronJob controller starts them, as many as the team's jobs and schedules make.
	MaxActiveExecutions int
}

// DefaultMaxActiveExecutions is TeamQuotas.MaxActiveExecutions's default.
const DefaultMaxActiveExecutions = 100

func (q TeamQuotas) withDefaults() TeamQuotas {
	q.MaxActiveExecutions = cmp.Or(q.MaxActiveExecutions, DefaultMaxActiveExecutions)
	return q
}

// activeRoom locks team and returns how many more manual executions it may have
// submitted or running (TeamQuotas.MaxActiveExecutions).
func (s *Store) activeRoom(ctx context.Context, tx Tx, team string) (int, error) {
	limit := s.quotas.MaxActiveExecutions
	if limit < 0 {
		return math.MaxInt, nil
	}
	if err := lockTeam(ctx, tx, team); err != nil {
		return 0, err
	}
	var n int
	err := tx.QueryRow(ctx, `SELECT count(*) FROM data_job_execution e JOIN data_job j ON j.uid = e.job_uid
WHERE j.team = $1 AND e.type = 'manual' AND e.status IN `+activeStatuses, team).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count the active executions of team %s: %w", team, err)
	}
	return max(limit-n, 0), nil
}

// lockTeam serialises, until tx ends, the writes that count against team's quotas. An
// advisory lock: there is no team row to lock.
func lockTeam(ctx context.Context, tx Tx, team string) error {
	return lockName(ctx, tx, "team", team)
}

// lockName takes, until tx ends, the advisory lock of the name of a kind of thing (a
// team, a target): for what may have no row yet to lock FOR UPDATE.
func lockName(ctx context.Context, tx Tx, kind, name string) error {
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('datajobs.' || $1 || ':' || $2, 0))`, kind, name); err != nil {
		return fmt.Errorf("lock %s %s: %w", kind, name, err)
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

// checkSourcesQuota fails when the sources of team's jobs, and those staged for it (for an
// apply), take more bytes than its quota, as this transaction left them. It locks the team first: call it after the write.
func (s *Store) checkSourcesQuota(ctx context.Context, tx Tx, team string) error {
	over, err := overQuota(ctx, tx, team, s.quotas.MaxSourceBytes, `
SELECT ((SELECT coalesce(sum(s.size_bytes), 0) FROM data_job_source s JOIN data_job j ON j.name = s.job_name WHERE j.team = $1)
	+ (SELECT coalesce(sum(size_bytes), 0) FROM staged_source WHERE team = $1))::bigint`)
	if over {
		return job.TeamSourcesQuota(team, s.quotas.MaxSourceBytes)
	}
	return err
}
