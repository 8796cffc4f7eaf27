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

// The leader's side of triggers: one transaction per firing of a trigger turns its oldest
// pending events into runs, fenced by the lease epoch, so that each event starts at most
// one run through any number of leader changes.

// runsPerFiring bounds the runs one firing starts, the oldest events' first. A firing's
// transaction holds the target job's row lock (and, under a team's bound of active
// executions, the team's lock) until it commits, and no run of it is seen by the tracker
// before then: a firing that started every pending event (up to 1000) of a busy trigger in
// one transaction made each event wait behind all the others (bench/triggers, T1 in
// docs/benchmarks.md: p99 33 s at 100 events a second). With more events pending the
// firer fires the trigger again at once, behind the triggers already queued.
const runsPerFiring = 20

// maxEventsPerFiring bounds the pending events a firing of a window trigger reads (a
// closed window's events are one run; a window of more is cut there).
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
	// More: the firing left pending events it could start now to the next firing (it
	// started its bound of runs, or read its bound of events): fire the trigger again.
	More bool
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

// FireTrigger turns the oldest pending events of the trigger id into runs at now (at most
// runsPerFiring runs; More says when more are left) while fence holds the lease, in one
// transaction under the trigger's firing lock: trigger.Plan decides the runs (each event
// its own, or a window's events one); each run starts through the start path of its
// target (a job's manual execution, under the job's lock, its concurrency policy and the
// team's bound applied; a pipeline's run, under its max_active_runs), and its events are
// marked in the same transaction. A disabled or gone target skips the events; a busy one
// leaves them pending.
func (s *Store) FireTrigger(ctx context.Context, fence job.Fence, id string, now time.Time) (TriggerFiring, error) {
	var f firing
	err := s.inTxFrom(ctx, func(first *pipeline) {
		f = firing{s: s, now: now, room: -1}
		f.lock(first, fence, id)
	}, func(tx Tx) error {
		f.tx = tx
		switch {
		case !f.held:
			return fmt.Errorf("fire trigger %s: the lease of term %d is no longer held", id, fence.Epoch)
		case f.t.id == "": // gone
			return nil
		}
		return f.fire(ctx)
	})
	return f.out, err
}

// firing is one firing of a trigger: its transaction and what it started so far.
type firing struct {
	s   *Store
	tx  Tx
	t   firedTrigger // its id empty: the trigger is gone
	now time.Time
	out TriggerFiring
	// held says the lease of the firing's term is held (and kept from changing hands
	// until the firing's end).
	held bool
	// target is the target job's state, read under its row lock by the firing's first
	// start and kept to its end (the lock is held: it cannot change meanwhile).
	target *job.JobState
	// room is the team's room for more manual executions, read under the team's lock by
	// the first start that needs it (-1 before) and counted down by each start.
	room int
	// marks are what became of the events, written together once the runs are started.
	marks eventMarks
	// events are the oldest pending events, read with the lock (firingLimit of them).
	events []trigger.Event
}

// lock queues on first, the BEGIN's round trip, the check of fence (fenced's), the
// trigger's firing lock, the read of the trigger and of its oldest pending events (as many
// as firingLimit says for its coalesce mode; read here, once the lock is held, they were a
// round trip of their own of each firing's six).
func (f *firing) lock(first *pipeline, fence job.Fence, id string) {
	first.queryRow(func(row pgx.Row) error {
		if err := row.Scan(&f.held); err != nil {
			return fmt.Errorf("check lease: %w", err)
		}
		return nil
	}, `SELECT `+syncLeaseHeld("$1"), fence.Epoch)
	// Firings of one trigger take turns (an advisory lock: the invocations' row lock
	// stays free, so a call is not held behind a firing's starts), and each reads the
	// pending events after the last one's commit; the row is kept from a delete.
	first.exec(wrapped("lock firing of trigger "+id), `SELECT pg_advisory_xact_lock(hashtextextended('datajobs.trigger:' || $1, 0))`, id)
	first.queryRow(func(row pgx.Row) error {
		var raw []byte
		err := row.Scan(&f.t.id, &f.t.team, &raw)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			return nil
		case err != nil:
			return fmt.Errorf("lock trigger %s: %w", id, err)
		}
		if err := json.Unmarshal(raw, &f.t.spec); err != nil {
			return fmt.Errorf("decode trigger %s: %w", id, err)
		}
		f.out.Kind = f.t.spec.On.Kind
		return nil
	}, `SELECT id::text, team, spec FROM job_trigger WHERE id = $1::uuid FOR KEY SHARE`, id)
	first.query(func(rows pgx.Rows) (err error) {
		f.events, err = pgx.CollectRows(rows, scanEvent)
		return rowError(err, nil, "read pending events of trigger "+id)
	}, `SELECT `+triggerEventColumns+` FROM job_trigger_event e
WHERE e.trigger_id = $1::uuid AND e.status = 'pending' ORDER BY e.id
LIMIT (SELECT CASE WHEN t.spec->'coalesce'->>'mode' = $2 THEN $3::int ELSE $4::int END FROM job_trigger t WHERE t.id = $1::uuid)`,
		id, trigger.Window, firingLimit(trigger.Window), firingLimit("")) // the trigger's mode is read in the same round trip
}

// firingLimit is how many pending events a firing of a trigger coalescing in mode reads:
// with each event its own run, one more than it may start (to know whether any is left);
// with a window, its bound of events.
func firingLimit(mode string) int {
	if mode == trigger.Window {
		return maxEventsPerFiring
	}
	return runsPerFiring + 1
}

// fire starts the runs of the oldest pending events, at most runsPerFiring, and marks the
// events. With each event its own run it reads one event more than it may start, to know
// whether any is left.
func (f *firing) fire(ctx context.Context) error {
	limit, events := firingLimit(f.t.spec.Coalesce.Mode), f.events
	pending := make([]trigger.PendingEvent, len(events))
	byID := make(map[int64]trigger.Event, len(events))
	for i, e := range events {
		pending[i], byID[e.ID] = trigger.PendingEvent{ID: e.ID, ReceivedAt: e.ReceivedAt}, e
	}
	d := trigger.Plan(f.t.spec.Coalesce, pending, f.now)
	f.out.WakeAt = d.WakeAt
	runs := d.Runs
	// Left for the next firing: the runs past the bound, or, with the bound of events read
	// and no window open, events not read.
	f.out.More = len(runs) > runsPerFiring || (len(events) == limit && d.WakeAt.IsZero())
	runs = runs[:min(len(runs), runsPerFiring)]
	for _, b := range runs {
		batch := make([]trigger.Event, len(b))
		for i, eid := range b {
			batch[i] = byID[eid]
		}
		if err := f.fireBatch(ctx, batch); err != nil {
			return err
		}
		if f.out.Waiting {
			f.out.More = false
			break
		}
	}
	return f.marks.write(ctx, f.tx, f.now)
}

// batchStart is what an attempt to start the run of a batch came to: a run, a skip or a
// wait (message).
type batchStart struct {
	run, message string
	skipped      bool
}

// fireBatch starts the run of the events batch and notes what became of them.
func (f *firing) fireBatch(ctx context.Context, batch []trigger.Event) error {
	args, err := trigger.RunArgs(f.t.spec, batch)
	if err != nil {
		return err
	}
	first := batch[0].ID
	by := trigger.StartedBy(f.t.team, f.t.spec.Name, first)
	var res batchStart
	if f.t.spec.Target.IsPipeline() {
		res, err = startPipelineTarget(ctx, f.tx, f.t, args, by, f.now)
	} else {
		res, err = f.startJobTarget(ctx, args, by, first)
	}
	if err != nil {
		return err
	}
	switch {
	case res.run != "":
		f.out.Started = append(f.out.Started, res.run)
		f.out.Coalesced += len(batch) - 1
		for _, e := range batch {
			if e.ID == first {
				f.marks.add(e.ID, trigger.Started, res.run, nil, "")
			} else {
				f.marks.add(e.ID, trigger.Coalesced, res.run, &first, "")
			}
		}
		return nil
	case res.skipped:
		f.out.Skipped += len(batch)
		for _, e := range batch {
			f.marks.add(e.ID, trigger.Skipped, "", nil, res.message)
		}
		return nil
	}
	f.out.Waiting = true
	ids := make([]int64, len(batch))
	for i, e := range batch {
		ids[i] = e.ID
	}
	_, err = f.tx.Exec(ctx, `UPDATE job_trigger_event SET message = $2 WHERE id = ANY($1::bigint[]) AND message <> $2`, ids, res.message)
	return wrote("mark events of trigger "+f.t.spec.Name, err)
}

// eventMarks are the decided events of a firing, as columns: what each became (started,
// coalesced, skipped), its run, the event it was coalesced into, its message.
type eventMarks struct {
	ids      []int64
	statuses []string
	runs     []*string
	into     []*int64
	messages []string
	// notify are the executions started, each notified on ExecutionsChannel.
	notify []string
}

func (m *eventMarks) add(id int64, status trigger.EventStatus, run string, into *int64, message string) {
	m.ids, m.statuses, m.into, m.messages = append(m.ids, id), append(m.statuses, string(status)), append(m.into, into), append(m.messages, message)
	var r *string
	if run != "" {
		r = &run
	}
	m.runs = append(m.runs, r)
}

// write marks the events decided at now and notifies the executions started, in one
// round trip (notifications are delivered at the commit, in order).
func (m *eventMarks) write(ctx context.Context, tx Tx, now time.Time) error {
	var p pipeline
	if len(m.ids) > 0 {
		p.exec(wrapped("mark events"), `UPDATE job_trigger_event e SET status = m.status, run = m.run, coalesced_into = m.into_id,
	message = m.message, decided_at = $6
FROM unnest($1::bigint[], $2::text[], $3::text[], $4::bigint[], $5::text[]) AS m(id, status, run, into_id, message)
WHERE e.id = m.id`, m.ids, m.statuses, m.runs, m.into, m.messages, now)
	}
	if len(m.notify) > 0 {
		p.exec(wrapped("notify executions"), `SELECT pg_notify($1, x) FROM unnest($2::text[]) AS x`, ExecutionsChannel, m.notify)
	}
	return p.send(ctx, tx)
}

// startJobTarget starts a manual execution of the trigger's job, as a manual start does:
// under the job's row lock, its deployment applied and enabled, its concurrency policy and
// the team's bound of active executions applied. The lock is taken and the job's state
// read by the firing's first start; the team's room counted by its first start too.
func (f *firing) startJobTarget(ctx context.Context, args []byte, by string, event int64) (batchStart, error) {
	name := f.t.spec.Target.JobName
	if f.target == nil {
		var st job.JobState
		var p pipeline
		p.lockState(f.t.team, name, &st, f.s.lockTimer("triggers"))
		err := p.send(ctx, f.tx)
		switch {
		case job.KindOf(err) == job.KindNotFound:
			return batchStart{skipped: true, message: fmt.Sprintf("target job %q no longer exists", name)}, nil
		case err != nil:
			return batchStart{}, err
		}
		f.target = &st
	}
	st := *f.target
	switch {
	case st.Desired == nil:
		return batchStart{skipped: true, message: fmt.Sprintf("target disabled: job %q has no deployment", name)}, nil
	case !st.Desired.Enabled:
		return batchStart{skipped: true, message: "target disabled"}, nil
	case st.Actual == nil:
		return batchStart{message: fmt.Sprintf("waiting for the deployment of job %q to be applied", name)}, nil
	}
	if err := admitStart(ctx, f.tx, st); job.KindOf(err) == job.KindConflict {
		return batchStart{message: fmt.Sprintf("waiting for the execution of job %q under way to end (its concurrency policy)", name)}, nil
	} else if err != nil {
		return batchStart{}, err
	}
	if f.room < 0 {
		room, err := f.s.activeRoom(ctx, f.tx, f.t.team)
		if err != nil {
			return batchStart{}, err
		}
		f.room = room
	}
	if f.room == 0 {
		return batchStart{message: fmt.Sprintf("waiting: team %q has its most manual executions under way", f.t.team)}, nil
	}
	id, err := insertExecution(ctx, f.tx, st.Job, job.NewExecution{
		OpID: fmt.Sprintf("trigger-%d", event), StartedBy: by, Args: args,
		Snapshot: st.Actual.Snapshot(), Start: f.now, Type: job.ExecManual,
	})
	if err != nil {
		return batchStart{}, err
	}
	f.room--
	f.marks.notify = append(f.marks.notify, id)
	return batchStart{run: id}, nil
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
