package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/datajobs/datajobs/internal/job"
)

// The health of execution targets (issue 44, migration 0070): a replica that cannot run a
// target's shard reports it, one that runs it again reports that, and every replica's
// console shows the outages for a while after the last report (docs/targets.md, "An
// unreachable target").

// MaxOutageReason bounds the reason an outage keeps, in bytes (cut at a rune, marked).
const MaxOutageReason = 500

// ReportTargetUnreachable records that the shard of target cannot run, and why, shown
// for showFor from now unless reported again. An outage still shown keeps its start.
func (s *Store) ReportTargetUnreachable(ctx context.Context, target, reason string, showFor time.Duration) error {
	_, err := s.pool.Exec(ctx, `INSERT INTO execution_target_health AS h (target, unreachable_since, reason, shown_until)
VALUES ($1, now(), $2, now() + $3::interval)
ON CONFLICT (target) DO UPDATE SET reason = EXCLUDED.reason, updated_at = now(), shown_until = EXCLUDED.shown_until,
	unreachable_since = CASE WHEN h.shown_until > now() THEN h.unreachable_since ELSE now() END`,
		target, auditText(reason, MaxOutageReason), showFor)
	if err != nil {
		return translate(fmt.Errorf("report target %s unreachable: %w", target, err))
	}
	return nil
}

// ReportTargetReachable records that the shard of target runs: its outage is shown for
// hold more at most, so that a term that starts and fails again within hold (a stopped
// apiserver is noticed only after a while) continues the outage, not a new one.
func (s *Store) ReportTargetReachable(ctx context.Context, target string, hold time.Duration) error {
	_, err := s.pool.Exec(ctx, `UPDATE execution_target_health SET updated_at = now(), shown_until = least(shown_until, now() + $2::interval)
WHERE target = $1`, target, hold)
	if err != nil {
		return translate(fmt.Errorf("report target %s reachable: %w", target, err))
	}
	return nil
}

// TargetOutages reads the outages shown now, by target, each with the teams whose jobs
// run there (those it is the default of, and those whose deployments name it).
func (s *Store) TargetOutages(ctx context.Context) ([]job.TargetOutage, error) {
	rows, _ := s.pool.Query(ctx, `SELECT h.target, h.unreachable_since, h.reason, h.updated_at,
	ARRAY(SELECT tt.team FROM execution_target_team tt WHERE tt.target = h.target
		UNION SELECT j.team FROM desired_data_job_deployment d JOIN data_job j ON j.name = d.data_job_name WHERE d.execution_target = h.target
		ORDER BY 1)
FROM execution_target_health h WHERE h.shown_until > now() ORDER BY h.target`)
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (job.TargetOutage, error) {
		var o job.TargetOutage
		err := row.Scan(&o.Target, &o.Since, &o.Reason, &o.ReportedAt, &o.Teams)
		return o, err
	})
	if err != nil {
		return nil, translate(fmt.Errorf("read target outages: %w", err))
	}
	return out, nil
}
