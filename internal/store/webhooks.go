package store

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/secrets"
)

// Teams' notification webhooks (migration 0017). Every read and write names the team: an
// id of another team's webhook is not found, the same as an id nobody has. Ids are UUIDs:
// callers check an id's form first (job.ValidWebhookID), so a malformed one is not found
// without asking the database. The secret is stored as the service sealed it (an envelope
// of internal/secrets, bound to the webhook's id): the store never sees it open.

const webhookColumns = `id::text, team, name, url, format, events, secret_key_id, secret_wrapped_key, secret_sealed,
	created_by, created_at, updated_by, updated_at, coalesce(managed_by, '')`

func scanWebhook(row pgx.Row) (job.TeamWebhook, error) {
	var w job.TeamWebhook
	err := row.Scan(&w.ID, &w.Team, &w.Name, &w.URL, &w.Format, &w.Events, &w.SecretKeyID, &w.SecretWrappedKey, &w.Secret,
		&w.CreatedBy, &w.CreatedAt, &w.UpdatedBy, &w.UpdatedAt, &w.ManagedBy)
	return w, err
}

// CreateTeamWebhook stores a new webhook of w.Team (w.CreatedBy making it) with the
// secret seal returns for its new id, and returns it. A name the team has already is a
// conflict, and so is a team with job.MaxTeamWebhooks webhooks.
func (s *Store) CreateTeamWebhook(ctx context.Context, w job.TeamWebhook, seal func(id string) (secrets.Envelope, error)) (job.TeamWebhook, error) {
	var out job.TeamWebhook
	err := s.InTx(ctx, func(tx Tx) (err error) {
		out, err = createWebhook(ctx, tx, w, seal)
		return err
	})
	return out, err
}

// createWebhook is CreateTeamWebhook in tx.
func createWebhook(ctx context.Context, tx Tx, w job.TeamWebhook, seal func(id string) (secrets.Envelope, error)) (job.TeamWebhook, error) {
	over, err := overQuota(ctx, tx, w.Team, job.MaxTeamWebhooks, `SELECT count(*) + 1 FROM team_webhook WHERE team = $1`)
	if err != nil {
		return job.TeamWebhook{}, translate(err)
	}
	if over {
		return job.TeamWebhook{}, job.TeamWebhooksQuota(w.Team)
	}
	var id string
	if err := tx.QueryRow(ctx, `SELECT gen_random_uuid()::text`).Scan(&id); err != nil {
		return job.TeamWebhook{}, translate(err)
	}
	env, err := seal(id)
	if err != nil {
		return job.TeamWebhook{}, err
	}
	out, err := scanWebhook(tx.QueryRow(ctx, `
INSERT INTO team_webhook (id, team, name, url, format, events, secret_key_id, secret_wrapped_key, secret_sealed, created_by, updated_by)
VALUES ($1::uuid, $2, $3, $4, $5, $6, $7, $8, $9, $10, $10)
RETURNING `+webhookColumns, id, w.Team, w.Name, w.URL, w.Format, w.Events, env.KeyID, env.WrappedKey, env.Sealed, w.CreatedBy))
	if sqlState(err) == "23505" { // unique violation
		return job.TeamWebhook{}, job.WebhookNameTaken(w.Team, w.Name)
	}
	if err != nil {
		return job.TeamWebhook{}, writeError(fmt.Sprintf("create webhook %s of team %s", w.Name, w.Team), err)
	}
	return out, nil
}

// TeamWebhooks returns team's webhooks, secrets included, by name: what the dispatcher
// sends a team's events to, and what the API lists (without the secrets).
func (s *Store) TeamWebhooks(ctx context.Context, team string) ([]job.TeamWebhook, error) {
	rows, _ := s.pool.Query(ctx, `SELECT `+webhookColumns+` FROM team_webhook WHERE team = $1 ORDER BY name`, team)
	return collect(rows, scanWebhook, "list webhooks of team "+team)
}

// TeamWebhook returns one of team's webhooks, or job.WebhookNotFound.
func (s *Store) TeamWebhook(ctx context.Context, team, id string) (job.TeamWebhook, error) {
	w, err := scanWebhook(s.pool.QueryRow(ctx, `SELECT `+webhookColumns+` FROM team_webhook
		WHERE team = $1 AND id = $2::uuid`, team, id))
	return w, rowError(err, job.WebhookNotFound(team, id), "read webhook "+id)
}

// UpdateTeamWebhook changes the fields ch gives of one of team's webhooks (by making the
// change) and, when secret is not nil, its sealed secret: in one statement, so two changes
// of different fields both hold. An unknown id is job.WebhookNotFound; a webhook a file
// owns changes only by an apply of that file (job.CheckOwner).
func (s *Store) UpdateTeamWebhook(ctx context.Context, team, id, by string, ch job.TeamWebhookChange, secret *secrets.Envelope) (job.TeamWebhook, error) {
	var sealed, wrapped []byte
	var keyID *string
	if secret != nil {
		sealed, wrapped, keyID = secret.Sealed, secret.WrappedKey, &secret.KeyID
	}
	var events []string
	if ch.Events != nil {
		events = *ch.Events
	}
	var name string
	if ch.Name != nil {
		name = *ch.Name
	}
	var out job.TeamWebhook
	err := s.InTx(ctx, func(tx Tx) error {
		if err := checkWebhookOwner(ctx, tx, team, id, `SELECT name, coalesce(managed_by, '') FROM team_webhook
WHERE team = $1 AND id = $2::uuid FOR UPDATE`); err != nil {
			return err
		}
		var err error
		out, err = scanWebhook(tx.QueryRow(ctx, `
UPDATE team_webhook SET name = coalesce($3, name), url = coalesce($4, url), format = coalesce($5, format),
	events = coalesce($6, events), secret_sealed = coalesce($7, secret_sealed),
	secret_key_id = coalesce($9, secret_key_id),
	secret_wrapped_key = CASE WHEN $7::bytea IS NULL THEN secret_wrapped_key ELSE $10 END,
	updated_by = $8, updated_at = now()
WHERE team = $1 AND id = $2::uuid
RETURNING `+webhookColumns, team, id, ch.Name, ch.URL, ch.Format, events, sealed, by, keyID, wrapped))
		if sqlState(err) == "23505" { // unique violation
			return job.WebhookNameTaken(team, name)
		}
		if err != nil && sqlState(err) != "" {
			return writeError("update webhook "+id, err)
		}
		return rowError(err, job.WebhookNotFound(team, id), "update webhook "+id)
	})
	return out, err
}

// DeleteTeamWebhook deletes one of team's webhooks, or answers job.WebhookNotFound. A
// webhook a file owns is deleted only by an apply of that file: the delete is rolled back.
func (s *Store) DeleteTeamWebhook(ctx context.Context, team, id string) error {
	return s.InTx(ctx, func(tx Tx) error {
		return checkWebhookOwner(ctx, tx, team, id, `DELETE FROM team_webhook WHERE team = $1 AND id = $2::uuid
RETURNING name, coalesce(managed_by, '')`)
	})
}

// checkWebhookOwner runs query (locking or deleting the webhook id of team, returning its
// name and owner) and refuses the change of a webhook a file owns (job.CheckOwner).
func checkWebhookOwner(ctx context.Context, tx Tx, team, id, query string) error {
	var name, owner string
	err := tx.QueryRow(ctx, query, team, id).Scan(&name, &owner)
	if err := rowError(err, job.WebhookNotFound(team, id), "lock webhook "+id); err != nil {
		return err
	}
	return job.CheckOwner(ctx, "webhook", name, owner)
}
