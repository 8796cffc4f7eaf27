package store

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/datajobs/datajobs/internal/gitops"
	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/secrets"
)

// Notification webhooks in a team's file (issue 46): an apply creates, updates and deletes
// them in its transaction, as it does its jobs, pipelines and triggers.

// teamWebhooks reads team's webhooks in tx, by name, with the files that own them.
func teamWebhooks(ctx context.Context, tx Tx, team string) ([]job.TeamWebhook, error) {
	rows, _ := tx.Query(ctx, `SELECT `+webhookColumns+` FROM team_webhook WHERE team = $1 ORDER BY name`, team)
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (job.TeamWebhook, error) { return scanWebhook(r) })
	if err != nil {
		return nil, translate(fmt.Errorf("read the webhooks of team %s: %w", team, err))
	}
	return out, nil
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
