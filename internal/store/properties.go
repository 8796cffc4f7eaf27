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
// object. Properties do not affect the CronJob: no generation bump, no notification.
// They are deleted with their job (cascade), so a re-created job starts without any.
func (s *Store) SetProperties(ctx context.Context, team, name string, props []byte) error {
	const q = `
INSERT INTO job_properties (job_name, properties_json)
SELECT j.name, $3::jsonb FROM data_job j WHERE j.name = $1 AND j.team = $2
ON CONFLICT (job_name) DO UPDATE SET properties_json = excluded.properties_json`
	tag, err := s.pool.Exec(ctx, q, name, team, string(props))
	if sqlState(err) == "23503" { // a foreign key violation: the job was deleted meanwhile
		return job.JobNotFound(team, name)
	}
	if err != nil {
		return writeError(fmt.Sprintf("set properties of %s", name), err)
	}
	if tag.RowsAffected() == 0 {
		return job.JobNotFound(team, name)
	}
	return nil
}
