package cli

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/store"
)

func devStateDir(t *testing.T) string {
	return filepath.Join(t.TempDir(), "state")
}

func runDev(ctx context.Context, serve ServeFunc, args ...string) (string, error) {
	var out bytes.Buffer
	cmd := newDevCommand(serve)
	cmd.SetArgs(args)
	cmd.SetOut(&out)
	cmd.SetErr(io.Discard)
	err := cmd.ExecuteContext(ctx)
	return out.String(), err
}

func TestDevServesAgainstTheEnvironmentAndKeepsDataAcrossRuns(t *testing.T) {
	t.Parallel()
	state := devStateDir(t)
	var dbURL string
	// The first run creates a table, as the service's migrations would.
	out, err := runDev(t.Context(), func(ctx context.Context, databaseURL, kubeconfig string, _ io.Writer) error {
		dbURL = databaseURL
		kc, err := os.ReadFile(kubeconfig)
		if err != nil {
			return err
		}
		if !strings.Contains(string(kc), "server: https://127.0.0.1:") {
			return assert.AnError
		}
		s, err := store.Open(ctx, store.Config{URL: databaseURL})
		if err != nil {
			return err
		}
		defer s.Close()
		return s.InTx(ctx, func(tx store.Tx) error {
			_, err := tx.Exec(ctx, `CREATE TABLE kept (v text); INSERT INTO kept VALUES ('hello')`)
			return err
		})
	}, "--state-dir", state, "--controllers=false", "--fast")
	require.NoError(t, err)
	require.Contains(t, out, "export KUBECONFIG="+filepath.Join(state, "kubeconfig"))
	require.Contains(t, out, "kubectl --kubeconfig "+filepath.Join(state, "kubeconfig")+" get ns")

	// Once serve returned, everything is stopped.
	s, err := store.Open(t.Context(), store.Config{URL: dbURL})
	require.NoError(t, err)
	require.Error(t, s.Ping(t.Context()))
	s.Close()

	// The second run finds the data.
	_, err = runDev(t.Context(), func(ctx context.Context, databaseURL, _ string, _ io.Writer) error {
		s, err := store.Open(ctx, store.Config{URL: databaseURL})
		if err != nil {
			return err
		}
		defer s.Close()
		var v string
		err = s.InTx(ctx, func(tx store.Tx) error { return tx.QueryRow(ctx, `SELECT v FROM kept`).Scan(&v) })
		if err == nil && v != "hello" {
			err = assert.AnError
		}
		return err
	}, "--state-dir", state, "--controllers=false", "--fast")
	require.NoError(t, err)
}

func TestDevEnvOnlyWritesTheEnvFileAndStopsOnCancel(t *testing.T) {
	t.Parallel()
	envFile := filepath.Join(t.TempDir(), "test.env")
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := runDev(ctx, func(context.Context, string, string, io.Writer) error {
			return assert.AnError // never called with --env-only
		}, "--state-dir", devStateDir(t), "--controllers=false", "--fast", "--env-only", "--env-file", envFile)
		done <- err
	}()

	var vars map[string]string
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		b, err := os.ReadFile(envFile)
		require.NoError(c, err)
		vars = map[string]string{}
		for line := range strings.Lines(string(b)) {
			k, v, _ := strings.Cut(strings.TrimSpace(line), "=")
			vars[k] = v
		}
	}, 5*time.Minute, 50*time.Millisecond)
	require.FileExists(t, vars["DATAJOBS_TEST_KUBECONFIG"])
	s, err := store.Open(t.Context(), store.Config{URL: vars["DATAJOBS_TEST_DATABASE_URL"]})
	require.NoError(t, err)
	defer s.Close()
	require.NoError(t, s.Ping(t.Context()))

	cancel()
	require.NoError(t, <-done)
	require.NoFileExists(t, envFile)
	require.Error(t, s.Ping(t.Context()))
}

func TestDevEnvFileNeedsEnvOnly(t *testing.T) {
	t.Parallel()
	_, err := runDev(t.Context(), nil, "--env-file", "x.env")
	require.ErrorContains(t, err, "--env-file needs --env-only")
}
