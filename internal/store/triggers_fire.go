package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/datajobs/datajobs/internal/job"
	pl "github.com/datajobs/datajobs/internal/pipeline"
	"github.com/datajobs/datajobs/internal/trigger"
)

// The leader's side of triggers: one transaction per firing of a trigger turns its pending
// events into runs, fenced by the lease epoch, so that each event starts at most one run
// through any number of leader changes.

// maxEventsPerFiring bounds the pending events one firing reads.
const maxEventsPerFiring = 1000

// TriggerFiring is what one firing of a trigger did.
type TriggerFiring struct {
	// Kind is the trigger's on.kind ("" when the trigger is gone).
	Kind string
	// Started are the runs started: execution ids, or pipeline run ids.
	Started []string
	// Coalesced counts the events consumed by a run that an earlier event started.
	Coalesced int
	// Skipped counts the events that started nothing (the target disabled or gone).
	Skipped int
	// WakeAt is when the next window closes (zero: none is open).
	WakeAt time.Time
	// Waiting: the target could not start a run now (busy, not applied yet); the events
	// stay pending and say why.
	Waiting bool
}

// PendingTriggers returns the ids of the triggers with pending events.
func (s *Store) PendingTriggers(ctx context.Context) ([]string, error) {
	rows, _ := s.pool.Query(ctx, `SELECT DISTINCT trigger_id::text FROM job_trigger_event WHERE status = 'pending'`)
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	return out, rowError(err, nil, "read triggers with pending events")
}

// firedTrigger is the locked row of a trigger being fired.
type firedTrigger struct {
	id, team string
	spec     trigger.Spec
}

// FireTrigger turns the pending events of the trigger id into runs at now while fence
// holds the lease, in one transaction under the trigger's firing lock: trigger.Plan decides
// the runs (each event its own, or a window's events one); each run starts through the
// start path of its target (a job's manual execution, under the job's lock, its
// concurrency policy and the team's bound applied; a pipeline's run, under its
// max_active_runs), and its events are marked in the same transaction. A disabled or gone
// target skips the events; a busy one leaves them pending.
func (s *Store) FireTrigger(ctx context.Context, fence job.Fence, id string, now time.Time) (TriggerFiring, error) {
	var out TriggerFiring
	err := s.InTx(ctx, func(tx Tx) error {
		out = TriggerFiring{}
		if err := fenced(ctx, tx, fence, "fire trigger "+id); err != nil {
			return err
		}
		var t firedTrigger
		var raw []byte
		// Firings of one trigger take turns (an advisory lock: the invocations' row lock
		// stays free, so a call is not held behind a firing's starts), and each reads the
		// pending events after the last one's commit; the row is kept from a delete.
		_, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('datajobs.trigger:' || $1, 0))`, id)
		if err != nil {
			return fmt.Errorf("lock firing of trigger %s: %w", id, err)
		}
		err = tx.QueryRow(ctx, `SELECT id::text, team, spec FROM job_trigger WHERE id = $1::uuid FOR KEY SHARE`, id).Scan(&t.id, &t.team, &raw)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("lock trigger %s: %w", id, err)
		}
		if err := json.Unmarshal(raw, &t.spec); err != nil {
			return fmt.Errorf("decode trigger %s: %w", id, err)
		}
		out.Kind = t.spec.On.Kind
		events, err := pendingEvents(ctx, tx, id)
		if err != nil {
			return err
		}
		pending := make([]trigger.PendingEvent, len(events))
		byID := make(map[int64]trigger.Event, len(events))
		for i, e := range events {
			pending[i], byID[e.ID] = trigger.PendingEvent{ID: e.ID, ReceivedAt: e.ReceivedAt}, e
		}
		d := trigger.Plan(t.spec.Coalesce, pending, now)
		out.WakeAt = d.WakeAt
		for _, b := range d.Runs {
			batch := make([]trigger.Event, len(b))
			for i, eid := range b {
				batch[i] = byID[eid]
			}
			if err := s.fireBatch(ctx, tx, t, batch, now, &out); err != nil || out.Waiting {
				return err
			}
		}
		return nil
	})
	return out, err
}

// pendingEvents reads the pending events of the trigger id, oldest first.
func pendingEvents(ctx context.Context, tx Tx, id string) ([]trigger.Event, error) {
	rows, _ := tx.Query(ctx, `SELECT `+triggerEventColumns+` FROM job_trigger_event e
WHERE e.trigger_id = $1::uuid AND e.status = 'pending' ORDER BY e.id LIMIT $2`, id, maxEventsPerFiring)
	out, err := pgx.CollectRows(rows, scanEvent)
	return out, rowError(err, nil, "read pending events of trigger "+id)
}

// batchStart is what an attempt to start the run of a batch came to: a run, a skip or a
// wait (message).
type batchStart struct {
	run, message string
	skipped      bool
}

// fireBatch starts the run of the events batch of t and marks them.
func (s *Store) fireBatch(ctx context.Context, tx Tx, t firedTrigger, batch []trigger.Event, now time.Time, out *TriggerFiring) error {
	args, err := trigger.RunArgs(t.spec, batch)
	if err != nil {
		return err
	}
	first := batch[0].ID
	by := trigger.StartedBy(t.team, t.spec.Name, first)
	var res batchStart
	if t.spec.Target.IsPipeline() {
		res, err = startPipelineTarget(ctx, tx, t, args, by, now)
	} else {
		res, err = s.startJobTarget(ctx, tx, t, args, by, first, now)
	}
	if err != nil {
		return err
	}
	ids := make([]int64, len(batch))
	for i, e := range batch {
		ids[i] = e.ID
	}
	switch {
	case res.run != "":
		out.Started = append(out.Started, res.run)
		out.Coalesced += len(batch) - 1
		_, err = tx.Exec(ctx, `UPDATE job_trigger_event SET status = CASE WHEN id = $2 THEN 'started' ELSE 'coalesced' END,
	run = $3, coalesced_into = CASE WHEN id = $2 THEN NULL ELSE $2 END, message = '', decided_at = $4
WHERE id = ANY($1::bigint[])`, ids, first, res.run, now)
	case res.skipped:
		out.Skipped += len(batch)
		_, err = tx.Exec(ctx, `UPDATE job_trigger_event SET status = 'skipped', message = $2, decided_at = $3 WHERE id = ANY($1::bigint[])`, ids, res.message, now)
	default:
		out.Waiting = true
		_, err = tx.Exec(ctx, `UPDATE job_trigger_event SET message = $2 WHERE id = ANY($1::bigint[]) AND message <> $2`, ids, res.message)
	}
	return wrote("mark events of trigger "+t.spec.Name, err)
}

// startJobTarget starts a manual execution of t's job, as a manual start does: under the
// job's row lock, its deployment applied and enabled, its concurrency policy and the
// team's bound of active executions applied.
func (s *Store) startJobTarget(ctx context.Context, tx Tx, t firedTrigger, args []byte, by string, event int64, now time.Time) (batchStart, error) {
	name := t.spec.Target.JobName
	var st job.JobState
	var p pipeline
	p.lockState(t.team, name, &st, s.lockTimer("triggers"))
	err := p.send(ctx, tx)
	switch {
	case job.KindOf(err) == job.KindNotFound:
		return batchStart{skipped: true, message: fmt.Sprintf("target job %q no longer exists", name)}, nil
	case err != nil:
		return batchStart{}, err
	case st.Desired == nil:
		return batchStart{skipped: true, message: fmt.Sprintf("target disabled: job %q has no deployment", name)}, nil
	case !st.Desired.Enabled:
		return batchStart{skipped: true, message: "target disabled"}, nil
	case st.Actual == nil:
		return batchStart{message: fmt.Sprintf("waiting for the deployment of job %q to be applied", name)}, nil
	}
	if err := admitStart(ctx, tx, st); job.KindOf(err) == job.KindConflict {
		return batchStart{message: fmt.Sprintf("waiting for the execution of job %q under way to end (its concurrency policy)", name)}, nil
	} else if err != nil {
		return batchStart{}, err
	}
	room, err := s.activeRoom(ctx, tx, t.team)
	if err != nil {
		return batchStart{}, err
	}
	if room == 0 {
		return batchStart{message: fmt.Sprintf("waiting: team %q has its most manual executions under way", t.team)}, nil
	}
	id, err := insertExecution(ctx, tx, st.Job, job.NewExecution{
		OpID: fmt.Sprintf("trigger-%d", event), StartedBy: by, Args: args,
		Snapshot: st.Actual.Snapshot(), Start: now, Type: job.ExecManual,
	})
	if err != nil {
		return batchStart{}, err
	}
	return batchStart{run: id}, notify(ctx, tx, ExecutionsChannel, id)
}

// startPipelineTarget starts a run of t's pipeline, as the API's start does: under the
// pipeline's row lock, enabled, fewer than max_active_runs running.
func startPipelineTarget(ctx context.Context, tx Tx, t firedTrigger, args []byte, by string, now time.Time) (batchStart, error) {
	name := t.spec.Target.PipelineName
	var pid int64
	var enabled bool
	var active, most int
	err := tx.QueryRow(ctx, `SELECT p.id, p.enabled, p.max_active_runs,
	(SELECT count(*) FROM pipeline_run r WHERE r.pipeline_id = p.id AND r.status = 'running')
FROM pipeline p WHERE p.team = $1 AND p.name = $2 FOR UPDATE`, t.team, name).Scan(&pid, &enabled, &most, &active)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return batchStart{skipped: true, message: fmt.Sprintf("target pipeline %q no longer exists", name)}, nil
	case err != nil:
		return batchStart{}, fmt.Errorf("lock pipeline %s: %w", name, err)
	case !enabled:
		return batchStart{skipped: true, message: "target disabled"}, nil
	case active >= most:
		return batchStart{message: fmt.Sprintf("waiting: pipeline %q has max_active_runs (%d) runs running", name, most)}, nil
	}
	run, err := insertRun(ctx, tx, pid, pl.NewRun{Arguments: args, LogicalTime: now, StartedBy: by}, nil, 0, nil)
	if err != nil {
		return batchStart{}, err
	}
	return batchStart{run: triggerRunKey(run)}, nil
}
