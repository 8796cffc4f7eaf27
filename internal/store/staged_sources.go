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
// them from the staged ones. A version not staged is left alone: a job that has it, or a
// prebuilt image's. One statement for every job, then one pruning those it bound.
func (t *TeamTx) BindSources(ctx context.Context, versions map[string]string, keep int) error {
	if len(versions) == 0 {
		return nil
	}
	names, shas := make([]string, 0, len(versions)), make([]string, 0, len(versions))
	for n, v := range versions {
		names, shas = append(names, n), append(shas, v)
	}
	// The CTEs read one snapshot: the staged rows are moved to every job that names
	// them, then deleted.
	rows, _ := t.tx.Query(ctx, `
WITH w AS (SELECT * FROM unnest($2::text[], $3::text[]) AS w(name, version)),
moved AS (
	INSERT INTO data_job_source (job_name, version_sha, archive, size_bytes, reason, uploaded_by, uploaded_at, run_policy)
	SELECT w.name, s.version_sha, s.archive, s.size_bytes, s.reason, s.uploaded_by, s.uploaded_at, s.run_policy
	FROM w JOIN staged_source s ON s.team = $1 AND s.version_sha = w.version
	ON CONFLICT (job_name, version_sha) DO UPDATE SET upload_seq = nextval('data_job_source_upload_seq'),
		reason = excluded.reason, uploaded_by = excluded.uploaded_by, uploaded_at = excluded.uploaded_at, run_policy = excluded.run_policy
	RETURNING job_name),
gone AS (DELETE FROM staged_source s USING w WHERE s.team = $1 AND s.version_sha = w.version)
SELECT job_name FROM moved`, t.team, names, shas)
	bound, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return writeError("bind the staged sources of team "+t.team, err)
	}
	if keep <= 0 || len(bound) == 0 {
		return nil
	}
	return pruneSources(ctx, t.tx, bound, keep)
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
