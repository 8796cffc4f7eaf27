package devenv_test

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/devenv"
)

// occupy binds a port of 127.0.0.1 for the test's duration, as another environment that
// picked the same port a moment earlier would, and returns it.
func occupy(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	return l.Addr().(*net.TCPAddr).Port
}

func logSays(t *testing.T, path, s string) bool {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return strings.Contains(strings.ToLower(string(b)), s)
}

// TestAComponentWhosePickedPortWasTakenStartsOnAnother guards parallel environments (a
// .ci/run saw "Address already in use" with three test binaries starting at once): a port
// is picked free and handed to the child, and another process can bind it in between.
// Here it is bound before the start, as the loser of that race finds it: PostgreSQL,
// the registry and Mailpit each exit "address already in use" on it, and start on another.
func TestAComponentWhosePickedPortWasTakenStartsOnAnother(t *testing.T) {
	t.Parallel()
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		taken, dir := occupy(t), t.TempDir()
		log := filepath.Join(dir, "postgres.log")
		pg, err := devenv.StartPostgres(t.Context(), devenv.PostgresConfig{Dir: filepath.Join(dir, "pg"), LogPath: log, Port: taken, Fast: true})
		require.NoError(t, err)
		t.Cleanup(func() { assert.NoError(t, pg.Stop()) })
		assert.NotEqual(t, taken, pg.Port)
		require.NoError(t, ping(t.Context(), pg.URL(devenv.DatabaseName)), "it serves on its new port")
		assert.True(t, logSays(t, log, "address already in use"), "the first start lost the port")
	})
	t.Run("registry", func(t *testing.T) {
		t.Parallel()
		bin := devenv.RegistryBinary()
		if bin == "" {
			t.Skip("the registry is not built: bash hack/registry/build.sh")
		}
		taken, dir := occupy(t), t.TempDir()
		log := filepath.Join(dir, "registry.log")
		reg, err := devenv.StartRegistry(t.Context(), devenv.RegistryConfig{Bin: bin, Dir: dir, LogPath: log, Port: taken})
		require.NoError(t, err)
		t.Cleanup(func() { assert.NoError(t, reg.Stop()) })
		assert.NotEqual(t, "127.0.0.1:"+strconv.Itoa(taken), reg.Addr)
		assert.True(t, logSays(t, log, "address already in use"), "the first start lost the port")
	})
	t.Run("mailpit", func(t *testing.T) {
		t.Parallel()
		root, err := devenv.RepoRoot()
		require.NoError(t, err)
		bin, err := devenv.EnsureMailpitBinary(t.Context(), root, nil)
		require.NoError(t, err)
		taken, dir := occupy(t), t.TempDir()
		log := filepath.Join(dir, "mailpit.log")
		m, err := devenv.StartMailpit(t.Context(), devenv.MailpitConfig{Bin: bin, Dir: dir, LogPath: log, SMTPPort: taken})
		require.NoError(t, err)
		t.Cleanup(func() { assert.NoError(t, m.Stop()) })
		assert.NotEqual(t, "127.0.0.1:"+strconv.Itoa(taken), m.SMTPAddr)
		assert.True(t, logSays(t, log, "address already in use"), "the first start lost the port")
	})
}
