package e2e

import (
	"os"
	"os/exec"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/testenv"
)

// datajobsOn runs the binary with args on the database at dbURL and returns its output
// and exit error.
func datajobsOn(t *testing.T, dbURL string, args ...string) (string, error) {
	t.Helper()
	bin, err := testenv.Binary()
	require.NoError(t, err)
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "DATAJOBS_DATABASE_URL="+dbURL)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// The one-shot commands on the database: `migrate` on an empty database applies every
// migration once; `notifications suppressions` lists a bounced recipient and
// `notifications unsuppress` lifts it, and says so when there is nothing to lift.
func TestMigrateAndTheSuppressionCommandsWorkOnTheDatabaseTheyAreGiven(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dbURL := testenv.DatabaseURL(t)
	conn, err := pgx.Connect(ctx, dbURL)
	require.NoError(t, err)
	defer func() { _ = conn.Close(ctx) }()
	_, err = conn.Exec(ctx, `DROP SCHEMA public CASCADE; CREATE SCHEMA public`)
	require.NoError(t, err)

	out, err := datajobsOn(t, dbURL, "migrate")
	require.NoError(t, err, out)
	require.Regexp(t, `^applied [1-9][0-9]* migrations \[1 2 3 .* [0-9]+\]\n$`, out)
	out, err = datajobsOn(t, dbURL, "migrate")
	require.NoError(t, err, out)
	require.Equal(t, "applied 0 migrations []\n", out)

	out, err = datajobsOn(t, dbURL, "notifications", "unsuppress", "Ann@Example.org")
	require.Error(t, err)
	require.Contains(t, out, "ann@example.org is not suppressed")

	_, err = conn.Exec(ctx, `INSERT INTO notification_suppression (channel, recipient, reason, event_id, created_at)
VALUES ('email', 'ann@example.org', '550 no such user', 1, '2026-12-01T10:00:00Z')`)
	require.NoError(t, err)
	out, err = datajobsOn(t, dbURL, "notifications", "suppressions")
	require.NoError(t, err, out)
	require.Equal(t, "ann@example.org\tsince 2026-12-01T10:00:00Z\tuntil removed\t550 no such user\n", out)

	out, err = datajobsOn(t, dbURL, "notifications", "unsuppress", " Ann@Example.org ")
	require.NoError(t, err, out)
	require.Equal(t, "ann@example.org is no longer suppressed\n", out)
	out, err = datajobsOn(t, dbURL, "notifications", "suppressions")
	require.NoError(t, err, out)
	require.Empty(t, out)
}
