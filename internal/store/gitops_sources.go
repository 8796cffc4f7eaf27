package store

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/datajobs/datajobs/internal/job"
)

// SourcesPolicies is SourcesPolicy of many jobs of team at once, versions[name] the
// version of the job name: the run policy of each version's config.ini, by job name (a job
// without sources of that version, or whose config.ini sets none, is absent). A version
// the job has not but the team has staged (StageSources) is read from the staged one: the
// apply moves it to the job. An apply reads its file's versions with it in one statement,
// not one a job.
func (s *Store) SourcesPolicies(ctx context.Context, team string, versions map[string]string) (map[string]job.PolicyChange, error) {
	names, shas := make([]string, 0, len(versions)), make([]string, 0, len(versions))
	for n, v := range versions {
		names, shas = append(names, n), append(shas, v)
	}
	rows, _ := s.pool.Query(ctx, `
SELECT w.name, p.run_policy FROM unnest($2::text[], $3::text[]) AS w(name, version)
CROSS JOIN LATERAL (
	SELECT s.run_policy FROM data_job_source s JOIN data_job j ON j.name = s.job_name
	WHERE s.job_name = w.name AND j.team = $1 AND s.version_sha = w.version AND s.run_policy IS NOT NULL
	UNION ALL
	SELECT run_policy FROM staged_source WHERE team = $1 AND version_sha = w.version AND run_policy IS NOT NULL
	LIMIT 1) p`, team, names, shas)
	out := map[string]job.PolicyChange{}
	var name string
	var raw []byte
	_, err := pgx.ForEachRow(rows, []any{&name, &raw}, func() error {
		var c job.PolicyChange
		if err := json.Unmarshal(raw, &c); err != nil {
			return fmt.Errorf("decode run policy of %s sources %s: %w", name, versions[name], err)
		}
		out[name] = c
		return nil
	})
	if err != nil {
		return nil, translate(fmt.Errorf("read run policies of the sources of team %s: %w", team, err))
	}
	return out, nil
}
