package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/datajobs/datajobs/internal/job"
)

// Backfills (issue 27): the API records a backfill (its schedule times computed once) and
// cancels it; the leader starts its runs, at most max_parallel at once, and finishes it.
// All of its state is in its row and its runs' rows, so a new leader goes on where the
// last one stopped.

// BackfillsChannel is the NOTIFY channel of backfill requests (a create, a cancel): the
// payload is the backfill's id.
const BackfillsChannel = "datajobs_backfills"

// MsgBackfillCancelled is the message of the cancelled runs of a cancelled backfill.
const MsgBackfillCancelled = "its backfill was cancelled"

// backfillQuery reads the backfills of the job $1 of team $2 (of its current incarnation),
// newest first, with the counts of their runs by status; $3 > 0 picks one.
const backfillQuery = `SELECT b.id, b.job_name, b.from_time, b.to_time, b.max_parallel, b.args, b.created_by, b.created_at,
	COALESCE(b.cancelled_by, ''), b.cancelled_at, b.message, b.finished_at, cardinality(b.times), b.next_index,
	count(e.id) FILTER (WHERE e.status IN ` + activeStatuses + `),
	COALESCE(b.succeeded, count(e.id) FILTER (WHERE e.status = 'succeeded')),
	COALESCE(b.failed, count(e.id) FILTER (WHERE e.status IN ('user_error', 'platform_error', 'skipped'))),
	COALESCE(b.cancelled, count(e.id) FILTER (WHERE e.status = 'cancelled'))
FROM data_job_backfill b
JOIN data_job j ON j.uid = b.job_uid AND j.name = $1 AND j.team = $2
LEFT JOIN data_job_execution e ON e.backfill_id = b.id
WHERE $3 = 0 OR b.id = $3
GROUP BY b.id ORDER BY b.id DESC LIMIT 100`

func scanBackfill(row pgx.CollectableRow) (job.Backfill, error) {
	var b job.Backfill
	var next int
	p := &b.Progress
	err := row.Scan(&b.ID, &b.JobName, &b.From, &b.To, &b.MaxParallel, &b.Args, &b.CreatedBy, &b.CreatedAt,
		&b.CancelledBy, &b.CancelledAt, &b.Message, &b.FinishedAt, &p.Total, &next,
		&p.Running, &p.Succeeded, &p.Failed, &p.Cancelled)
	if b.CancelledAt != nil {
		p.Cancelled += p.Total - next // never to start
	} else {
		p.Pending = p.Total - next
	}
	return b, err
}

type queryer interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

func readBackfills(ctx context.Context, q queryer, team, name string, id int64) ([]job.Backfill, error) {
	rows, _ := q.Query(ctx, backfillQuery, name, team, id)
	out, err := pgx.CollectRows(rows, scanBackfill)
	return out, rowError(err, nil, "read backfills of "+name)
}

// Backfills reads the latest 100 backfills of the job name of team, newest first.
func (s *Store) Backfills(ctx context.Context, team, name string) ([]job.Backfill, error) {
	if _, err := s.GetDeploymentState(ctx, team, name); err != nil {
		return nil, err
	}
	return readBackfills(ctx, s.pool, team, name, 0)
}

// Backfill reads the backfill id of the job name of team.
func (s *Store) Backfill(ctx context.Context, team, name string, id int64) (job.Backfill, error) {
	return oneBackfill(ctx, s.pool, team, name, id)
}

func oneBackfill(ctx context.Context, q queryer, team, name string, id int64) (job.Backfill, error) {
	if id <= 0 {
		return job.Backfill{}, job.BackfillNotFound(team, name, id)
	}
	bs, err := readBackfills(ctx, q, team, name, id)
	if err != nil {
		return job.Backfill{}, err
	}
	if len(bs) == 0 {
		return job.Backfill{}, job.BackfillNotFound(team, name, id)
	}
	return bs[0], nil
}

// CreateBackfill records a backfill of the job name of team, built from the locked job
// state, and notifies the leader, in one transaction.
func (s *Store) CreateBackfill(ctx context.Context, team, name string, build job.BackfillStart) (job.Backfill, error) {
	var out job.Backfill
	err := s.inLockedTx(ctx, team, name, func(tx Tx, st job.JobState) error {
		n, err := build(st)
		if err != nil {
			return err
		}
		var open int
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM data_job_backfill WHERE job_uid = $1::uuid AND finished_at IS NULL`, st.Job.UID).Scan(&open); err != nil {
			return fmt.Errorf("count backfills of %s: %w", name, err)
		}
		if open >= job.MaxOpenBackfills {
			return job.TooManyBackfills(name)
		}
		var id int64
		err = tx.QueryRow(ctx, `INSERT INTO data_job_backfill (job_name, job_uid, team, from_time, to_time, max_parallel, times, args, created_by)
VALUES ($1, $2::uuid, $3, $4, $5, $6, $7, $8, $9) RETURNING id`,
			name, st.Job.UID, team, n.From, n.To, n.MaxParallel, n.Times, n.Args, n.CreatedBy).Scan(&id)
		if err != nil {
			return writeError("insert backfill of "+name, err)
		}
		if err := notify(ctx, tx, BackfillsChannel, strconv.FormatInt(id, 10)); err != nil {
			return err
		}
		out, err = oneBackfill(ctx, tx, team, name, id)
		return err
	})
	return out, err
}

// CancelBackfill cancels the backfill id of the job name of team: no more of its runs
// start, and those under way are cancelled as a job's delete cancels them (the leader
// deletes their Jobs). Asking twice is one request; a finished backfill is a 400.
func (s *Store) CancelBackfill(ctx context.Context, team, name string, id int64, by string) (job.Backfill, error) {
	var out job.Backfill
	err := s.InTx(ctx, func(tx Tx) error {
		var cancelled, finished bool
		err := tx.QueryRow(ctx, `SELECT b.cancelled_at IS NOT NULL, b.finished_at IS NOT NULL FROM data_job_backfill b
JOIN data_job j ON j.uid = b.job_uid AND j.name = $2 AND j.team = $3 WHERE b.id = $1 FOR UPDATE OF b`, id, name, team).Scan(&cancelled, &finished)
		if err != nil {
			return rowError(err, job.BackfillNotFound(team, name, id), "read backfill "+strconv.FormatInt(id, 10))
		}
		if finished && !cancelled {
			return job.BackfillFinished(id)
		}
		if !cancelled {
			if _, err := tx.Exec(ctx, `UPDATE data_job_backfill SET cancelled_at = now(), cancelled_by = $2 WHERE id = $1`, id, by); err != nil {
				return writeError("cancel backfill", err)
			}
		}
		if err := cancelExecutions(ctx, tx, `backfill_id = $1`, id, MsgBackfillCancelled); err != nil {
			return err
		}
		if err := notify(ctx, tx, BackfillsChannel, strconv.FormatInt(id, 10)); err != nil {
			return err
		}
		out, err = oneBackfill(ctx, tx, team, name, id)
		return err
	})
	return out, err
}

// OpenBackfills returns the ids of the backfills not finished, oldest first.
func (s *Store) OpenBackfills(ctx context.Context) ([]int64, error) {
	rows, _ := s.pool.Query(ctx, `SELECT id FROM data_job_backfill WHERE finished_at IS NULL ORDER BY id`)
	out, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	return out, rowError(err, nil, "read open backfills")
}

// openBackfill is the row of a backfill the leader advances.
type openBackfill struct {
	id                int64
	name, uid, team   string
	createdBy         string
	maxParallel, next int
	times             []time.Time
	args              []byte
	cancelled         bool
	active            int
}

// AdvanceBackfill moves the backfill id on, while fence holds the lease, in one
// transaction under the backfill's row lock: it starts the next runs up to max_parallel
// under way (from the job's CronJob: none while it has none), stops a backfill whose job
// or deployment went, and finishes one with nothing pending or under way, counting its
// runs. It returns the ids of the runs it started and whether the backfill is finished.
func (s *Store) AdvanceBackfill(ctx context.Context, fence job.Fence, id int64, now time.Time) (started []string, finished bool, err error) {
	err = s.InTx(ctx, func(tx Tx) error {
		var held bool
		if err := tx.QueryRow(ctx, `SELECT `+syncLeaseHeld("$1"), fence.Epoch).Scan(&held); err != nil {
			return fmt.Errorf("check lease: %w", err)
		}
		if !held {
			return fmt.Errorf("advance backfill %d: the lease of term %d is no longer held", id, fence.Epoch)
		}
		b, ok, err := lockBackfill(ctx, tx, id)
		if err != nil || !ok {
			return err
		}
		st, stop, err := backfillJob(ctx, tx, b)
		if err != nil {
			return err
		}
		if stop != "" && !b.cancelled {
			b.cancelled = true
			if _, err := tx.Exec(ctx, `UPDATE data_job_backfill SET cancelled_at = now(), cancelled_by = 'datajobs', message = $2 WHERE id = $1`, id, stop); err != nil {
				return writeError("stop backfill", err)
			}
		}
		if !b.cancelled && st.Actual != nil {
			room, err := s.activeRoom(ctx, tx, st.Job.Team)
			if err != nil {
				return err
			}
			if started, err = startBackfillRuns(ctx, tx, b, st, now, room); err != nil {
				return err
			}
		}
		if b.active+len(started) > 0 || (!b.cancelled && b.next+len(started) < len(b.times)) {
			return nil
		}
		finished = true
		_, err = tx.Exec(ctx, `UPDATE data_job_backfill b SET finished_at = now(),
	succeeded = (SELECT count(*) FROM data_job_execution e WHERE e.backfill_id = b.id AND e.status = 'succeeded'),
	failed = (SELECT count(*) FROM data_job_execution e WHERE e.backfill_id = b.id AND e.status IN ('user_error', 'platform_error', 'skipped')),
	cancelled = (SELECT count(*) FROM data_job_execution e WHERE e.backfill_id = b.id AND e.status = 'cancelled')
WHERE b.id = $1`, id)
		if err != nil {
			return writeError("finish backfill", err)
		}
		return nil
	})
	return started, finished, err
}

// lockBackfill locks the open backfill id and counts its runs under way; ok is false when
// it is finished (or gone).
func lockBackfill(ctx context.Context, tx Tx, id int64) (openBackfill, bool, error) {
	b := openBackfill{id: id}
	err := tx.QueryRow(ctx, `SELECT job_name, job_uid::text, team, created_by, max_parallel, next_index, times, args, cancelled_at IS NOT NULL
FROM data_job_backfill WHERE id = $1 AND finished_at IS NULL FOR UPDATE`, id).
		Scan(&b.name, &b.uid, &b.team, &b.createdBy, &b.maxParallel, &b.next, &b.times, &b.args, &b.cancelled)
	if errors.Is(err, pgx.ErrNoRows) {
		return b, false, nil
	}
	if err != nil {
		return b, false, fmt.Errorf("lock backfill %d: %w", id, err)
	}
	err = tx.QueryRow(ctx, `SELECT count(*) FROM data_job_execution WHERE backfill_id = $1 AND status IN `+activeStatuses, id).Scan(&b.active)
	if err != nil {
		return b, false, fmt.Errorf("count runs of backfill %d: %w", id, err)
	}
	return b, true, nil
}

// backfillJob locks the backfill's job and reads its state; stop says why the backfill
// cannot go on (its job incarnation was deleted or moved, its deployment deleted), or "".
func backfillJob(ctx context.Context, tx Tx, b openBackfill) (job.JobState, string, error) {
	var team string
	err := tx.QueryRow(ctx, `SELECT team FROM data_job WHERE uid = $1::uuid`, b.uid).Scan(&team)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return job.JobState{}, MsgJobDeleted, nil
	case err != nil:
		return job.JobState{}, "", fmt.Errorf("read job of backfill %d: %w", b.id, err)
	case team != b.team:
		return job.JobState{}, MsgJobMoved, nil
	}
	st, err := lockState(ctx, tx, team, b.name)
	if err != nil {
		return st, "", err
	}
	if st.Desired == nil {
		return st, MsgDeploymentDeleted, nil
	}
	return st, "", nil
}

// startBackfillRuns inserts the backfill's next runs, as many as max_parallel and the
// team's room for active executions (TeamQuotas.MaxActiveExecutions) leave room for, each
// of its logical time (an argument and, by the leader, the environment), and notifies the
// leader of each; it moves next_index on.
func startBackfillRuns(ctx context.Context, tx Tx, b openBackfill, st job.JobState, now time.Time, room int) ([]string, error) {
	n := min(b.maxParallel-b.active, len(b.times)-b.next, room)
	var ids []string
	for i := range max(n, 0) {
		at := b.times[b.next+i]
		args, err := job.RunArgs("backfill arguments", at, b.args)
		if err != nil {
			return nil, err
		}
		id, err := insertExecution(ctx, tx, st.Job, job.NewExecution{
			OpID: fmt.Sprintf("backfill-%d-%d", b.id, b.next+i), StartedBy: "backfill/" + b.createdBy, Args: args,
			Snapshot: st.Actual.Snapshot(), Start: now, Type: job.ExecManual, LogicalTime: &at, BackfillID: b.id,
		})
		if err != nil {
			return nil, err
		}
		if err := notify(ctx, tx, ExecutionsChannel, id); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	if len(ids) == 0 {
		return nil, nil
	}
	if _, err := tx.Exec(ctx, `UPDATE data_job_backfill SET next_index = next_index + $2 WHERE id = $1`, b.id, len(ids)); err != nil {
		return nil, writeError("advance backfill", err)
	}
	return ids, nil
}

// DeleteExpiredBackfills deletes finished backfills beyond r, as DeleteExpiredExecutions
// deletes finished executions: the newest r.KeptPerJob per job incarnation (a deleted
// job's too) stay, none older than r.MaxAge (by when it finished), r.Batch rows per
// statement, while fence holds the lease. An open backfill is never deleted. The runs of
// a deleted backfill keep their logical time and lose only their backfill id (ON DELETE
// SET NULL): a finished backfill has counted them already. It returns how many it deleted.
func (s *Store) DeleteExpiredBackfills(ctx context.Context, fence job.Fence, r job.Retention) (int, error) {
	q := `DELETE FROM data_job_backfill WHERE id IN (
	SELECT id FROM (
		SELECT id, finished_at, row_number() OVER (PARTITION BY job_name, job_uid ORDER BY finished_at DESC, id DESC) AS rn
		FROM data_job_backfill WHERE finished_at IS NOT NULL
	) x WHERE rn > $1 OR finished_at < now() - $2::interval
	LIMIT $3
) AND ` + syncLeaseHeld("$4")
	return s.deleteExpired(ctx, q, fence, r, "backfills")
}
