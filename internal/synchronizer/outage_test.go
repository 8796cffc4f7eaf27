package synchronizer_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/job"
)

func TestListenerReconnectsAfterItsConnectionIsKilled(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.createJob("before-drop")
	f.deploy("before-drop", job.DeploymentChange{JobVersion: ptr("v1")})
	f.start()
	f.synced("before-drop")

	// Kill the synchronizer's LISTEN connection, as a proxy restart or a failover would.
	// The term's first pass can sync before that connection listens (the test found none
	// to kill with a benchmark running beside it): kill it once it is there.
	conn, err := pgx.Connect(t.Context(), f.dbURL)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	f.eventually(func() bool {
		var killed int
		require.NoError(t, conn.QueryRow(t.Context(), `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
			WHERE datname = current_database() AND query LIKE 'LISTEN%'`).Scan(&killed))
		require.LessOrEqual(t, killed, 1)
		return killed == 1
	}, "the LISTEN connection killed")

	// The resync interval is an hour here: only a re-LISTEN (and the pass it triggers for
	// what was missed meanwhile) can bring these changes to the cluster.
	f.createJob("after-drop")
	f.deploy("after-drop", job.DeploymentChange{JobVersion: ptr("v1")})
	f.synced("after-drop")
	f.patch("before-drop", job.DeploymentChange{Enabled: ptr(false)})
	f.eventually(func() bool { return *f.cronJob("before-drop").Spec.Suspend }, "change after the drop applied")
}
