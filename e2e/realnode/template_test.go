package realnode

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestTheJobVdkcliCreateMakesRunsUnchanged guards issue 48, item 1: the job folder the
// real `vdkcli create` writes (VDK's template: a SQL step and a python step ingesting into
// SQLite, db_default_type=SQLITE) is deployed as it is, with the README's steps, and its
// run succeeds: the base image carries vdk-sqlite and the ingestion plugins of VDK's
// quickstart. It failed with "You tried to open a connection to database with type
// sqlite, which does not exist" when the base image had vdk-core only.
func TestTheJobVdkcliCreateMakesRunsUnchanged(t *testing.T) {
	t.Parallel()
	s := startService(t, t.TempDir())
	const name = "rn-template"
	parent := t.TempDir()
	// As the README says: one create makes the local folder and registers the job.
	s.vdk(t, "create", "-n", name, "-t", team, "--local", "--cloud", "-p", parent)
	dir := filepath.Join(parent, name)
	for _, f := range []string{"10_sql_step.sql", "20_python_step.py", "config.ini"} {
		_, err := os.Stat(filepath.Join(dir, f))
		require.NoError(t, err, "vdkcli create wrote VDK's template")
	}
	s.vdk(t, "deploy", "-n", name, "-t", team, "-p", dir, "-r", "first")
	s.waitBuilt(t, name)
	// The template names no python version: it gets the default, which /info lists first
	// of the versions this installation runs (issue 48, item 8: a client taking the first).
	var info struct {
		Versions []string `json:"supported_python_versions"`
	}
	s.getJSON(t, "/data-jobs/for-team/"+team+"/info", &info)
	var d struct {
		PythonVersion string `json:"python_version"`
	}
	s.getJSON(t, "/data-jobs/for-team/"+team+"/jobs/"+name+"/deployments/production", &d)
	require.NotEmpty(t, info.Versions)
	assert.Equal(t, info.Versions[0], d.PythonVersion, "deployed with the first version /info lists")
	assert.Contains(t, s.vdk(t, "show", "-n", name, "-t", team), name)
	id := s.start(t, name)
	e := s.waitStatus(t, name, id, 3*time.Minute, "succeeded", "user_error", "platform_error")
	// The README's last step: the logs of the latest run, without its id.
	logs := s.vdk(t, "execute", "--logs", "-n", name, "-t", team)
	require.Equal(t, "succeeded", e.Status, "%+v\nlog:\n%s", e, logs)
	assert.Contains(t, logs, "20_python_step.py - SUCCESS", "both steps ran")
	assert.Contains(t, logs, "Successful uploads: 1", "the python step's row went into SQLite")
}
