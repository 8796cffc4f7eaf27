package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/datajobs/datajobs/internal/job"
)

// Execution targets (issue 44, docs/targets.md): rows of execution_target, and the default
// target of each team in execution_target_team (a team without a row is the default
// target's). Each target is driven by a synchronizer shard of its own; which rows a shard
// reads and writes is TargetView's.

// TargetsChannel is NOTIFYed, with the target's name, by every change of a target: the
// shard manager of each replica starts, stops or restarts that target's shard.
const TargetsChannel = "datajobs_targets"

// MsgTargetMoved is the cancel message of the runs of a team moved to another target.
const MsgTargetMoved = "Cancelled: the job's team moved to another execution target."

const targetColumns = `t.name, t.namespace, coalesce(t.kubeconfig_secret, ''), t.teams,
	ARRAY(SELECT tt.team FROM execution_target_team tt WHERE tt.target = t.name ORDER BY tt.team),
	t.created_at, t.updated_at`

// targetNamed selects the target $1 (a lock adds FOR UPDATE).
const targetNamed = `SELECT ` + targetColumns + ` FROM execution_target t WHERE t.name = $1`

func scanTarget(row pgx.Row) (job.Target, error) {
	var t job.Target
	err := row.Scan(&t.Name, &t.Namespace, &t.KubeconfigSecret, &t.Teams, &t.DefaultFor, &t.CreatedAt, &t.UpdatedAt)
	return t, err
}

// GetTarget reads the target name.
func (s *Store) GetTarget(ctx context.Context, name string) (job.Target, error) {
	t, err := scanTarget(s.pool.QueryRow(ctx, targetNamed, name))
	return t, rowError(err, job.TargetNotFound(name), "read target "+name)
}

// ListTargets reads every target, by name.
func (s *Store) ListTargets(ctx context.Context) ([]job.Target, error) {
	rows, _ := s.pool.Query(ctx, `SELECT `+targetColumns+` FROM execution_target t ORDER BY t.name`)
	return collect(rows, scanTarget, "list targets")
}

// EnsureDefaultTarget writes the default target in namespace when there is none yet (the
// first start after an upgrade: the namespace every CronJob is in already, so none is
// rewritten), and returns the default target as the database has it.
func (s *Store) EnsureDefaultTarget(ctx context.Context, namespace string) (job.Target, error) {
	_, err := s.pool.Exec(ctx, `INSERT INTO execution_target (name, namespace, teams) VALUES ($1, $2, '{*}') ON CONFLICT (name) DO NOTHING`,
		job.DefaultTargetName, namespace)
	if err != nil {
		return job.Target{}, translate(fmt.Errorf("write the default target: %w", err))
	}
	return s.GetTarget(ctx, job.DefaultTargetName)
}

// PutTarget creates or replaces the target t. A team that joins or leaves its default_for
// moves to it or back to the default target: its jobs are noted as changed (both shards
// reconcile them: the new one creates their CronJobs, the old one deletes its own) and its
// runs in the old target are cancelled (invariant 11), in the same transaction. A team
// that is another target's default is refused (409), as is a new namespace or cluster for
// a target that still holds CronJobs or runs. created tells whether t is new.
func (s *Store) PutTarget(ctx context.Context, t job.Target) (created bool, err error) {
	err = s.InTx(ctx, func(tx Tx) error {
		// The name's lock first: FOR UPDATE locks no row of a target not created yet, and
		// PUTs creating one at once each answered 201 and kept the others' default teams.
		if err := lockName(ctx, tx, "target", t.Name); err != nil {
			return err
		}
		old, err := scanTarget(tx.QueryRow(ctx, targetNamed+` FOR UPDATE`, t.Name))
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			created = true
		case err != nil:
			return translate(fmt.Errorf("lock target %s: %w", t.Name, err))
		case !old.SamePlace(t):
			if why, err := targetHolds(ctx, tx, t.Name); err != nil || why != "" {
				return cmpOrErr(err, job.TargetInUse(t.Name, "move to another namespace or cluster", why))
			}
		}
		if err := keepsGrants(ctx, tx, t); err != nil {
			return err
		}
		joined, left := teamsDiff(old.DefaultFor, t.DefaultFor)
		if err := lockTeamsJobs(ctx, tx, append(slices.Clone(joined), left...), s); err != nil {
			return err
		}
		if err := writeTarget(ctx, tx, t, joined, left); err != nil {
			return err
		}
		return notify(ctx, tx, TargetsChannel, t.Name)
	})
	return created, err
}

// keepsGrants refuses (409) a target t that would no longer grant a team whose
// deployments name it: they would render in a target the team may not use.
func keepsGrants(ctx context.Context, tx Tx, t job.Target) error {
	rows, _ := tx.Query(ctx, `SELECT DISTINCT j.team FROM desired_data_job_deployment d JOIN data_job j ON j.name = d.data_job_name
WHERE d.execution_target = $1 ORDER BY j.team`, t.Name)
	teams, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return translate(fmt.Errorf("read the teams deploying to target %s: %w", t.Name, err))
	}
	for _, team := range teams {
		if !t.Granted(team) {
			return job.TargetInUse(t.Name, "stop granting team "+team,
				fmt.Sprintf("Deployments of the team %q name it as their execution_target.", team))
		}
	}
	return nil
}

// cmpOrErr is err when set, else refusal.
func cmpOrErr(err error, refusal *job.Error) error {
	if err != nil {
		return err
	}
	return refusal
}

// teamsDiff is the teams of next not in prev (joined) and of prev not in next (left).
func teamsDiff(prev, next []string) (joined, left []string) {
	for _, t := range next {
		if !slices.Contains(prev, t) {
			joined = append(joined, t)
		}
	}
	for _, t := range prev {
		if !slices.Contains(next, t) {
			left = append(left, t)
		}
	}
	return joined, left
}

// lockTeamsJobs takes the row locks of every job of teams, in name order, first (the one
// lock order of docs/architecture.md): their runs are cancelled and their CronJobs move.
func lockTeamsJobs(ctx context.Context, tx Tx, teams []string, s *Store) error {
	if len(teams) == 0 {
		return nil
	}
	rows, _ := tx.Query(ctx, `SELECT name FROM data_job WHERE team = ANY($1) ORDER BY name`, teams)
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return translate(fmt.Errorf("read the jobs of teams %v: %w", teams, err))
	}
	var p pipeline
	p.lockJobs(lockForUpdate, names, s.lockTimer("api"))
	return p.send(ctx, tx)
}

// writeTarget writes t's row and moves the teams that joined or left its default_for: the
// runs of each in its previous target are cancelled, and the trigger of migration 0068
// notes their jobs in the change log; the NOTIFYs wake each shard's synchronizer.
func writeTarget(ctx context.Context, tx Tx, t job.Target, joined, left []string) error {
	var secret *string
	if !t.Local() {
		secret = &t.KubeconfigSecret
	}
	_, err := tx.Exec(ctx, `INSERT INTO execution_target (name, namespace, kubeconfig_secret, teams) VALUES ($1, $2, $3, $4)
ON CONFLICT (name) DO UPDATE SET namespace = EXCLUDED.namespace, kubeconfig_secret = EXCLUDED.kubeconfig_secret,
	teams = EXCLUDED.teams, updated_at = now()`, t.Name, t.Namespace, secret, nonNil(t.Teams))
	if pgErr, ok := errors.AsType[*pgconn.PgError](err); ok && pgErr.ConstraintName == "execution_target_place_idx" {
		return job.TargetPlaceTaken(t.Namespace)
	}
	if err != nil {
		return writeError("write target "+t.Name, err)
	}
	if err := moveTeams(ctx, tx, t.Name, joined, left); err != nil {
		return err
	}
	return nil
}

// moveTeams makes target the default of the teams joined and the default target that of
// the teams left, refusing a team that is another target's default. The runs of each
// moved team in its previous target are cancelled (their Jobs are there), and the
// trigger of migration 0068 notes the teams' jobs in the change log; the NOTIFYs wake
// each shard's synchronizer for them.
func moveTeams(ctx context.Context, tx Tx, target string, joined, left []string) error {
	moved := append(slices.Clone(joined), left...)
	if len(moved) == 0 {
		return nil
	}
	var team, other string
	err := tx.QueryRow(ctx, `SELECT team, target FROM execution_target_team WHERE team = ANY($1) AND target <> $2 ORDER BY team LIMIT 1`,
		nonNil(joined), target).Scan(&team, &other)
	if err == nil {
		return job.TargetDefaultTaken(team, other)
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return translate(fmt.Errorf("read the teams' targets: %w", err))
	}
	var p pipeline
	p.exec(wrapped("move teams of target "+target), `DELETE FROM execution_target_team WHERE target = $1 AND team = ANY($2)`, target, nonNil(left))
	p.exec(wrapped("move teams to target "+target), `INSERT INTO execution_target_team (team, target) SELECT unnest($2::text[]), $1`, target, nonNil(joined))
	p.exec(wrapped("notify the moved teams' jobs"), `SELECT pg_notify($1, name) FROM data_job WHERE team = ANY($2)`, DesiredChannel, moved)
	if err := p.send(ctx, tx); err != nil {
		return err
	}
	// Runs end where their Jobs are: those of a moved team in a target no longer its own.
	return cancelExecutions(ctx, tx, `team = ANY($1) AND target <> datajobs_job_target(job_name)`, moved, MsgTargetMoved)
}

// targetHolds says what the target name still holds (CronJobs, runs), empty when nothing.
func targetHolds(ctx context.Context, tx Tx, name string) (string, error) {
	var cronJobs, runs, named int
	err := tx.QueryRow(ctx, `SELECT (SELECT count(*) FROM actual_data_job_deployment WHERE target = $1),
	(SELECT count(*) FROM data_job_execution WHERE target = $1 AND status IN `+activeStatuses+`),
	(SELECT count(*) FROM desired_data_job_deployment WHERE execution_target = $1)`, name).Scan(&cronJobs, &runs, &named)
	if err != nil {
		return "", translate(fmt.Errorf("count what target %s holds: %w", name, err))
	}
	if cronJobs == 0 && runs == 0 && named == 0 {
		return "", nil
	}
	return fmt.Sprintf("It holds %d CronJobs and %d submitted or running executions, and %d deployments name it.", cronJobs, runs, named), nil
}

// DeleteTarget deletes the target name. The default target, and one that teams default to
// or that still holds CronJobs or runs, is refused (409).
func (s *Store) DeleteTarget(ctx context.Context, name string) error {
	if name == job.DefaultTargetName {
		return job.TargetInUse(name, "be deleted", "It is where every team without another target runs.")
	}
	return s.InTx(ctx, func(tx Tx) error {
		t, err := scanTarget(tx.QueryRow(ctx, targetNamed+` FOR UPDATE`, name))
		if err != nil {
			return rowError(err, job.TargetNotFound(name), "lock target "+name)
		}
		if len(t.DefaultFor) > 0 {
			return job.TargetInUse(name, "be deleted", fmt.Sprintf("It is the default target of %d teams.", len(t.DefaultFor)))
		}
		if why, err := targetHolds(ctx, tx, name); err != nil || why != "" {
			return cmpOrErr(err, job.TargetInUse(name, "be deleted", why))
		}
		if _, err := tx.Exec(ctx, `DELETE FROM execution_target WHERE name = $1`, name); err != nil {
			return writeError("delete target "+name, err)
		}
		return notify(ctx, tx, TargetsChannel, name)
	})
}

// ReplicaSeen records that the replica identity runs shards now, and returns how many
// replicas were seen within ttl (itself included) and how many targets there are: the
// replica's fair share of the shards is targets over replicas, rounded up. Replicas not
// seen for an hour are forgotten.
func (s *Store) ReplicaSeen(ctx context.Context, identity string, ttl time.Duration) (replicas, targets int, err error) {
	const q = `WITH me AS (
	INSERT INTO sync_replica (identity) VALUES ($1) ON CONFLICT (identity) DO UPDATE SET seen_at = now()
), gone AS (
	DELETE FROM sync_replica WHERE seen_at < now() - interval '1 hour'
)
SELECT (SELECT count(*) FROM sync_replica WHERE seen_at > now() - $2::interval AND identity <> $1) + 1,
	(SELECT count(*) FROM execution_target)`
	err = s.leases.QueryRow(ctx, q, identity, ttl).Scan(&replicas, &targets)
	return replicas, targets, translate(err)
}

// checkTarget queues the check that team may run a deployment in target name (its
// default_for or teams), the target's row locked for share until the deploy commits, so
// that a PUT withdrawing the grant (which locks it for update) waits for it and then sees
// the deployment, or the deploy waits and is refused.
func (p *pipeline) checkTarget(team, name string) {
	p.queryRow(func(row pgx.Row) error {
		var t job.Target
		err := row.Scan(&t.Teams, &t.DefaultFor)
		if err = rowError(err, job.TargetNotFound(name), "check the grant of target "+name); err != nil {
			return err
		}
		if !t.Granted(team) {
			return job.TargetNotGranted(name, team)
		}
		return nil
	}, `SELECT t.teams, ARRAY(SELECT tt.team FROM execution_target_team tt WHERE tt.target = t.name)
FROM execution_target t WHERE t.name = $1 FOR SHARE`, name)
}
