package store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/datajobs/datajobs/internal/job"
)

// SaveSources stores src as a version of the sources of the job name of team, and makes
// it the job's latest. When that version is stored already, its archive is kept and only
// the upload's reason, user and time change: the same files give the same version.
// Then only the keep latest versions are kept, and the version the job's desired
// deployment names; keep <= 0 keeps all. A missing job (or one of another team) is not
// found; sources that would take the team over its quota of bytes are refused. An upload
// of the version of a deployment that failed on a user error retries it (retryFailedBuild).
func (s *Store) SaveSources(ctx context.Context, team, name string, src job.Sources, keep int) error {
	return s.InTx(ctx, func(tx Tx) error {
		// The job's row lock first, for update, as every API writer of a job's rows takes
		// it (lockJobs): a concurrent delete of the job waits for this upload, and then
		// takes its sources with it; two uploads that both retry a failed build (and bump
		// the generation) queue instead of both upgrading a shared lock.
		var found bool
		err := tx.QueryRow(ctx, `SELECT true FROM data_job WHERE name = $1 AND team = $2 `+lockForUpdate, name, team).Scan(&found)
		if errors.Is(err, pgx.ErrNoRows) {
			return job.JobNotFound(team, name)
		}
		if err != nil {
			return fmt.Errorf("lock job %s: %w", name, err)
		}
		policy, err := policyJSON(src.ConfigPolicy)
		if err != nil {
			return err
		}
		// Known content: no need to send the archive again.
		tag, err := tx.Exec(ctx, `
UPDATE data_job_source SET upload_seq = nextval('data_job_source_upload_seq'),
	reason = $3, uploaded_by = $4, uploaded_at = $5, run_policy = $6
WHERE job_name = $1 AND version_sha = $2`, name, src.Version, src.Reason, src.UploadedBy, src.UploadedAt, policy)
		if err != nil {
			return writeError(fmt.Sprintf("save sources of %s", name), err)
		}
		added := tag.RowsAffected() == 0
		if added {
			// ON CONFLICT: a concurrent upload of the same content may have won.
			_, err = tx.Exec(ctx, `
INSERT INTO data_job_source (job_name, version_sha, archive, size_bytes, reason, uploaded_by, uploaded_at, run_policy)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
ON CONFLICT (job_name, version_sha) DO UPDATE SET upload_seq = nextval('data_job_source_upload_seq'),
	reason = excluded.reason, uploaded_by = excluded.uploaded_by, uploaded_at = excluded.uploaded_at, run_policy = excluded.run_policy`,
				name, src.Version, src.Archive, len(src.Archive), src.Reason, src.UploadedBy, src.UploadedAt, policy)
			if err != nil {
				return writeError(fmt.Sprintf("save sources of %s", name), err)
			}
		}
		if keep > 0 {
			if err := pruneSources(ctx, tx, []string{name}, keep); err != nil {
				return err
			}
		}
		if err := retryFailedBuild(ctx, tx, name, src.Version); err != nil {
			return err
		}
		if !added {
			return nil // no byte more than before
		}
		return s.checkSourcesQuota(ctx, tx, team)
	})
}

// retryFailedBuild makes an upload of the sources of a deployment that failed on a user
// error (e.g. its image build: a requirement without a wheel) the user's retry, as a
// redeploy is: the deployment goes back to pending and the synchronizer is notified.
// job.Sources are content-addressed, so only an upload of the deployed version's own files
// can concern it, and what it can have changed is outside them (the pip index). One
// upload, one retry; an upload of other files is another version, which a deploy builds.
func retryFailedBuild(ctx context.Context, tx Tx, name, version string) error {
	tag, err := tx.Exec(ctx, `
UPDATE desired_data_job_deployment SET status = 'pending', message = ''
WHERE data_job_name = $1 AND git_commit_sha = $2 AND status = 'user_error'`, name, version)
	if err != nil {
		return writeError(fmt.Sprintf("retry the deployment of %s", name), err)
	}
	if tag.RowsAffected() == 0 {
		return nil
	}
	return bumpGeneration(ctx, tx, name)
}

// pruneSources deletes the versions of the sources of the jobs names but the keep latest
// of each and the one its desired deployment names.
func pruneSources(ctx context.Context, tx Tx, names []string, keep int) error {
	_, err := tx.Exec(ctx, `
DELETE FROM data_job_source s
WHERE s.job_name = ANY($1::text[])
  AND s.upload_seq < (SELECT upload_seq FROM data_job_source x WHERE x.job_name = s.job_name
                      ORDER BY upload_seq DESC OFFSET $2 - 1 LIMIT 1)
  AND s.version_sha IS DISTINCT FROM (SELECT git_commit_sha FROM desired_data_job_deployment WHERE data_job_name = s.job_name)`,
		names, keep)
	if err != nil {
		return fmt.Errorf("prune sources of %v: %w", names, err)
	}
	return nil
}

// policyJSON is the run_policy column of a config.ini's policy: NULL when it sets none.
func policyJSON(c job.PolicyChange) ([]byte, error) {
	if c.IsZero() {
		return nil, nil
	}
	b, err := json.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("encode run policy of config.ini: %w", err)
	}
	return b, nil
}

// SourcesPolicy returns the run policy the config.ini of version of the sources of the job
// name of team sets: none when the version has no sources (a prebuilt image's version) or
// its config.ini sets none.
func (s *Store) SourcesPolicy(ctx context.Context, team, name, version string) (job.PolicyChange, error) {
	var (
		raw []byte
		c   job.PolicyChange
	)
	err := s.pool.QueryRow(ctx, `
SELECT s.run_policy FROM data_job_source s JOIN data_job j ON j.name = s.job_name
WHERE s.job_name = $1 AND j.team = $2 AND s.version_sha = $3`, name, team, version).Scan(&raw)
	if errors.Is(err, pgx.ErrNoRows) || (err == nil && raw == nil) {
		return c, nil
	}
	if err != nil {
		return c, translate(fmt.Errorf("read run policy of %s sources %s: %w", name, version, err))
	}
	if err := json.Unmarshal(raw, &c); err != nil {
		return c, fmt.Errorf("decode run policy of %s sources %s: %w", name, version, err)
	}
	return c, nil
}

// GetSources returns the version of the sources of the job name of team, or its latest
// when version is "", read whole (see OpenSources).
func (s *Store) GetSources(ctx context.Context, team, name, version string) (job.Sources, error) {
	r, err := s.OpenSources(ctx, team, name, version)
	if err != nil {
		return job.Sources{}, err
	}
	var archive bytes.Buffer
	if _, err := r.WriteTo(&archive); err != nil {
		return job.Sources{}, err
	}
	src := r.Sources
	src.Archive = archive.Bytes()
	return src, nil
}

// DeleteSources deletes every version of the sources of the job name of team. A job
// without sources is fine; a missing job is not found.
func (s *Store) DeleteSources(ctx context.Context, team, name string) error {
	const q = `
WITH j AS (SELECT name FROM data_job WHERE name = $1 AND team = $2),
     d AS (DELETE FROM data_job_source s USING j WHERE s.job_name = j.name)
SELECT count(*) FROM j`
	var n int
	if err := s.pool.QueryRow(ctx, q, name, team).Scan(&n); err != nil {
		return translate(fmt.Errorf("delete sources of %s: %w", name, err))
	}
	if n == 0 {
		return job.JobNotFound(team, name)
	}
	return nil
}

// sourcesChunk is how much of an archive one query of job.SourcesReader reads: a download
// holds this much memory and no connection between chunks, whatever the archive's size.
const sourcesChunk = 1 << 20

// sourcesReader reads one stored archive in chunks, one query each (the column is stored
// out of line and uncompressed, so PostgreSQL reads only the chunk's pages). It is an
// io.Reader bound to the context it was opened with.
type sourcesReader struct {
	ctx           context.Context //nolint:containedctx // an io.Reader has no context argument
	s             *Store
	name, version string
	size, off     int64
}

// OpenSources returns a reader of the version of the sources of the job name of team, or
// of its latest when version is "". A missing job is job.JobNotFound; a job without those
// sources is job.ErrNoSources. A version deleted while it is read fails the read.
func (s *Store) OpenSources(ctx context.Context, team, name, version string) (*job.SourcesReader, error) {
	const q = `
SELECT s.version_sha, s.size_bytes, s.reason, s.uploaded_by, s.uploaded_at
FROM data_job j
LEFT JOIN LATERAL (
	SELECT version_sha, size_bytes, reason, uploaded_by, uploaded_at FROM data_job_source s
	WHERE s.job_name = j.name AND ($3 = '' OR s.version_sha = $3)
	ORDER BY s.upload_seq DESC LIMIT 1
) s ON true
WHERE j.name = $1 AND j.team = $2`
	var (
		ver, reason, by *string
		size            *int64
		at              *time.Time
	)
	err := s.pool.QueryRow(ctx, q, name, team, version).Scan(&ver, &size, &reason, &by, &at)
	if err != nil {
		return nil, rowError(err, job.JobNotFound(team, name), "open sources of "+name)
	}
	if ver == nil {
		return nil, job.ErrNoSources
	}
	src := job.Sources{Version: *ver, Reason: *reason, UploadedBy: *by, UploadedAt: at.UTC()}
	return &job.SourcesReader{Sources: src, Size: *size, ArchiveReader: &sourcesReader{ctx: ctx, s: s, name: name, version: *ver, size: *size}}, nil
}

// Read reads the next bytes of the archive into p, at most one chunk.
func (r *sourcesReader) Read(p []byte) (int, error) {
	chunk, err := r.next(int64(len(p)))
	return copy(p, chunk), err
}

// WriteTo writes the rest of the archive to w chunk by chunk (io.Copy uses it).
func (r *sourcesReader) WriteTo(w io.Writer) (int64, error) {
	var written int64
	for {
		chunk, err := r.next(sourcesChunk)
		n, werr := w.Write(chunk)
		written += int64(n)
		if errors.Is(err, io.EOF) {
			return written, nil
		}
		if err != nil {
			return written, err
		}
		if werr != nil {
			return written, werr
		}
	}
}

// next reads the next chunk of at most n bytes; io.EOF at the end.
func (r *sourcesReader) next(n int64) ([]byte, error) {
	if r.off >= r.size {
		return nil, io.EOF
	}
	n = min(n, r.size-r.off, sourcesChunk)
	var chunk []byte
	// substring counts from 1.
	err := r.s.pool.QueryRow(r.ctx, `SELECT substring(archive FROM $3 FOR $4) FROM data_job_source WHERE job_name = $1 AND version_sha = $2`,
		r.name, r.version, r.off+1, n).Scan(&chunk)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("read sources %s of %s: %w", r.version, r.name, job.ErrNoSources)
	}
	if err != nil {
		return nil, translate(fmt.Errorf("read sources %s of %s: %w", r.version, r.name, err))
	}
	if len(chunk) == 0 {
		return nil, io.ErrUnexpectedEOF
	}
	r.off += int64(len(chunk))
	return chunk, nil
}
