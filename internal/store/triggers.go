package store

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/secrets"
	"github.com/datajobs/datajobs/internal/trigger"
)

// Triggers (issue 42; docs/triggers.md): the API stores a trigger and, for a signed call,
// its events in the request's transaction; outcome events are written by the functions of
// migration 0050 in the statement that records the upstream's final status. The leader's
// firer (triggers_fire.go) turns pending events into runs.

// TriggerEventsChannel is the NOTIFY channel that wakes the firer: the payload is a
// trigger id. An invocation sends it with its events; migration 0050's functions with an
// outcome's.
const TriggerEventsChannel = "datajobs_trigger_events"

// EventRetention is how long events are kept and listed.
const EventRetention = 30 * 24 * time.Hour

// triggerColumns are read by scanTrigger from job_trigger t.
const triggerColumns = `t.id::text, t.team, t.spec, t.created_by, t.created_at`

func scanTrigger(row pgx.Row) (trigger.Trigger, error) {
	var t trigger.Trigger
	var raw []byte
	if err := row.Scan(&t.ID, &t.Team, &raw, &t.CreatedBy, &t.CreatedAt); err != nil {
		return t, err
	}
	return t, json.Unmarshal(raw, &t.Spec)
}

// CreateTrigger stores the trigger spec of team, made by by, with the secret seal returns
// for its new id (signed kinds only; seal is not called for an outcome trigger). Under the
// team's lock: at most trigger.MaxPerTeam triggers. The target must be a job or pipeline of
// team; an outcome trigger's upstream a job or pipeline of its team, and a job of another
// team granted to team (403 otherwise, whether it exists or not).
func (s *Store) CreateTrigger(ctx context.Context, team string, spec trigger.Spec, by string, seal func(id string) (secrets.Envelope, error)) (trigger.Trigger, error) {
	var out trigger.Trigger
	err := s.InTx(ctx, func(tx Tx) (err error) {
		out, err = createTrigger(ctx, tx, team, spec, by, seal)
		return err
	})
	return out, err
}

// createTrigger is CreateTrigger in tx (an apply's: TeamTx.CreateTrigger).
func createTrigger(ctx context.Context, tx Tx, team string, spec trigger.Spec, by string, seal func(id string) (secrets.Envelope, error)) (trigger.Trigger, error) {
	over, err := overQuota(ctx, tx, team, trigger.MaxPerTeam, `SELECT count(*) + 1 FROM job_trigger WHERE team = $1`)
	if err != nil {
		return trigger.Trigger{}, translate(err)
	}
	if over {
		return trigger.Trigger{}, trigger.TooMany(team, trigger.MaxPerTeam)
	}
	if err := checkTriggerRefs(ctx, tx, team, spec); err != nil {
		return trigger.Trigger{}, err
	}
	var id string
	if err := tx.QueryRow(ctx, `SELECT gen_random_uuid()::text`).Scan(&id); err != nil {
		return trigger.Trigger{}, translate(err)
	}
	var env secrets.Envelope
	if spec.Signed() {
		if env, err = seal(id); err != nil {
			return trigger.Trigger{}, err
		}
	}
	raw, err := json.Marshal(spec)
	if err != nil {
		return trigger.Trigger{}, fmt.Errorf("encode trigger %s: %w", spec.Name, err)
	}
	o := spec.On
	out, err := scanTrigger(tx.QueryRow(ctx, `INSERT INTO job_trigger AS t (id, team, name, spec, target_job, target_pipeline,
	on_kind, on_team, on_job, on_pipeline, on_statuses, max_events_per_minute, secret_key_id, secret_wrapped_key, secret_sealed, created_by)
VALUES ($1::uuid, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16)
RETURNING `+triggerColumns, id, team, spec.Name, raw, spec.Target.JobName, spec.Target.PipelineName,
		o.Kind, o.Team, o.JobName, o.PipelineName, append([]string{}, o.Statuses...), spec.MaxEventsPerMinute,
		env.KeyID, env.WrappedKey, env.Sealed, by))
	if sqlState(err) == "23505" {
		return out, trigger.Exists(team, spec.Name)
	}
	return out, wrote("create trigger "+spec.Name, err)
}

// checkTriggerRefs checks the target of spec and an outcome trigger's upstream, the jobs
// locked for key share (a job's delete waits for the create).
func checkTriggerRefs(ctx context.Context, tx Tx, team string, spec trigger.Spec) error {
	if t := spec.Target; t.IsPipeline() {
		if ok, err := exists(ctx, tx, `SELECT EXISTS (SELECT 1 FROM pipeline WHERE team = $1 AND name = $2)`, team, t.PipelineName); err != nil || !ok {
			return cmpErr(err, trigger.UnknownTarget("target.pipeline_name", "pipeline", team, t.PipelineName))
		}
	} else if ok, err := exists(ctx, tx, `SELECT EXISTS (SELECT 1 FROM data_job WHERE team = $1 AND name = $2 FOR KEY SHARE)`, team, t.JobName); err != nil || !ok {
		return cmpErr(err, trigger.UnknownTarget("target.job_name", "job", team, t.JobName))
	}
	o := spec.On
	switch {
	case o.Kind != trigger.Outcome:
		return nil
	case o.PipelineName != "" && o.Team != team:
		return trigger.NotGranted(team, "pipeline", o.Team, o.PipelineName)
	case o.PipelineName != "":
		ok, err := exists(ctx, tx, `SELECT EXISTS (SELECT 1 FROM pipeline WHERE team = $1 AND name = $2)`, team, o.PipelineName)
		if err != nil || !ok {
			return cmpErr(err, trigger.UnknownTarget("on.pipeline_name", "pipeline", team, o.PipelineName))
		}
		return nil
	case o.Team != team:
		ok, err := exists(ctx, tx, `SELECT EXISTS (SELECT 1 FROM data_job j JOIN job_grant g ON g.job_uid = j.uid AND g.grantee_team = $3
WHERE j.team = $1 AND j.name = $2)`, o.Team, o.JobName, team)
		if err != nil || !ok {
			return cmpErr(err, trigger.NotGranted(team, "job", o.Team, o.JobName))
		}
		return nil
	}
	ok, err := exists(ctx, tx, `SELECT EXISTS (SELECT 1 FROM data_job WHERE team = $1 AND name = $2)`, team, o.JobName)
	if err != nil || !ok {
		return cmpErr(err, trigger.UnknownTarget("on.job_name", "job", team, o.JobName))
	}
	return nil
}

// exists runs the EXISTS query q.
func exists(ctx context.Context, tx Tx, q string, args ...any) (bool, error) {
	var ok bool
	if err := tx.QueryRow(ctx, q, args...).Scan(&ok); err != nil {
		return false, fmt.Errorf("check trigger references: %w", err)
	}
	return ok, nil
}

// cmpErr is err when there is one, else domain.
func cmpErr(err error, domain error) error {
	if err != nil {
		return err
	}
	return domain
}

// GetTrigger reads the trigger name of team with its last events (at most lastEvents).
func (s *Store) GetTrigger(ctx context.Context, team, name string, lastEvents int) (trigger.Trigger, error) {
	t, err := scanTrigger(s.pool.QueryRow(ctx, `SELECT `+triggerColumns+` FROM job_trigger t WHERE t.team = $1 AND t.name = $2`, team, name))
	if err != nil {
		return t, rowError(err, trigger.NotFound(team, name), "read trigger "+name)
	}
	if lastEvents > 0 {
		t.LastEvents, err = s.triggerEvents(ctx, t.ID, 1, lastEvents)
	}
	return t, err
}

// ListTriggers reads team's triggers by name, each with its last events (at most
// lastEvents); target, when not empty, keeps those whose target is the job (or, with
// pipeline, the pipeline) of that name.
func (s *Store) ListTriggers(ctx context.Context, team, target string, pipeline bool, lastEvents int) ([]trigger.Trigger, error) {
	col := "target_job"
	if pipeline {
		col = "target_pipeline"
	}
	rows, _ := s.pool.Query(ctx, `SELECT `+triggerColumns+` FROM job_trigger t WHERE t.team = $1 AND ($2 = '' OR t.`+col+` = $2) ORDER BY t.name`, team, target)
	out, err := collect(rows, scanTrigger, "list triggers of "+team)
	if err != nil {
		return nil, err
	}
	for i := range out {
		if lastEvents > 0 {
			if out[i].LastEvents, err = s.triggerEvents(ctx, out[i].ID, 1, lastEvents); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// DeleteTrigger deletes the trigger name of team with its events; the runs it started go
// on.
func (s *Store) DeleteTrigger(ctx context.Context, team, name string) error {
	return s.InTx(ctx, func(tx Tx) error { return deleteTrigger(ctx, tx, team, name) })
}

// deleteTrigger is DeleteTrigger in tx. A trigger a file owns is deleted only by an apply
// of that file (job.CheckOwner): the delete is rolled back.
func deleteTrigger(ctx context.Context, tx Tx, team, name string) error {
	var owner string
	err := tx.QueryRow(ctx, `DELETE FROM job_trigger WHERE team = $1 AND name = $2 RETURNING coalesce(managed_by, '')`, team, name).Scan(&owner)
	if err != nil {
		return rowError(err, trigger.NotFound(team, name), "delete trigger "+name)
	}
	return job.CheckOwner(ctx, "trigger", name, owner)
}

// triggerEventColumns are read by scanEvent from job_trigger_event e.
const triggerEventColumns = `e.id, e.received_at, e.status, e.source, e.duplicates, e.run, e.coalesced_into, e.message, e.arguments`

func scanEvent(row pgx.CollectableRow) (trigger.Event, error) {
	var e trigger.Event
	var status string
	err := row.Scan(&e.ID, &e.ReceivedAt, &status, &e.Source, &e.Duplicates, &e.Run, &e.CoalescedInto, &e.Message, &e.Arguments)
	e.Status = trigger.EventStatus(status)
	return e, err
}

// triggerEvents reads page (from 1) of size of the events of the trigger id of the last
// EventRetention, newest first.
func (s *Store) triggerEvents(ctx context.Context, id string, page, size int) ([]trigger.Event, error) {
	rows, _ := s.pool.Query(ctx, `SELECT `+triggerEventColumns+` FROM job_trigger_event e
WHERE e.trigger_id = $1::uuid AND e.received_at > now() - $2::interval ORDER BY e.received_at DESC, e.id DESC LIMIT $3 OFFSET $4`,
		id, EventRetention, size, (page-1)*size)
	out, err := pgx.CollectRows(rows, scanEvent)
	return out, rowError(err, nil, "read events of trigger "+id)
}

// ListTriggerEvents reads page (from 1) of size of the events of the trigger name of team
// of the last EventRetention, newest first, and how many there are.
func (s *Store) ListTriggerEvents(ctx context.Context, team, name string, page, size int) ([]trigger.Event, int, error) {
	var id string
	var total int
	err := s.pool.QueryRow(ctx, `SELECT t.id::text, (SELECT count(*) FROM job_trigger_event e WHERE e.trigger_id = t.id AND e.received_at > now() - $3::interval)
FROM job_trigger t WHERE t.team = $1 AND t.name = $2`, team, name, EventRetention).Scan(&id, &total)
	if err != nil {
		return nil, 0, rowError(err, trigger.NotFound(team, name), "read trigger "+name)
	}
	events, err := s.triggerEvents(ctx, id, page, size)
	return events, total, err
}

// SignedTriggerOf reads the webhook or object trigger id (not found: an outcome trigger,
// or none).
func (s *Store) SignedTriggerOf(ctx context.Context, id string) (trigger.Signed, error) {
	out := trigger.Signed{ID: id}
	var raw []byte
	err := s.pool.QueryRow(ctx, `SELECT team, spec, secret_key_id, secret_wrapped_key, secret_sealed FROM job_trigger
WHERE id = $1::uuid AND on_kind <> 'outcome'`, id).Scan(&out.Team, &raw, &out.Secret.KeyID, &out.Secret.WrappedKey, &out.Secret.Sealed)
	if err != nil {
		return out, rowError(err, trigger.UnknownInvocation(), "read trigger "+id)
	}
	return out, json.Unmarshal(raw, &out.Spec)
}

// AddTriggerEvents records the events of one signed call of the trigger id, in one
// transaction under the trigger's row lock, and wakes the firer. An event whose key the
// trigger has seen counts as a duplicate of the first and answers its result. The new ones
// must fit in the trigger's max_events_per_minute (trigger.RateLimited otherwise, nothing
// recorded).
func (s *Store) AddTriggerEvents(ctx context.Context, id string, events []trigger.NewEvent) ([]trigger.EventResult, error) {
	var out []trigger.EventResult
	err := s.InTx(ctx, func(tx Tx) error {
		out = make([]trigger.EventResult, 0, len(events))
		var name string
		var limit int
		err := tx.QueryRow(ctx, `SELECT name, max_events_per_minute FROM job_trigger WHERE id = $1::uuid FOR NO KEY UPDATE`, id).Scan(&name, &limit)
		if err != nil {
			return rowError(err, trigger.UnknownInvocation(), "lock trigger "+id)
		}
		var fresh []trigger.NewEvent
		for _, e := range events {
			r := trigger.EventResult{Duplicate: true}
			err := tx.QueryRow(ctx, `UPDATE job_trigger_event SET duplicates = duplicates + 1 WHERE trigger_id = $1::uuid AND dedup_key = $2
RETURNING id, run, coalesced_into`, id, e.Key).Scan(&r.EventID, &r.Run, &r.CoalescedInto)
			if err == nil {
				out = append(out, r)
				continue
			}
			if err = rowError(err, nil, "read event of trigger "+id); err != nil {
				return err
			}
			fresh = append(fresh, e)
		}
		if len(fresh) == 0 {
			return nil
		}
		if err := checkEventRate(ctx, tx, id, name, limit, len(fresh)); err != nil {
			return err
		}
		var p pipeline
		for _, e := range fresh {
			r := trigger.EventResult{}
			out = append(out, r)
			i := len(out) - 1
			p.queryRow(func(row pgx.Row) error {
				return wrote("insert event of trigger "+name, row.Scan(&out[i].EventID))
			}, `INSERT INTO job_trigger_event (trigger_id, dedup_key, source, arguments) VALUES ($1::uuid, $2, $3, $4) RETURNING id`,
				id, e.Key, e.Source, []byte(e.Arguments))
		}
		p.notify(TriggerEventsChannel, id)
		return p.send(ctx, tx)
	})
	return out, err
}

// checkEventRate refuses n more events of the trigger id (named name) when the last
// minute's and them would be over limit; Retry-After is when the oldest leaves the minute.
func checkEventRate(ctx context.Context, tx Tx, id, name string, limit, n int) error {
	var count int
	var retry float64
	err := tx.QueryRow(ctx, `SELECT count(*), COALESCE(EXTRACT(EPOCH FROM min(received_at) + interval '1 minute' - now()), 0)
FROM job_trigger_event WHERE trigger_id = $1::uuid AND received_at > now() - interval '1 minute'`, id).Scan(&count, &retry)
	if err != nil {
		return fmt.Errorf("count events of trigger %s: %w", name, err)
	}
	if count+n > limit {
		return trigger.NewRateLimited(name, limit, time.Duration(max(retry, 1)*float64(time.Second)))
	}
	return nil
}

// DeleteExpiredTriggerEvents deletes the events received longer ago than EventRetention
// that are no longer pending, while fence holds the lease; it returns how many.
func (s *Store) DeleteExpiredTriggerEvents(ctx context.Context, fence job.Fence) (int, error) {
	var n int
	err := s.InTx(ctx, func(tx Tx) error {
		if err := fenced(ctx, tx, fence, "delete expired trigger events"); err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, `DELETE FROM job_trigger_event WHERE received_at < now() - $1::interval AND status <> 'pending'`, EventRetention)
		n = int(tag.RowsAffected())
		return wrote("delete expired trigger events", err)
	})
	return n, err
}

// triggerRunKey is the text of a pipeline run's id as an event's run names it.
func triggerRunKey(id int64) string { return strconv.FormatInt(id, 10) }
