package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/datajobs/datajobs/internal/job"
	"github.com/jackc/pgx/v5"
)

// buildStateQuery reads the build state of every desired deployment (or of $1's).
const buildStateQuery = `SELECT d.data_job_name, s.version_sha IS NOT NULL, COALESCE(i.base_image, ''), COALESCE(i.image, ''),
	COALESCE(a.attempts, 0), COALESCE(a.base_image, ''), COALESCE(a.last_started_at, 'epoch')
FROM desired_data_job_deployment d
LEFT JOIN data_job_source s ON s.job_name = d.data_job_name AND s.version_sha = d.git_commit_sha
LEFT JOIN LATERAL (
	SELECT base_image, image FROM data_job_image i
	WHERE i.job_name = d.data_job_name AND i.job_version = d.git_commit_sha AND i.python_version = d.python_version
	ORDER BY built_at DESC LIMIT 1
) i ON true
LEFT JOIN LATERAL (
	SELECT attempts, base_image, last_started_at FROM data_job_build_attempt a
	WHERE a.job_name = d.data_job_name AND a.job_version = d.git_commit_sha AND a.python_version = d.python_version
	ORDER BY last_started_at DESC LIMIT 1
) a ON true`

// queueBuildStates adds to batch the read of the build states of the desired deployments
// that where selects into states, which the batch's job query fills first.
func queueBuildStates(batch *pgx.Batch, states map[string]job.SyncState, where string, args ...any) {
	batch.Queue(buildStateQuery+where, args...).Query(func(rows pgx.Rows) error {
		var (
			name string
			b    job.BuildState
		)
		_, err := pgx.ForEachRow(rows, []any{&name, &b.SourceStored, &b.BaseImage, &b.Image, &b.Attempts, &b.AttemptBase, &b.LastAttempt}, func() error {
			if st, ok := states[name]; ok && st.Desired != nil {
				build := b
				st.Build = &build
				states[name] = st
			}
			return nil
		})
		return err
	})
}

// RecordBuild records a pushed image, while the job is still incarnation b.JobUID and
// fence holds the lease. The generation does not matter: the image of a version stays
// right when the deployment changes meanwhile. It reports whether it wrote.
func (s *Store) RecordBuild(ctx context.Context, fence job.Fence, b job.ImageBuild) (bool, error) {
	// The build ended: its attempts are forgotten with the same statement.
	q := `WITH done AS (` + deleteAttempts("$10") + `)
INSERT INTO data_job_image (job_name, job_version, python_version, base_image, base_digest,
	requirements_sha256, image, bytes_pushed)
SELECT $1, $3, $4, $5, $6, $7, $8, $9
WHERE EXISTS (SELECT 1 FROM data_job WHERE name = $1 AND uid = $2::uuid) AND ` + syncLeaseHeld("$10") + `
ON CONFLICT (job_name, job_version, python_version, base_image) DO UPDATE SET base_digest = EXCLUDED.base_digest,
	requirements_sha256 = EXCLUDED.requirements_sha256, image = EXCLUDED.image,
	bytes_pushed = EXCLUDED.bytes_pushed, built_at = now()`
	tag, err := s.pool.Exec(ctx, q, b.JobName, b.JobUID, b.JobVersion, b.PythonVersion, b.BaseImage,
		b.BaseDigest, b.RequirementsSHA256, b.Image, b.BytesPushed, fence.Epoch)
	if err != nil {
		return false, translate(fmt.Errorf("record image build of %s: %w", b.JobName, err))
	}
	return tag.RowsAffected() > 0, nil
}

// ClaimPrebuiltImage records that incarnation jobUID of job name runs the prebuilt image
// (by digest) unless another incarnation of the name ran it first, while the job is
// still jobUID and fence holds the lease, and returns the incarnation the image belongs
// to ("" when it wrote nothing and none had it): a job created again under a name runs no
// image its previous owner ran (issue 41, L9).
func (s *Store) ClaimPrebuiltImage(ctx context.Context, fence job.Fence, name, jobUID, image string) (string, error) {
	var owner *string
	err := s.pool.QueryRow(ctx, `WITH claim AS (
	INSERT INTO prebuilt_image_owner (job_name, image, job_uid)
	SELECT $1, $3, $2::uuid
	WHERE EXISTS (SELECT 1 FROM data_job WHERE name = $1 AND uid = $2::uuid) AND `+syncLeaseHeld("$4")+`
	ON CONFLICT (job_name, image) DO NOTHING
	RETURNING job_uid
)
SELECT COALESCE((SELECT job_uid FROM claim), (SELECT job_uid FROM prebuilt_image_owner WHERE job_name = $1 AND image = $3))::text`,
		name, jobUID, image, fence.Epoch).Scan(&owner)
	if err != nil {
		return "", translate(fmt.Errorf("claim prebuilt image %s of %s: %w", image, name, err))
	}
	if owner == nil {
		return "", nil
	}
	return *owner, nil
}

// deleteAttempts deletes the attempts of build key ($1 job, $3 version, $4 python, $5
// base) while $2 is the job's incarnation and the term of epochArg holds the lease.
func deleteAttempts(epochArg string) string {
	return `DELETE FROM data_job_build_attempt
WHERE job_name = $1 AND job_version = $3 AND python_version = $4 AND base_image = $5
	AND EXISTS (SELECT 1 FROM data_job WHERE name = $1 AND uid = $2::uuid) AND ` + syncLeaseHeld(epochArg)
}

// StartBuild records that a build of key starts, while the job is still incarnation
// key.JobUID and fence holds the lease, and returns how many builds of the key have
// started since the last one that ended, this one included (0 when it wrote nothing).
func (s *Store) StartBuild(ctx context.Context, fence job.Fence, key job.BuildKey) (int, error) {
	q := `INSERT INTO data_job_build_attempt (job_name, job_version, python_version, base_image, attempts)
SELECT $1, $3, $4, $5, 1
WHERE EXISTS (SELECT 1 FROM data_job WHERE name = $1 AND uid = $2::uuid) AND ` + syncLeaseHeld("$6") + `
ON CONFLICT (job_name, job_version, python_version, base_image) DO UPDATE
	SET attempts = data_job_build_attempt.attempts + 1, last_started_at = now()
RETURNING attempts`
	var n int
	err := s.pool.QueryRow(ctx, q, key.JobName, key.JobUID, key.JobVersion, key.PythonVersion, key.BaseImage, fence.Epoch).Scan(&n)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, translate(fmt.Errorf("record build start of %s: %w", key.JobName, err))
	}
	return n, nil
}

// EndBuild forgets the attempts of key: the build ended on the job's inputs (a user
// error), so the next build, after the user changed something, starts at once.
func (s *Store) EndBuild(ctx context.Context, fence job.Fence, key job.BuildKey) error {
	_, err := s.pool.Exec(ctx, deleteAttempts("$6"), key.JobName, key.JobUID, key.JobVersion, key.PythonVersion, key.BaseImage, fence.Epoch)
	if err != nil {
		return translate(fmt.Errorf("record build end of %s: %w", key.JobName, err))
	}
	return nil
}
