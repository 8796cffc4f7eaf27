package e2e

import (
	"archive/zip"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/maintenance"
	"github.com/datajobs/datajobs/internal/service"
	"github.com/datajobs/datajobs/internal/store"
	"github.com/datajobs/datajobs/internal/testenv"
	"github.com/datajobs/datajobs/internal/testzip"
)

// `datajobs apply -f` of a file whose deployments name source folders, against a real
// `datajobs serve` (issue 46, docs/gitops.md): the folders are staged for the team, then
// one apply creates and deploys the jobs and makes the staged sources theirs, or changes
// nothing. Before, the CLI created the new jobs from their configuration alone, uploaded
// each folder to its job, then applied: a second job whose config.ini the upload refused
// left both jobs created, undeployed and owned by the file (this test's first apply fails
// on that: GET of the jobs answered 200).
func TestApplyOfSourceFoldersCreatesAndDeploysInOneTransaction(t *testing.T) {
	t.Parallel()
	dbURL, kubeconfig, ns := testenv.DatabaseURL(t), testenv.Kubeconfig(t), testenv.Namespace(t)
	r := startReplica(t, dbURL, kubeconfig, ns)
	db, err := store.Open(t.Context(), store.Config{URL: dbURL})
	require.NoError(t, err)
	t.Cleanup(db.Close)

	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"jobs/first-job/config.ini":   "[job]\nretries = 2\n",
		"jobs/first-job/10_step.py":   "print('first')\n",
		"jobs/first-job/.git/HEAD":    "ref: refs/heads/main\n",
		"jobs/second-job/config.ini":  "[job]\nretries = many\n",
		"jobs/second-job/20_step.sql": "select 1\n",
	})
	file := filepath.Join(dir, "datajobs.yaml")
	writeFiles(t, dir, map[string]string{"datajobs.yaml": `apiVersion: datajobs.io/v1
team: team-a
jobs:
  - job_name: first-job
    config: {schedule: {schedule_cron: "0 3 * * *"}}
    deployment: {source: jobs/first-job}
  - job_name: second-job
    config: {schedule: {schedule_cron: "0 4 * * *"}}
    deployment: {source: ./jobs/second-job}
triggers:
  - {name: on-upload, target: {job_name: first-job}, on: {kind: webhook}}
`})
	firstVersion := must(service.SourcesVersion(testzip.Dir(t, map[string]string{
		"first-job/config.ini": "[job]\nretries = 2\n", "first-job/10_step.py": "print('first')\n",
	}), service.SourcesConfig{}))

	// A dry run stages nothing and creates nothing; it plans the folder's version.
	out, err := applyFile(t, r, file, "--dry-run", "-o", "json")
	require.NoError(t, err, out)
	require.Contains(t, out, firstVersion)
	require.Zero(t, stagedCount(t, dbURL))

	// The second job's config.ini is refused: nothing is created, the first job's
	// sources are only staged.
	out, err = applyFile(t, r, file)
	require.Error(t, err, out)
	for _, name := range []string{"first-job", "second-job"} {
		require.Equal(t, http.StatusNotFound, get(t, r, "/data-jobs/for-team/team-a/jobs/"+name, nil), name)
	}
	require.Contains(t, out, "stage the sources of second-job")
	require.Contains(t, out, "config.ini")
	require.Equal(t, 1, stagedCount(t, dbURL))

	// An apply that fails after the folders are staged (its second job's name is another
	// team's: the dry run before the staging cannot tell) creates nothing either.
	require.Equal(t, http.StatusCreated, r.do(t, http.MethodPost, "/data-jobs/for-team/team-b/jobs",
		`{"job_name":"taken-job","team":"team-b","config":{"schedule":{"schedule_cron":"0 5 * * *"}}}`))
	writeFiles(t, dir, map[string]string{"taken.yaml": `apiVersion: datajobs.io/v1
team: team-a
jobs:
  - job_name: first-job
    deployment: {source: jobs/first-job}
  - job_name: taken-job
    deployment: {job_version: v1}
`})
	out, err = applyFile(t, r, filepath.Join(dir, "taken.yaml"))
	require.Error(t, err, out)
	require.Contains(t, out, `(409)`)
	require.Contains(t, out, `taken-job`)
	require.Equal(t, http.StatusNotFound, get(t, r, "/data-jobs/for-team/team-a/jobs/first-job", nil))
	require.Equal(t, 1, stagedCount(t, dbURL), "the first job's sources, staged again")

	// The staged sources no apply took expire: the leader's retention deletes them once
	// older than their bound, by its clock.
	var epoch int64
	require.Eventually(t, func() bool {
		_, epoch, _, err = db.LeaseHolder(t.Context(), store.SyncLeaseName)
		return err == nil && epoch != 0
	}, 30*time.Second, 100*time.Millisecond, "the replica leads")
	retention := func(after time.Duration) maintenance.Counts {
		s := maintenance.NewRetention(maintenance.RetentionConfig{Settings: maintenance.Settings{Now: func() time.Time { return time.Now().Add(after) }}}, db).Service()
		counts, err := s.RunOnce(t.Context(), job.Fence{Epoch: epoch})
		require.NoError(t, err)
		return counts
	}
	require.Zero(t, retention(maintenance.StagedSourcesMaxAgeDefault - time.Minute)["staged_sources"])
	require.Equal(t, 1, stagedCount(t, dbURL), "not yet expired")
	require.Equal(t, 1, retention(maintenance.StagedSourcesMaxAgeDefault + time.Minute)["staged_sources"])
	require.Zero(t, stagedCount(t, dbURL))

	// The file applies (the second job's config.ini corrected): both jobs created and
	// deployed at their folders' versions, the staged sources theirs (downloadable), no
	// longer staged.
	writeFiles(t, dir, map[string]string{"jobs/second-job/config.ini": "[job]\nretries = 1\n"})
	out, err = applyFile(t, r, file)
	require.NoError(t, err, out)
	var dep struct {
		JobVersion string `json:"job_version"`
		Retries    int    `json:"retries"`
	}
	require.Equal(t, http.StatusOK, get(t, r, "/data-jobs/for-team/team-a/jobs/first-job/deployments/release", &dep))
	require.Equal(t, firstVersion, dep.JobVersion)
	require.Equal(t, 2, dep.Retries, "config.ini's run policy, read from the staged sources")
	var archive []byte
	require.Equal(t, http.StatusOK, get(t, r, "/data-jobs/for-team/team-a/jobs/first-job/sources?version_sha="+firstVersion, &archive))
	require.ElementsMatch(t, []string{"first-job/10_step.py", "first-job/config.ini"}, zipNames(t, archive), "packed as vdk deploy does, .git left out")
	require.Equal(t, http.StatusOK, get(t, r, "/data-jobs/for-team/team-a/jobs/second-job/deployments/release", &dep))
	require.Equal(t, 1, dep.Retries)
	require.Equal(t, http.StatusOK, get(t, r, "/data-jobs/for-team/team-a/jobs/second-job/sources?version_sha="+dep.JobVersion, nil))
	require.Equal(t, http.StatusOK, get(t, r, "/data-jobs/for-team/team-a/triggers/on-upload", nil), "the trigger's bare on: read as on")
	require.Zero(t, stagedCount(t, dbURL))

	// Again: nothing changes, nothing is staged.
	out, err = applyFile(t, r, file)
	require.NoError(t, err, out)
	require.Contains(t, out, "0 to create, 0 to update, 0 to delete, 3 unchanged")
	require.Zero(t, stagedCount(t, dbURL))
}

// applyFile runs `datajobs apply -f file` against r, and returns its output.
func applyFile(t *testing.T, r *replica, file string, args ...string) (string, error) {
	t.Helper()
	bin, err := testenv.Binary()
	require.NoError(t, err)
	cmd := exec.Command(bin, append([]string{"apply", "-f", file, "--url", r.base, "--source", "github.com/acme/jobs@abc"}, args...)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// get GETs path of r and decodes a 200's body into into (a *[]byte takes it raw).
func get(t *testing.T, r *replica, path string, into any) int {
	t.Helper()
	resp, err := http.Get(r.base + path)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	switch v := into.(type) {
	case nil:
	case *[]byte:
		*v = body
	default:
		if resp.StatusCode == http.StatusOK {
			require.NoError(t, json.Unmarshal(body, into), string(body))
		}
	}
	return resp.StatusCode
}

// stagedCount is how many sources are staged for team-a.
func stagedCount(t *testing.T, dbURL string) int {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), dbURL)
	require.NoError(t, err)
	defer conn.Close(t.Context())
	var n int
	require.NoError(t, conn.QueryRow(t.Context(), `SELECT count(*) FROM staged_source WHERE team = 'team-a'`).Scan(&n))
	return n
}

func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, body := range files {
		p := filepath.Join(dir, name)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(body), 0o600))
	}
}

func zipNames(t *testing.T, archive []byte) []string {
	t.Helper()
	zr, err := zip.NewReader(bytes.NewReader(archive), int64(len(archive)))
	require.NoError(t, err)
	var names []string
	for _, f := range zr.File {
		names = append(names, f.Name)
	}
	return names
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
