package cli

import (
	"bytes"
	"context"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/devenv"
	"github.com/datajobs/datajobs/internal/store"
)

func devStateDir(t *testing.T) string {
	return filepath.Join(t.TempDir(), "state")
}

// runDev runs `datajobs dev` in-process. Unless args choose addresses, it serves on free
// ports: 8092 may be another session's.
func runDev(ctx context.Context, serve ServeFunc, args ...string) (string, error) {
	if !slices.Contains(args, "--listen") {
		args = append(args, "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0")
	}
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

// TestDevRefusesATakenAddressBeforeStartingAnything guards the new user's first minute: a
// second `make dev` (or anything on 8092) must fail at once, naming who holds the port,
// instead of starting the whole environment and failing to serve.
func TestDevRefusesATakenAddressBeforeStartingAnything(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	state := devStateDir(t)
	_, err = runDev(t.Context(), nil, "--state-dir", state, "--listen", l.Addr().String(), "--admin-listen", "127.0.0.1:0")
	require.ErrorContains(t, err, l.Addr().String()+" is in use by pid "+strconv.Itoa(os.Getpid())+" (")
	require.ErrorContains(t, err, "--listen")
	require.NoDirExists(t, state, "nothing was started")
}

func TestDevRefusesAnUnknownNode(t *testing.T) {
	t.Parallel()
	_, err := runDev(t.Context(), nil, "--state-dir", devStateDir(t), "--node", "fake")
	require.ErrorContains(t, err, `--node "fake": must be auto, kwok, real or both`)
}

// TestDevStopsOnSIGHUP guards a closed terminal: the environment stops as on Ctrl-C
// (everything stopped, the env file removed), rather than dying and leaving its children.
// Not parallel: the signal goes to the whole test process.
func TestDevStopsOnSIGHUP(t *testing.T) {
	envFile := filepath.Join(t.TempDir(), "test.env")
	done := make(chan error, 1)
	go func() {
		_, err := runDev(t.Context(), nil, "--state-dir", devStateDir(t), "--controllers=false", "--fast", "--env-only", "--env-file", envFile)
		done <- err
	}()
	require.Eventually(t, func() bool { _, err := os.Stat(envFile); return err == nil }, 5*time.Minute, 50*time.Millisecond)
	require.NoError(t, syscall.Kill(os.Getpid(), syscall.SIGHUP))
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(time.Minute):
		t.Fatal("dev did not stop on SIGHUP")
	}
	require.NoFileExists(t, envFile, "stopped gracefully: the env file is removed")
}

// TestDevWithoutARealNodeKeepsKwokAndSaysSoInOneLine guards a user who is not root: dev
// still starts, on kwok, and the first thing it prints says that pods will not run, and
// why; asking for the real node explicitly fails instead.
func TestDevWithoutARealNodeKeepsKwokAndSaysSoInOneLine(t *testing.T) {
	t.Parallel()
	const why = "a real node needs root (the kubelet refuses other users)"
	var out bytes.Buffer
	kind, err := devNode(devFlags{node: "auto", controllers: true}, why, &out)
	require.NoError(t, err)
	require.Equal(t, devenv.NodeKwok, kind)
	require.Equal(t, "node: kwok's fake node: pods are not run, "+why+"\n", out.String())

	_, err = devNode(devFlags{node: "real", controllers: true}, why, &out)
	require.ErrorContains(t, err, "--node real: "+why)

	out.Reset()
	kind, err = devNode(devFlags{node: "auto", controllers: true, envOnly: true}, "", &out)
	require.NoError(t, err)
	require.Equal(t, devenv.NodeBoth, kind, "the tests' environment as root: kwok and the real node")
	require.Empty(t, out.String())
}
