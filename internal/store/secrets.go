package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/secrets"
)

// TeamOAuthChannel is the NOTIFY channel of team OAuth credential changes (the payload is
// the team): the synchronizer writes the team's Kubernetes Secret.
const TeamOAuthChannel = "datajobs_team_oauth"

// JobSecrets returns the UID of the job name of team and the envelope of its secrets, nil
// when none were ever set.
func (s *Store) JobSecrets(ctx context.Context, team, name string) (string, *secrets.Envelope, error) {
	const q = `
SELECT j.uid::text, s.key_id, s.data_key, s.secrets
FROM data_job j LEFT JOIN job_secrets s ON s.job_uid = j.uid
WHERE j.name = $1 AND j.team = $2`
	var uid string
	var keyID *string
	var env secrets.Envelope
	err := s.pool.QueryRow(ctx, q, name, team).Scan(&uid, &keyID, &env.WrappedKey, &env.Sealed)
	if err != nil {
		return "", nil, rowError(err, job.JobNotFound(team, name), "get secrets of "+name)
	}
	if keyID == nil {
		return uid, nil, nil
	}
	env.KeyID = *keyID
	return uid, &env, nil
}

// ReplaceJobSecrets replaces the secrets of the job name of team with what seal returns,
// given the job's UID and its current envelope (nil when none): both under the job's row
// lock, so two replaces never interleave. Secrets do not affect the CronJob: no generation
// bump, no notification.
func (s *Store) ReplaceJobSecrets(ctx context.Context, team, name, by string, seal func(uid string, cur *secrets.Envelope) (secrets.Envelope, error)) error {
	return s.InTx(ctx, func(tx Tx) error {
		j, err := lockJob(ctx, tx, team, name)
		if err != nil {
			return err
		}
		cur, err := currentEnvelope(ctx, tx, `SELECT key_id, data_key, secrets FROM job_secrets WHERE job_uid = $1`, j.UID, "read secrets of "+name)
		if err != nil {
			return err
		}
		next, err := seal(j.UID, cur)
		if err != nil {
			return err
		}
		const q = `
INSERT INTO job_secrets (job_uid, key_id, data_key, secrets, updated_by) VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (job_uid) DO UPDATE SET key_id = excluded.key_id, data_key = excluded.data_key,
	secrets = excluded.secrets, updated_by = excluded.updated_by, updated_at = now()`
		if _, err := tx.Exec(ctx, q, j.UID, next.KeyID, next.WrappedKey, next.Sealed, by); err != nil {
			return writeError("set secrets of "+name, err)
		}
		return nil
	})
}

// currentEnvelope reads the envelope (key id, wrapped data key, sealed value) that q
// selects by key, under the lock the replace holds: the one its seal replaces, nil when
// there is none yet. A failure is that of op.
func currentEnvelope(ctx context.Context, tx Tx, q string, key any, op string) (*secrets.Envelope, error) {
	var env secrets.Envelope
	err := tx.QueryRow(ctx, q, key).Scan(&env.KeyID, &env.WrappedKey, &env.Sealed)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	return &env, nil
}

// envelopeTable is a table that holds envelopes: the owner's expression (as
// secrets.JobOwner and its kin make it), the row's key column, the columns of the key id,
// the wrapped data key and the sealed value. They are constants, never input: the only
// SQL here built with Sprintf, so that rotation and the start-up check are written once
// for all of them.
type envelopeTable struct{ table, owner, key, keyID, dataKey, sealed string }

var envelopeTables = []envelopeTable{
	{"job_secrets", `'job:' || job_uid::text`, "job_uid", "key_id", "data_key", "secrets"},
	{"team_oauth_credentials", `'team:' || team`, "team", "key_id", "data_key", "client_secret"},
	// A team webhook's secret written while no key ring was configured has key id '': it
	// is no envelope to check, and a rotation seals it.
	{"team_webhook", `'webhook:' || id::text`, "id", "secret_key_id", "secret_wrapped_key", "secret_sealed"},
	// A signed trigger's signing secret likewise (trigger.SecretOwner); an outcome
	// trigger has none (its sealed column is NULL).
	{"job_trigger", `'trigger:' || id::text`, "id", "secret_key_id", "secret_wrapped_key", "secret_sealed"},
}

// EnvelopeSamples returns one envelope of every keyring key id the database uses, so that
// the start-up can check that the keyring opens them all.
func (s *Store) EnvelopeSamples(ctx context.Context) ([]secrets.Owned, error) {
	var out []secrets.Owned
	for _, t := range envelopeTables {
		q := fmt.Sprintf(`SELECT DISTINCT ON (%[3]s) %[1]s, %[3]s, %[4]s, %[2]s FROM %[5]s WHERE %[3]s <> '' ORDER BY %[3]s`,
			t.owner, t.sealed, t.keyID, t.dataKey, t.table)
		rows, err := s.pool.Query(ctx, q)
		if err != nil {
			return nil, fmt.Errorf("read the key ids of %s: %w", t.table, err)
		}
		envs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (secrets.Owned, error) {
			var e secrets.Owned
			return e, r.Scan(&e.Owner, &e.KeyID, &e.WrappedKey, &e.Sealed)
		})
		if err != nil {
			return nil, fmt.Errorf("read the key ids of %s: %w", t.table, err)
		}
		out = append(out, envs...)
	}
	return out, nil
}

// RetireKeys retires the keyring keys ids before a rotation re-wraps (issue 41, L7): from
// its commit on, no replica stores a data key newly wrapped under one of them (migration
// 0041's trigger). The statement first takes the envelope tables in SHARE mode, which
// waits for the writes in flight, so the rotation's pass that follows sees every
// envelope under an old key there will ever be. newest is never retired (a key retired
// once and made the newest again is not).
func (s *Store) RetireKeys(ctx context.Context, ids []string, newest string) error {
	err := s.InTx(ctx, func(tx Tx) error {
		if _, err := tx.Exec(ctx, `LOCK TABLE job_secrets, team_oauth_credentials, team_webhook, job_trigger IN SHARE MODE`); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `WITH back AS (DELETE FROM secrets_retired_key WHERE key_id = $2)
INSERT INTO secrets_retired_key (key_id) SELECT unnest($1::text[]) EXCEPT SELECT $2
ON CONFLICT (key_id) DO NOTHING`, ids, newest)
		return err
	})
	if err != nil {
		return translate(fmt.Errorf("retire secrets keys: %w", err))
	}
	return nil
}

// RewrapEnvelopes gives every envelope whose key id is not newest to rewrap, one row per
// transaction under the row's lock (a concurrent replace waits for it, and the API stays
// up), and stores what rewrap returns (a new wrapped data key; for a webhook's or
// trigger's secret stored open, key id "", its first envelope). A row with no sealed
// value (an outcome trigger) has nothing to wrap. It returns how many it rewrapped.
func (s *Store) RewrapEnvelopes(ctx context.Context, newest string, rewrap func(secrets.Owned) (secrets.Envelope, error)) (int, error) {
	n := 0
	for _, t := range envelopeTables {
		rows, err := s.pool.Query(ctx, fmt.Sprintf(`SELECT %s::text FROM %s WHERE %s <> $1 AND %s IS NOT NULL`, t.key, t.table, t.keyID, t.sealed), newest)
		if err != nil {
			return n, translate(fmt.Errorf("list the data keys of %s: %w", t.table, err))
		}
		keys, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return n, translate(fmt.Errorf("list the data keys of %s: %w", t.table, err))
		}
		for _, key := range keys {
			done, err := s.rewrapOne(ctx, t, key, newest, rewrap)
			if err != nil {
				return n, err
			}
			if done {
				n++
			}
		}
	}
	return n, nil
}

func (s *Store) rewrapOne(ctx context.Context, t envelopeTable, key, newest string, rewrap func(secrets.Owned) (secrets.Envelope, error)) (bool, error) {
	done := false
	err := s.InTx(ctx, func(tx Tx) error {
		var e secrets.Owned
		q := fmt.Sprintf(`SELECT %s, %s, coalesce(%s, ''), %s FROM %s WHERE %s = $1 AND %s <> $2 FOR UPDATE`,
			t.owner, t.keyID, t.dataKey, t.sealed, t.table, t.key, t.keyID)
		err := tx.QueryRow(ctx, q, key, newest).Scan(&e.Owner, &e.KeyID, &e.WrappedKey, &e.Sealed)
		if errors.Is(err, pgx.ErrNoRows) { // deleted, or rewrapped by another writer since
			return nil
		}
		if err != nil {
			return fmt.Errorf("read a data key of %s: %w", t.table, err)
		}
		next, err := rewrap(e)
		if err != nil {
			return fmt.Errorf("%s %s: %w", t.table, e.Owner, err)
		}
		q = fmt.Sprintf(`UPDATE %s SET %s = $2, %s = $3, %s = $4 WHERE %s = $1`, t.table, t.keyID, t.dataKey, t.sealed, t.key)
		if _, err := tx.Exec(ctx, q, key, next.KeyID, next.WrappedKey, next.Sealed); err != nil {
			return fmt.Errorf("write a data key of %s: %w", t.table, err)
		}
		done = true
		return nil
	})
	return done, err
}
