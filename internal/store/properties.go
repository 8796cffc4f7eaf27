package store

import (
	"context"
	"fmt"

	"github.com/datajobs/datajobs/internal/job"
)

// GetProperties returns the properties of the job name of team as a JSON object, `{}`
// when none were ever set. Unlike VDK, a missing job (or one of another team) is not found.
func (s *Store) GetProperties(ctx context.Context, team, name string) ([]byte, error) {
	const q = `
SELECT COALESCE(p.properties_json, '{}'::jsonb)::text
FROM data_job j LEFT JOIN job_properties p ON p.job_name = j.name
WHERE j.name = $1 AND j.team = $2`
	var props string
	err := s.pool.QueryRow(ctx, q, name, team).Scan(&props)
	return []byte(props), rowError(err, job.JobNotFound(team, name), "get properties of "+name)
}

// SetProperties replaces the properties of the job name of team with props, a JSON
// object, once check accepted the current ones (an If-Match precondition): both under the
// job's row lock, so no write comes between the check and the replace. Properties do not
// affect the CronJob: no generation bump, no notification. They are deleted with their
// job (cascade), so a re-created job starts without any.
func (s *Store) SetProperties(ctx context.Context, team, name string, props []byte, check func(cur []byte) error) error {
	return s.InTx(ctx, func(tx Tx) error {
		if _, err := lockJob(ctx, tx, team, name); err != nil {
			return err
		}
		var cur string
		err := tx.QueryRow(ctx, `SELECT COALESCE((SELECT properties_json::text FROM job_properties WHERE job_name = $1), '{}')`, name).Scan(&cur)
		if err != nil {
			return fmt.Errorf("read properties of %s: %w", name, err)
		}
		if err := check([]byte(cur)); err != nil {
			return err
		}
		const q = `
INSERT INTO job_properties (job_name, properties_json) VALUES ($1, $2::jsonb)
ON CONFLICT (job_name) DO UPDATE SET properties_json = excluded.properties_json`
		if _, err := tx.Exec(ctx, q, name, string(props)); err != nil {
			return writeError(fmt.Sprintf("set properties of %s", name), err)
		}
		return nil
	})
}
