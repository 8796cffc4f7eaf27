package httpapi_test

import (
	"archive/zip"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

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
