package httpapi_test

import (
	"archive/zip"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/maintenance"
	"github.com/datajobs/datajobs/internal/service"
	"github.com/datajobs/datajobs/internal/store"
	"github.com/datajobs/datajobs/internal/testzip"
)

const stagePath = "/data-jobs/for-team/team-a/sources"

// stage posts archive to team-a's staged sources.
func (e *env) stage(archive string) response {
	e.t.Helper()
	return e.do("POST", stagePath+"?reason=datajobs+apply", archive, "Content-Type", "application/octet-stream")
}

// staged is how many sources are staged for team-a.
func (e *env) staged() int {
	e.t.Helper()
	conn, err := pgx.Connect(e.t.Context(), e.dbURL)
	require.NoError(e.t, err)
	defer conn.Close(e.t.Context())
	var n int
	require.NoError(e.t, conn.QueryRow(e.t.Context(), `SELECT count(*) FROM staged_source WHERE team = 'team-a'`).Scan(&n))
	return n
}

// Sources staged for an apply (docs/gitops.md) need no job: they are checked as an
// upload, count in the team's quota, and an apply that deploys their version makes them
// the job's, or, when it fails, leaves them staged and creates nothing.
func TestStagedSourcesAreCheckedCountedAndTakenByTheApply(t *testing.T) {
	t.Parallel()
	now := time.Now()
	first := sampleJob(t, now, zip.Store)
	e := newEnv(t, withQuotas(store.TeamQuotas{MaxSourceBytes: int64(len(first)) * 3 / 2}))

	r := e.stage(first)
	require.Equal(t, http.StatusCreated, r.status, "%s", r.body)
	var v struct {
		VersionSHA string `json:"version_sha"`
	}
	r.json(t, &v)
	want, err := service.SourcesVersion([]byte(first), service.SourcesConfig{})
	require.NoError(t, err)
	require.Equal(t, want, v.VersionSHA)
	require.Equal(t, http.StatusCreated, e.stage(sampleJob(t, now.Add(time.Hour), zip.Deflate)).status, "the same files again: one staged version, no byte more")
	require.Equal(t, 1, e.staged())

	r = e.stage(sampleJob(t, now, zip.Store, testzip.File{Name: "my-job/x.py", Body: "pass"}))
	require.Equal(t, http.StatusConflict, r.status, "staged sources count in the quota: %s", r.body)
	r = e.stage(string(testzip.Dir(t, map[string]string{"my-job/config.ini": "[job]\nretries = many\n"})))
	require.Equal(t, http.StatusBadRequest, r.status, "config.ini is checked as an upload's: %s", r.body)
	require.Equal(t, 1, e.staged())

	file := "apiVersion: datajobs.io/v1\nteam: team-a\njobs:\n  - job_name: my-job\n    deployment: {job_version: " + v.VersionSHA + "}\n"
	r = e.apply(file+"  - job_name: bad-job\n    config: {schedule: {schedule_cron: \"every day\"}}\n", "")
	require.Equal(t, http.StatusBadRequest, r.status, "%s", r.body)
	require.Equal(t, http.StatusNotFound, e.do("GET", "/data-jobs/for-team/team-a/jobs/my-job", "").status)
	require.Equal(t, 1, e.staged(), "a failed apply leaves the staged sources")

	p := e.plan(file, "")
	require.True(t, p.Applied)
	require.Equal(t, http.StatusOK, e.do("GET", "/data-jobs/for-team/team-a/jobs/my-job/sources?version_sha="+v.VersionSHA, "").status)
	require.Equal(t, 1, e.sourceRows("my-job"))
	require.Zero(t, e.staged(), "the apply took them")
}

// Staged sources an apply takes are kept as uploads are: the latest versions of the job
// (SourcesConfig.KeepVersions) and the deployed one.
func TestStagedSourcesTakenByAnApplyKeepTheLatestVersions(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withSources(service.SourcesConfig{KeepVersions: 2}))
	var versions []string
	for i := range 3 {
		r := e.stage(sampleJob(t, time.Now(), zip.Deflate, testzip.File{Name: "my-job/v", Body: strings.Repeat("v", i+1)}))
		require.Equal(t, http.StatusCreated, r.status, "%s", r.body)
		var v struct {
			VersionSHA string `json:"version_sha"`
		}
		r.json(t, &v)
		versions = append(versions, v.VersionSHA)
		require.True(t, e.plan("apiVersion: datajobs.io/v1\nteam: team-a\njobs:\n  - job_name: my-job\n    deployment: {job_version: "+v.VersionSHA+"}\n", "").Applied)
	}
	status := func(version string) int {
		return e.do("GET", "/data-jobs/for-team/team-a/jobs/my-job/sources?version_sha="+version, "").status
	}
	require.Equal(t, http.StatusNotFound, status(versions[0]), "the oldest goes")
	require.Equal(t, http.StatusOK, status(versions[1]))
	require.Equal(t, http.StatusOK, status(versions[2]), "the deployed one")
	require.Equal(t, 2, e.sourceRows("my-job"))
	require.Zero(t, e.staged())
}

// A deployment that names its source folder beside its version (what `datajobs apply -f`
// sends) needs that version staged, or the job's sources already: one whose staging the
// leader's retention deleted (or that was never staged) is refused in the apply's
// transaction, 409 naming the job, its version and folder and saying to apply again, and
// nothing is written. Before, the CLI sent the version alone and the apply took it for a
// prebuilt image's: it created and deployed the job, whose build then failed for want of
// sources (this test, without the refusal, fails on the apply's 200).
func TestAnApplyOfASourceFolderWhoseStagedSourcesExpiredIsRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	archive := sampleJob(t, time.Now(), zip.Deflate)
	r := e.stage(archive)
	require.Equal(t, http.StatusCreated, r.status, "%s", r.body)
	var v struct {
		VersionSHA string `json:"version_sha"`
	}
	r.json(t, &v)
	file := func(retries int) string {
		return fmt.Sprintf("apiVersion: datajobs.io/v1\nteam: team-a\njobs:\n"+
			"  - job_name: image-job\n    deployment: {job_version: v1}\n"+
			"  - job_name: my-job\n    deployment: {job_version: %s, source: jobs/my-job, retries: %d}\n", v.VersionSHA, retries)
	}

	// The leader's retention, by a clock past the staged sources' bound, deletes them.
	epoch, ok, err := e.store.TryAcquireLease(t.Context(), store.SyncLeaseName, "test", time.Minute)
	require.NoError(t, err)
	require.True(t, ok)
	later := func() time.Time { return time.Now().Add(maintenance.StagedSourcesMaxAgeDefault + time.Minute) }
	counts, err := maintenance.NewRetention(maintenance.RetentionConfig{Settings: maintenance.Settings{Now: later}}, e.store).Service().RunOnce(t.Context(), job.Fence{Epoch: epoch})
	require.NoError(t, err)
	require.Equal(t, 1, counts["staged_sources"])

	require.Equal(t, "create", e.plan(file(1), "dry_run=true").actions()["job/my-job"], "a dry run plans it: the CLI stages after its plan")
	r = e.apply(file(1), "")
	require.Equal(t, http.StatusConflict, r.status, "%s", r.body)
	body := r.vdkError(t)
	for _, want := range []string{`jobs[1] ("my-job")`, v.VersionSHA, "jobs/my-job", "are not staged"} {
		require.Contains(t, body["what"], want)
	}
	require.Equal(t, "Nothing was applied.", body["consequences"])
	require.Contains(t, body["countermeasures"], "Run `datajobs apply -f` again")
	for _, name := range []string{"image-job", "my-job"} {
		require.Equal(t, http.StatusNotFound, e.do("GET", "/data-jobs/for-team/team-a/jobs/"+name, "").status, "nothing written: %s", name)
	}

	// Staged again, the file applies; the job's version, no longer staged but its sources
	// now, is applied again without a staging.
	require.Equal(t, http.StatusCreated, e.stage(archive).status)
	require.True(t, e.plan(file(1), "").Applied)
	require.Equal(t, 1, e.sourceRows("my-job"))
	p := e.plan(file(2), "")
	require.True(t, p.Applied)
	require.Equal(t, "update", p.actions()["job/my-job"])
}
