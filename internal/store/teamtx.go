package store

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/datajobs/datajobs/internal/gitops"
	"github.com/datajobs/datajobs/internal/job"
	pl "github.com/datajobs/datajobs/internal/pipeline"
	"github.com/datajobs/datajobs/internal/secrets"
	"github.com/datajobs/datajobs/internal/trigger"
)

// Jobs as code (issue 46): an apply writes many of a team's objects in one transaction,
// through the API's own writes (createJob, updateJobIn, changeDeploymentIn, ...) on state
// it read once, under the locks of every object of the team.

// TeamTx is one transaction writing the objects of one team: the writes of the API, each
// on the state InTeamTx read and locked.
type TeamTx struct {
	s    *Store
	tx   *queuedTx
	team string
	// seal seals the signing secret of a new trigger or webhook (kind) id (the service's
	// key ring).
	seal func(kind, id string, secret []byte) (secrets.Envelope, error)
	// marked are the jobs this transaction created or bumped, by name: their deployment's
	// write adds no row version of its own (the COMMIT ran data_job's deferred triggers
	// once per version: three a created job, two a changed one).
	marked map[string]marked
}

// InTeamTx runs fn in one transaction on team's state, read once the team (its advisory
// lock, which the quota checks take too), its jobs (in name order, as writers of several
// jobs lock them), its pipelines, its triggers and its webhooks are locked: nothing of the
// team changes under fn. seal seals the signing secrets of the triggers and webhooks (kind)
// fn creates.
func (s *Store) InTeamTx(ctx context.Context, team string, seal func(kind, id string, secret []byte) (secrets.Envelope, error), fn func(w gitops.Writer, st gitops.State) error) error {
	return s.InTx(ctx, func(tx Tx) error {
		if err := lockTeam(ctx, tx, team); err != nil {
			return err
		}
		// The locks are statements of their own: a locking statement that waited re-reads
		// only its locked rows, not those it joins (see lockState).
		const locks = `SELECT (SELECT count(*) FROM (SELECT 1 FROM data_job WHERE team = $1 ORDER BY name FOR UPDATE) j),
	(SELECT count(*) FROM (SELECT 1 FROM pipeline WHERE team = $1 ORDER BY name FOR UPDATE) p),
	(SELECT count(*) FROM (SELECT 1 FROM job_trigger WHERE team = $1 ORDER BY name FOR UPDATE) t),
	(SELECT count(*) FROM (SELECT 1 FROM team_webhook WHERE team = $1 ORDER BY name FOR UPDATE) w)`
		var jobs, pipes, trigs, hooks int
		if err := tx.QueryRow(ctx, locks, team).Scan(&jobs, &pipes, &trigs, &hooks); err != nil {
			return translate(fmt.Errorf("lock the objects of team %s: %w", team, err))
		}
		st, err := teamState(ctx, tx, team)
		if err != nil {
			return err
		}
		qt := &queuedTx{Tx: tx}
		if err := fn(&TeamTx{s: s, tx: qt, team: team, seal: seal, marked: map[string]marked{}}, st); err != nil {
			return err
		}
		return qt.flush(ctx, nil)
	})
}

// TeamState reads team's jobs (with their deployments), pipelines, triggers and webhooks,
// in one snapshot and without a lock: what a dry run plans from.
func (s *Store) TeamState(ctx context.Context, team string) (gitops.State, error) {
	var st gitops.State
	opts := pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}
	err := pgx.BeginTxFunc(ctx, s.pool, opts, func(tx pgx.Tx) (err error) {
		st, err = teamState(ctx, tx, team)
		return err
	})
	return st, translate(err)
}

// teamState reads team's jobs, pipelines, triggers and webhooks in tx, by name.
func teamState(ctx context.Context, tx Tx, team string) (gitops.State, error) {
	q := `SELECT ` + jobColumns + `, ` + joinedDesiredColumns + `, ` + joinedActualColumns + `
FROM data_job j
LEFT JOIN desired_data_job_deployment d ON d.data_job_name = j.name
LEFT JOIN actual_data_job_deployment a ON a.data_job_name = j.name AND a.job_uid = j.uid
WHERE j.team = $1 ORDER BY j.name`
	rows, _ := tx.Query(ctx, q, team)
	jobs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (job.JobState, error) {
		var st job.JobState
		var r joined
		err := row.Scan(append(append(jobDest(&st.Job), r.desiredDest()...), r.actualDest()...)...)
		st.Desired, st.Actual = r.deployment(st.Job), r.actual(st.Job)
		return st, err
	})
	if err != nil {
		return gitops.State{}, translate(fmt.Errorf("read the jobs of team %s: %w", team, err))
	}
	rows, _ = tx.Query(ctx, `SELECT `+pipelineColumns+pipelineFrom+` WHERE p.team = $1 ORDER BY p.name`, team)
	pipes, err := pgx.CollectRows(rows, scanPipeline)
	if err != nil {
		return gitops.State{}, translate(fmt.Errorf("read the pipelines of team %s: %w", team, err))
	}
	trigs, err := teamTriggers(ctx, tx, team)
	if err != nil {
		return gitops.State{}, err
	}
	hooks, err := teamWebhooks(ctx, tx, team)
	return gitops.State{Jobs: jobs, Pipelines: pipes, Triggers: trigs, Webhooks: hooks}, err
}

// CreateJob is Store.CreateJob in the team's transaction, owned by the apply's file
// (insertJob).
func (t *TeamTx) CreateJob(ctx context.Context, j job.Job) (job.Job, error) {
	t.tx.writing(gitops.KindJob, j.Name)
	out, err := t.s.createJob(ctx, t.tx, j)
	t.marked[j.Name] = newRow
	return out, err
}

// UpdateJob is Store.UpdateJob of the job of st to next, in the team's transaction, owned
// by the apply's file (updateJob).
func (t *TeamTx) UpdateJob(ctx context.Context, st job.JobState, next job.Job) (job.Job, error) {
	t.tx.writing(gitops.KindJob, st.Job.Name)
	bump := !st.Job.SameConfig(next)
	if bump {
		t.marked[st.Job.Name] = bumpedRow
	}
	return t.s.updateJobIn(ctx, t.tx, st, func(job.Job) (job.Job, bool, error) { return next, bump, nil })
}

// ChangeDeployment is Store.ChangeDeployment of the job of st to d, in the team's
// transaction: the generation bumped once for the job's write and its deployment's.
func (t *TeamTx) ChangeDeployment(ctx context.Context, st job.JobState, d job.Deployment) (job.Deployment, error) {
	t.tx.writing(gitops.KindJob, st.Job.Name)
	return changeDeploymentIn(ctx, t.tx, st, func(context.Context, Tx, job.JobState) (job.Deployment, int, error) {
		return d, 0, nil
	}, t.marked[st.Job.Name])
}

// DeleteDeployment is Store.DeleteDeployment of the job of st, in the team's transaction.
func (t *TeamTx) DeleteDeployment(ctx context.Context, st job.JobState) error {
	t.tx.writing(gitops.KindJob, st.Job.Name)
	return deleteDeployment(ctx, t.tx, st)
}

// DeleteJob is Store.DeleteJob in the team's transaction.
func (t *TeamTx) DeleteJob(ctx context.Context, name string) error {
	t.tx.writing(gitops.KindJob, name)
	return deleteJob(ctx, t.tx, t.team, name)
}

// PutPipeline is Store.PutPipeline in the team's transaction, by the actor of ctx.
func (t *TeamTx) PutPipeline(ctx context.Context, name string, spec pl.Spec) error {
	t.tx.writing(gitops.KindPipeline, name)
	raw, err := json.Marshal(spec)
	if err != nil {
		return fmt.Errorf("encode pipeline %s: %w", name, err)
	}
	a := job.ActorFrom(ctx)
	_, err = putPipeline(ctx, t.tx, t.team, name, spec, raw, a.User, a.OpID)
	return err
}

// DeletePipeline is Store.DeletePipeline in the team's transaction.
func (t *TeamTx) DeletePipeline(ctx context.Context, name string) error {
	t.tx.writing(gitops.KindPipeline, name)
	return deletePipeline(ctx, t.tx, t.team, name)
}

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

// Notification webhooks in a team's file (issue 46): an apply creates, updates and deletes
// them in its transaction, as it does its jobs, pipelines and triggers.

// teamWebhooks reads team's webhooks in tx, by name, with the files that own them.
func teamWebhooks(ctx context.Context, tx Tx, team string) ([]job.TeamWebhook, error) {
	rows, _ := tx.Query(ctx, `SELECT `+webhookColumns+` FROM team_webhook WHERE team = $1 ORDER BY name`, team)
	return collect(rows, scanWebhook, "read the webhooks of team "+team)
}

// CreateWebhook is Store.CreateTeamWebhook of w in the team's transaction, by the actor of
// ctx, with secret sealed by the transaction's seal (returned open).
func (t *TeamTx) CreateWebhook(ctx context.Context, w gitops.Webhook, secret []byte) (job.TeamWebhook, error) {
	t.tx.writing(gitops.KindWebhook, w.Name)
	hook := job.TeamWebhook{Team: t.team, Name: w.Name, URL: w.URL, Format: w.Format, Events: w.Events, CreatedBy: job.ActorFrom(ctx).User}
	out, err := createWebhook(ctx, t.tx, hook, func(id string) (secrets.Envelope, error) {
		return t.seal(gitops.KindWebhook, id, secret)
	})
	out.Secret, out.SecretWrappedKey = secret, nil
	return out, err
}

// UpdateWebhook changes the webhook id of the team to w, keeping its id and its secret.
func (t *TeamTx) UpdateWebhook(ctx context.Context, id string, w gitops.Webhook) error {
	t.tx.writing(gitops.KindWebhook, w.Name)
	_, err := t.tx.Exec(ctx, `UPDATE team_webhook SET url = $3, format = $4, events = $5, updated_by = $6, updated_at = now()
WHERE team = $1 AND id = $2::uuid`, t.team, id, w.URL, w.Format, w.Events, job.ActorFrom(ctx).User)
	return wrote("update webhook "+w.Name, err)
}

// DeleteWebhook deletes the team's webhook name in the team's transaction.
func (t *TeamTx) DeleteWebhook(ctx context.Context, name string) error {
	t.tx.writing(gitops.KindWebhook, name)
	_, err := t.tx.Exec(ctx, `DELETE FROM team_webhook WHERE team = $1 AND name = $2`, t.team, name)
	return wrote("delete webhook "+name, err)
}

// Own records owner as the file that owns the team's objects of kind (gitops.KindJob,
// KindPipeline, KindTrigger or KindWebhook) named names. A row it owns already is not
// written again: an apply that changed 1,000 owned jobs wrote a new version of each (the
// statement took 0.5-0.9 s at load 27-36), each firing data_job's deferred triggers at
// commit.
func (t *TeamTx) Own(ctx context.Context, kind string, names []string, owner string) error {
	if len(names) == 0 {
		return nil
	}
	_, err := t.tx.Exec(ctx, `UPDATE `+ownedTable(kind)+` SET managed_by = $3
WHERE team = $1 AND name = ANY($2::text[]) AND managed_by IS DISTINCT FROM $3`, t.team, names, owner)
	return wrote("record the owner of the "+kind+"s of team "+t.team, err)
}

// Flush sends the writes still queued (queuedTx).
func (t *TeamTx) Flush(ctx context.Context) error { return t.tx.flush(ctx, nil) }

// ReleaseFromFile releases team's objects named, by kind (gitops.KindJob, ...; a kind
// absent: all of that kind; an empty list: none), from the files that own them, so that
// the API changes them again; it returns how many it released.
func (s *Store) ReleaseFromFile(ctx context.Context, team string, names map[string][]string) (int64, error) {
	var n int64
	err := s.InTx(ctx, func(tx Tx) error {
		for _, kind := range []string{gitops.KindJob, gitops.KindPipeline, gitops.KindTrigger, gitops.KindWebhook} {
			tag, err := tx.Exec(ctx, `UPDATE `+ownedTable(kind)+` SET managed_by = NULL
WHERE team = $1 AND managed_by IS NOT NULL AND ($2::text[] IS NULL OR name = ANY($2::text[]))`, team, names[kind])
			if err != nil {
				return translate(fmt.Errorf("release the %ss of team %s: %w", kind, team, err))
			}
			n += tag.RowsAffected()
		}
		return nil
	})
	return n, err
}

// ownedTable is the table of the objects of kind.
func ownedTable(kind string) string {
	switch kind {
	case gitops.KindPipeline:
		return "pipeline"
	case gitops.KindTrigger:
		return "job_trigger"
	case gitops.KindWebhook:
		return "team_webhook"
	}
	return "data_job"
}
