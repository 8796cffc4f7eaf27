package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// The staging and apply of source folders against a running service is
// e2e/gitops_sources_test.go's.

func TestApplyNamesAFolderItCannotPack(t *testing.T) {
	file := filepath.Join(t.TempDir(), "datajobs.yaml")
	require.NoError(t, os.WriteFile(file, []byte("apiVersion: datajobs.io/v1\nteam: team-a\njobs:\n  - {job_name: a-job, deployment: {source: nowhere}}\n"), 0o600))
	var out bytes.Buffer
	require.Equal(t, 1, Execute(t.Context(), []string{"apply", "-f", file, "--url", "http://127.0.0.1:1"}, &out, &out))
	require.Contains(t, out.String(), "job a-job: pack its source")
}
