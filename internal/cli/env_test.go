package cli

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// The list the chart is checked against holds serve's own flags and the global ones, each
// with the variable flagsFromEnv reads.
func TestServeEnvListsServeAndGlobalFlags(t *testing.T) {
	byName := map[string]EnvFlag{}
	for _, f := range ServeEnv() {
		byName[f.Name] = f
	}
	require.Equal(t, "DATAJOBS_DATABASE_URL", byName["database-url"].Env)
	require.Equal(t, "DATAJOBS_LOG_LEVEL", byName["log-level"].Env)
	require.Equal(t, "stringSlice", byName["oidc-issuer-url"].Type)
	require.Equal(t, "127.0.0.1:8093", byName["admin-listen"].Default)
	require.NotContains(t, byName, "help")
}

// A variable of ServeEnv's list sets its flag when the command line does not.
func TestEnvironmentSetsServeFlags(t *testing.T) {
	t.Setenv("DATAJOBS_SYNC_MODE", "bogus")
	t.Setenv("DATAJOBS_DATABASE_URL", "postgres://127.0.0.1:1/x")
	root := newRootCommand(nil, nil)
	serve, _, err := root.Find([]string{"serve"})
	require.NoError(t, err)
	require.NoError(t, flagsFromEnv(serve))
	require.Equal(t, "bogus", serve.Flags().Lookup("sync-mode").Value.String())
	require.Equal(t, "postgres://127.0.0.1:1/x", serve.Flags().Lookup("database-url").Value.String())
}
