package store_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/store"
)

// queryInt reads one integer with a connection of its own (a session apart from the store's).
func (d *execDB) queryInt(q string, args ...any) int {
	d.t.Helper()
	conn, err := pgx.Connect(d.t.Context(), d.url)
	require.NoError(d.t, err)
	defer conn.Close(context.WithoutCancel(d.t.Context()))
	var n int
	require.NoError(d.t, conn.QueryRow(d.t.Context(), q, args...).Scan(&n))
	return n
}

// Issue 41, M1: an audit row kept the whole request path and job name, so each request
// with a 64 KiB path added more than 124 KiB to the table (this failed on the code before:
// the row's text was 131,000 bytes). Now a row stays under 2 KiB whatever the request, and
// text PostgreSQL refuses (NUL, invalid UTF-8) is kept readable instead of losing the row.
func TestAuditRowIsBoundedWhateverThePath(t *testing.T) {
	t.Parallel()
	d := newExecDB(t)
	huge := strings.Repeat("é", 32*1024) // 64 KiB, a cut would land mid-character
	require.NoError(t, d.s.RecordAudit(t.Context(), job.AuditEntry{
		Team: "team-a", Actor: "bot-a", OpID: "huge", Method: "DELETE", Route: "DELETE /data-jobs/for-team/{team}/jobs/{job}",
		Path: "/data-jobs/for-team/team-a/jobs/" + huge, JobName: huge, Status: 404,
	}))
	require.Less(t, d.queryInt(`SELECT octet_length(a::text) FROM audit_log a WHERE op_id = 'huge'`), 2048,
		"the row's bytes are bounded")
	require.NoError(t, d.s.RecordAudit(t.Context(), job.AuditEntry{
		Team: "team-a", Actor: "bot-a", OpID: "odd", Method: "POST", Route: "r", Path: "/a\x00b\xffc", Status: 400,
	}))

	page, err := d.s.Audit(t.Context(), "team-a", 0, 10)
	require.NoError(t, err)
	require.Len(t, page.Entries, 2)
	odd, cut := page.Entries[0], page.Entries[1]
	require.Equal(t, "/a\uFFFDb\uFFFDc", odd.Path)
	require.LessOrEqual(t, len(cut.Path), store.AuditPathMaxBytes)
	require.True(t, strings.HasPrefix(cut.Path, "/data-jobs/for-team/team-a/jobs/éé"), cut.Path)
	require.True(t, strings.HasSuffix(cut.Path, "é"+store.AuditCutMark), "cut at a character's boundary, marked")
	require.LessOrEqual(t, len(cut.JobName), store.AuditNameMaxBytes)

	conn, err := pgx.Connect(t.Context(), d.url)
	require.NoError(t, err)
	defer conn.Close(context.WithoutCancel(t.Context()))
	_, err = conn.Exec(t.Context(), `INSERT INTO audit_log (team, actor, method, route, path, status) VALUES ('t', 'a', 'POST', 'r', repeat('x', 4096), 200)`)
	require.ErrorContains(t, err, "audit_log_row_bounded", "a row the service did not cut is refused, not kept")
}

// Issue 41, M1: the audit log refused every delete and had no retention, and revisions
// had none either (this failed on the code before: no DeleteExpiredAudit, no
// DeleteExpiredRevisions). The retention cuts by age and by count per team (per job for
// revisions), only while its term holds the lease, and an ordinary DELETE, UPDATE or
// TRUNCATE is still refused before, after and beside its cuts.
func TestRetentionCutsTheAuditLogWhichStaysAppendOnlyBetweenCuts(t *testing.T) {
	t.Parallel()
	d := newExecDB(t)
	d.exec(`INSERT INTO audit_log (team, actor, method, route, path, status, created_at)
		SELECT 'team-a', 'old-' || i, 'POST', 'r', '/p', 200, now() - interval '100 days' FROM generate_series(1, 3) i`)
	d.exec(`INSERT INTO audit_log (team, actor, method, route, path, status)
		SELECT 'team-a', 'new-' || i, 'POST', 'r', '/p', 200 FROM generate_series(1, 4) i`)
	d.exec(`INSERT INTO audit_log (team, actor, method, route, path, status)
		SELECT 'team-b', 'b-' || i, 'POST', 'r', '/p', 200 FROM generate_series(1, 2) i`)
	requireAppendOnly(t, d)

	r := job.Retention{KeptPerJob: 3, MaxAge: 90 * 24 * time.Hour, Batch: 2}
	n, err := d.s.DeleteExpiredAudit(t.Context(), job.Fence{Epoch: d.fence.Epoch + 1}, r)
	require.NoError(t, err)
	require.Zero(t, n, "a deposed leader cuts nothing")
	n, err = d.s.DeleteExpiredAudit(t.Context(), d.fence, r)
	require.NoError(t, err)
	require.Equal(t, 4, n, "team-a's three old rows and its oldest new one, two a statement")
	require.Equal(t, 3, d.queryInt(`SELECT count(*) FROM audit_log WHERE team = 'team-a' AND actor IN ('new-2', 'new-3', 'new-4')`))
	require.Equal(t, 5, d.queryInt(`SELECT count(*) FROM audit_log`), "team-b's two rows are within its own count")
	requireAppendOnly(t, d)
	require.Equal(t, 5, d.queryInt(`SELECT count(*) FROM audit_log`))

	// Revisions: the job's creation is revision 1; 2..6 are inserted, 2 and 3 old.
	d.exec(`INSERT INTO data_job_revision (job_uid, revision, job_name, kind, actor, created_at, spec, diff)
		SELECT $1::uuid, i, 'my-job', 'update', 'a', now() - CASE WHEN i < 4 THEN interval '2 days' ELSE interval '0' END, '{}', '[]'
		FROM generate_series(2, 6) i`, d.job.UID)
	n, err = d.s.DeleteExpiredRevisions(t.Context(), d.fence, job.Retention{KeptPerJob: 4, MaxAge: 24 * time.Hour, Batch: 10})
	require.NoError(t, err)
	require.Equal(t, 3, n, "revisions 1 and 2 by count, 3 by age")
	require.Equal(t, 456, d.queryInt(`SELECT string_agg(revision::text, '' ORDER BY revision)::int FROM data_job_revision`))
	n, err = d.s.DeleteExpiredRevisions(t.Context(), d.fence, job.Retention{KeptPerJob: 1, MaxAge: time.Nanosecond, Batch: 10})
	require.NoError(t, err)
	require.Equal(t, 2, n)
	require.Equal(t, 6, d.queryInt(`SELECT revision FROM data_job_revision`), "a job's newest revision stays whatever its age")
}

// requireAppendOnly requires that a session's ordinary UPDATE, DELETE and TRUNCATE of the
// audit log are refused and change nothing.
func requireAppendOnly(t *testing.T, d *execDB) {
	t.Helper()
	before := d.queryInt(`SELECT count(*) FROM audit_log`)
	conn, err := pgx.Connect(t.Context(), d.url)
	require.NoError(t, err)
	defer conn.Close(context.WithoutCancel(t.Context()))
	for _, q := range []string{`UPDATE audit_log SET actor = 'nobody'`, `DELETE FROM audit_log`, `TRUNCATE audit_log`} {
		_, err := conn.Exec(t.Context(), q)
		require.ErrorContains(t, err, "append-only", q)
	}
	require.Equal(t, before, d.queryInt(`SELECT count(*) FROM audit_log WHERE actor <> 'nobody'`))
}
