package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/datajobs/datajobs/internal/job"
)

// Sources staged for an apply (issue 46; migration 0067): uploaded to a team before the
// apply that deploys them, so that the apply alone creates and changes jobs, and moved to
// the jobs' sources by that apply's transaction.

// StageSources stores src as sources staged for team. The same content staged again keeps
// its archive and restarts its time (DeleteExpiredStagedSources). Staged sources count in
// the team's sources quota: a staging that would take the team over it is refused.
func (s *Store) StageSources(ctx context.Context, team string, src job.Sources) error {
	policy, err := policyJSON(src.ConfigPolicy)
	if err != nil {
		return err
	}
	return s.InTx(ctx, func(tx Tx) error {
		// xmax is 0 in a row the statement inserted, not in one it updated.
		var added bool
		err := tx.QueryRow(ctx, `
INSERT INTO staged_source (team, version_sha, archive, size_bytes, reason, uploaded_by, uploaded_at, run_policy)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
ON CONFLICT (team, version_sha) DO UPDATE SET reason = excluded.reason, uploaded_by = excluded.uploaded_by,
	uploaded_at = excluded.uploaded_at, run_policy = excluded.run_policy
RETURNING xmax = 0`, team, src.Version, src.Archive, len(src.Archive), src.Reason, src.UploadedBy, src.UploadedAt, policy).Scan(&added)
		if err != nil {
			return writeError("stage sources of team "+team, err)
		}
		if !added {
			return nil // no byte more than before
		}
		return s.checkSourcesQuota(ctx, tx, team)
	})
}

// BindSources makes the sources staged for the team of the versions, by job name, the
// jobs' latest, as their upload would (SaveSources: an upload of known content makes it
// the latest again; the keep latest versions are kept, and the deployed one), and deletes
// them from the staged ones. A version not staged is left alone (a job that has it, or a
// prebuilt image's), unless its job is one of sourced (the file's source folders, by job
// name): those BindSources returns, in name order, when their version is neither staged
// nor the job's sources already (the staging expired, or never was). One statement for
// every job, then one pruning those it bound.
func (t *TeamTx) BindSources(ctx context.Context, versions, sourced map[string]string, keep int) ([]string, error) {
	if len(versions) == 0 {
		return nil, nil
	}
	names, shas, required := make([]string, 0, len(versions)), make([]string, 0, len(versions)), make([]bool, 0, len(versions))
	for n, v := range versions {
		_, ok := sourced[n]
		names, shas, required = append(names, n), append(shas, v), append(required, ok)
	}
	// The CTEs read one snapshot: the staged rows are moved to every job that names
	// them, then deleted; a required version without a staged row is missing unless the
	// job had it before (the insert's rows are not in that snapshot).
	rows, _ := t.tx.Query(ctx, `
WITH w AS (SELECT * FROM unnest($2::text[], $3::text[], $4::bool[]) AS w(name, version, required)),
moved AS (
	INSERT INTO data_job_source (job_name, version_sha, archive, size_bytes, reason, uploaded_by, uploaded_at, run_policy)
	SELECT w.name, s.version_sha, s.archive, s.size_bytes, s.reason, s.uploaded_by, s.uploaded_at, s.run_policy
	FROM w JOIN staged_source s ON s.team = $1 AND s.version_sha = w.version
	ON CONFLICT (job_name, version_sha) DO UPDATE SET upload_seq = nextval('data_job_source_upload_seq'),
		reason = excluded.reason, uploaded_by = excluded.uploaded_by, uploaded_at = excluded.uploaded_at, run_policy = excluded.run_policy
	RETURNING job_name),
gone AS (DELETE FROM staged_source s USING w WHERE s.team = $1 AND s.version_sha = w.version)
SELECT job_name, true FROM moved
UNION ALL
SELECT w.name, false FROM w WHERE w.required
	AND NOT EXISTS (SELECT 1 FROM staged_source s WHERE s.team = $1 AND s.version_sha = w.version)
	AND NOT EXISTS (SELECT 1 FROM data_job_source s WHERE s.job_name = w.name AND s.version_sha = w.version)
ORDER BY 1`, t.team, names, shas, required)
	var bound, missing []string
	var name string
	var moved bool
	_, err := pgx.ForEachRow(rows, []any{&name, &moved}, func() error {
		if moved {
			bound = append(bound, name)
		} else {
			missing = append(missing, name)
		}
		return nil
	})
	if err != nil {
		return nil, writeError("bind the staged sources of team "+t.team, err)
	}
	if len(missing) > 0 || keep <= 0 || len(bound) == 0 {
		return missing, nil
	}
	return nil, pruneSources(ctx, t.tx, bound, keep)
}

// DeleteExpiredStagedSources deletes the sources staged before before (no apply took
// them), fenced: a deposed leader deletes nothing. It returns how many it deleted.
func (s *Store) DeleteExpiredStagedSources(ctx context.Context, fence job.Fence, before time.Time) (int, error) {
	tag, err := s.pool.Exec(ctx, `DELETE FROM staged_source WHERE uploaded_at < $1 AND `+syncLeaseHeld("$2"), before, fence.Epoch)
	if err != nil {
		return 0, translate(fmt.Errorf("delete expired staged sources: %w", err))
	}
	return int(tag.RowsAffected()), nil
}
