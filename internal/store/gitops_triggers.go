package store

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/datajobs/datajobs/internal/gitops"
	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/secrets"
	"github.com/datajobs/datajobs/internal/trigger"
)

// Triggers in a team's file (issue 46): an apply creates, updates and deletes them in its
// transaction, as it does jobs and pipelines.

// teamTriggers reads team's triggers in tx, by name, with the files that own them.
func teamTriggers(ctx context.Context, tx Tx, team string) ([]gitops.TriggerState, error) {
	rows, _ := tx.Query(ctx, `SELECT `+triggerColumns+`, coalesce(t.managed_by, '') FROM job_trigger t WHERE t.team = $1 ORDER BY t.name`, team)
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (gitops.TriggerState, error) {
		var ts gitops.TriggerState
		var raw []byte
		t := &ts.Trigger
		if err := row.Scan(&t.ID, &t.Team, &raw, &t.CreatedBy, &t.CreatedAt, &ts.ManagedBy); err != nil {
			return ts, err
		}
		return ts, json.Unmarshal(raw, &t.Spec)
	})
	if err != nil {
		return nil, translate(fmt.Errorf("read the triggers of team %s: %w", team, err))
	}
	return out, nil
}

// CreateTrigger is Store.CreateTrigger of spec in the team's transaction, by the actor of
// ctx: a webhook or object trigger gets a new signing secret, sealed by the transaction's
// seal and returned open.
func (t *TeamTx) CreateTrigger(ctx context.Context, spec trigger.Spec) (trigger.Trigger, error) {
	t.tx.writing(gitops.KindTrigger, spec.Name)
	var secret []byte
	if spec.Signed() {
		secret = trigger.NewSecret()
	}
	out, err := createTrigger(ctx, t.tx, t.team, spec, job.ActorFrom(ctx).User, func(id string) (secrets.Envelope, error) {
		return t.seal(gitops.KindTrigger, id, secret)
	})
	out.Secret = secret
	return out, err
}

// UpdateTrigger changes the trigger id of the team to spec (its references checked as a
// create checks them), keeping its id, its signing secret and its events.
func (t *TeamTx) UpdateTrigger(ctx context.Context, id string, spec trigger.Spec) error {
	t.tx.writing(gitops.KindTrigger, spec.Name)
	if err := checkTriggerRefs(ctx, t.tx, t.team, spec); err != nil {
		return err
	}
	raw, err := json.Marshal(spec)
	if err != nil {
		return fmt.Errorf("encode trigger %s: %w", spec.Name, err)
	}
	o := spec.On
	_, err = t.tx.Exec(ctx, `UPDATE job_trigger SET name = $3, spec = $4, target_job = $5, target_pipeline = $6,
	on_kind = $7, on_team = $8, on_job = $9, on_pipeline = $10, on_statuses = $11, max_events_per_minute = $12
WHERE id = $1::uuid AND team = $2`, id, t.team, spec.Name, raw, spec.Target.JobName, spec.Target.PipelineName,
		o.Kind, o.Team, o.JobName, o.PipelineName, append([]string{}, o.Statuses...), spec.MaxEventsPerMinute)
	return wrote("update trigger "+spec.Name, err)
}

// DeleteTrigger is Store.DeleteTrigger in the team's transaction.
func (t *TeamTx) DeleteTrigger(ctx context.Context, name string) error {
	t.tx.writing(gitops.KindTrigger, name)
	return deleteTrigger(ctx, t.tx, t.team, name)
}
