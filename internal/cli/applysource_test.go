package cli

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/gitops"
	"github.com/datajobs/datajobs/internal/service"
)

// sourcesAPI is an API that plans new-job as a create, answers an upload with the
// archive's version and records every request.
type sourcesAPI struct {
	mu       sync.Mutex
	requests []string
	bodies   [][]byte
}

func (a *sourcesAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body := must(io.ReadAll(r.Body))
	a.mu.Lock()
	a.requests = append(a.requests, r.Method+" "+r.URL.Path+"?"+r.URL.RawQuery)
	a.bodies = append(a.bodies, body)
	a.mu.Unlock()
	if strings.HasSuffix(r.URL.Path, "/sources") {
		v, err := service.SourcesVersion(body, service.SourcesConfig{})
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]string{"version_sha": v})
		return
	}
	_, _ = io.WriteString(w, `{"team":"team-a","base_revision":"sha256:ab","changes":[
{"kind":"job","name":"new-job","action":"create"},{"kind":"job","name":"old-job","action":"update"}],"summary":{"create":1,"update":1}}`)
}

// sourcesFile writes a file of two jobs deployed from folders beside it, and a trigger
// with a bare on:, and returns its path.
func sourcesFile(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, f := range []string{"jobs/new-job/config.ini", "jobs/new-job/10_step.py", "old-job/20_step.sql", "old-job/.git/HEAD"} {
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(dir, f)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, f), []byte("content of "+f), 0o600))
	}
	file := filepath.Join(dir, "datajobs.yaml")
	require.NoError(t, os.WriteFile(file, []byte(`apiVersion: datajobs.io/v1
team: team-a
jobs:
  - job_name: new-job
    config: {schedule: {schedule_cron: "0 3 * * *"}}
    deployment: {source: jobs/new-job, retries: 1}
  - job_name: old-job
    deployment: {source: ./old-job}
triggers:
  - {name: on-upload, target: {job_name: new-job}, on: {kind: webhook}}
`), 0o600))
	return file
}

func TestApplyPacksAndUploadsASourceFolderAndSendsItsVersion(t *testing.T) {
	api := &sourcesAPI{}
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	file := sourcesFile(t)
	var out bytes.Buffer
	require.Equal(t, 0, Execute(t.Context(), []string{"apply", "-f", file, "--url", srv.URL, "--source", "github.com/acme/jobs@abc", "--base-revision", "sha256:ab"}, &out, &out), out.String())
	require.Equal(t, []string{
		"POST /data-jobs/for-team/team-a/apply?dry_run=true",
		"POST /data-jobs/for-team/team-a/apply?dry_run=false&prune=false",
		"POST /data-jobs/for-team/team-a/jobs/new-job/sources?reason=datajobs+apply+github.com%2Facme%2Fjobs%40abc",
		"POST /data-jobs/for-team/team-a/jobs/old-job/sources?reason=datajobs+apply+github.com%2Facme%2Fjobs%40abc",
		"POST /data-jobs/for-team/team-a/apply?allow_mass_prune=false&dry_run=false&prune=false",
	}, api.requests, "a dry run first, then the new job created, the uploads and the apply (without the base the creation moved)")
	require.JSONEq(t, `{"apiVersion":"datajobs.io/v1","team":"team-a","jobs":[{"job_name":"new-job","config":{"schedule":{"schedule_cron":"0 3 * * *"}}}]}`, string(api.bodies[1]),
		"the job to upload to is created from its configuration alone")

	sent, err := gitops.Parse("team-a", api.bodies[4]) // as the service reads it
	require.NoError(t, err)
	require.NotContains(t, string(api.bodies[4]), "source")
	for i, name := range []string{"new-job", "old-job"} {
		v, err := service.SourcesVersion(api.bodies[2+i], service.SourcesConfig{})
		require.NoError(t, err)
		require.Equal(t, v, sent.Jobs[i].Deployment.JobVersion, "the file names the version uploaded for %s", name)
	}
	require.EqualValues(t, 1, *sent.Jobs[0].Deployment.Retries)
	require.Equal(t, "webhook", string(sent.Triggers[0].On.Kind), "a trigger's bare on: is read as on")
	require.NotContains(t, string(api.bodies[3]), ".git/", "a version control's folder is not packed")
	require.Contains(t, string(api.bodies[2]), "new-job/10_step.py", "the job's folder at the archive's top, as vdk deploy packs it")

	// A dry run uploads nothing and plans the version the folder has.
	api.requests, api.bodies = nil, nil
	require.Equal(t, 0, Execute(t.Context(), []string{"apply", "-f", file, "--dry-run", "--url", srv.URL}, &out, &out), out.String())
	require.Len(t, api.requests, 1)
	require.Contains(t, string(api.bodies[0]), "job_version: "+sent.Jobs[0].Deployment.JobVersion)
}

func TestApplyNamesAFolderItCannotPack(t *testing.T) {
	file := filepath.Join(t.TempDir(), "datajobs.yaml")
	require.NoError(t, os.WriteFile(file, []byte("apiVersion: datajobs.io/v1\nteam: team-a\njobs:\n  - {job_name: a-job, deployment: {source: nowhere}}\n"), 0o600))
	var out bytes.Buffer
	require.Equal(t, 1, Execute(t.Context(), []string{"apply", "-f", file, "--url", "http://127.0.0.1:1"}, &out, &out))
	require.Contains(t, out.String(), "job a-job: pack its source")
}
