package cli

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// apply posts the file to its team's apply with the source and the flags, and prints the
// plan; export prints the team's file.
func TestApplySendsTheFileWithItsSourceAndPrintsThePlan(t *testing.T) {
	var got *http.Request
	var body []byte
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, body = r, must(io.ReadAll(r.Body))
		if r.Method == http.MethodGet {
			_, _ = io.WriteString(w, "apiVersion: datajobs.io/v1\nteam: team-a\n")
			return
		}
		_, _ = io.WriteString(w, `{"team":"team-a","base_revision":"sha256:ab","dry_run":true,"changes":[
{"kind":"job","name":"extract-job","action":"update","diff":[{"field":"deployment.job_version","from":"v1","to":"v2"}]},
{"kind":"job","name":"load-job","action":"unchanged"}],"summary":{"update":1,"unchanged":1}}`)
	}))
	t.Cleanup(api.Close)
	file := filepath.Join(t.TempDir(), "datajobs.yaml")
	require.NoError(t, os.WriteFile(file, []byte("apiVersion: datajobs.io/v1\nteam: team-a\njobs: []\n"), 0o600))

	var out bytes.Buffer
	code := Execute(t.Context(), []string{"apply", "-f", file, "--dry-run", "--prune", "--url", api.URL, "--source", "github.com/acme/jobs@abc"}, &out, &out)
	require.Equal(t, 0, code, out.String())
	require.Equal(t, "/data-jobs/for-team/team-a/apply", got.URL.Path)
	require.Equal(t, "true", got.URL.Query().Get("dry_run"))
	require.Equal(t, "true", got.URL.Query().Get("prune"))
	require.Equal(t, "github.com/acme/jobs@abc", got.Header.Get("X-Datajobs-Source"))
	require.Contains(t, string(body), "team: team-a")
	require.Equal(t, "~ job extract-job\n    deployment.job_version: \"v1\" -> \"v2\"\n"+
		"0 to create, 1 to update, 0 to delete, 1 unchanged, 0 kept, 0 in conflict (base_revision sha256:ab)\ndry run: nothing was changed\n", out.String())

	out.Reset()
	require.Equal(t, 0, Execute(t.Context(), []string{"export", "--team", "team-a", "--url", api.URL}, &out, &out), out.String())
	require.Equal(t, "/data-jobs/for-team/team-a/export", got.URL.Path)
	require.Equal(t, "apiVersion: datajobs.io/v1\nteam: team-a\n", out.String())
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
