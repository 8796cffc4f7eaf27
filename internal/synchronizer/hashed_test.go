package synchronizer_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/job"
)

// TestACronJobRunsTheHashedScheduleResolved: a deployment whose schedule says H gets a
// CronJob with the job's own values (team-a/nightly-load: minute 48, hour 22, as
// job.TestHashedFieldsResolveToFixedValues pins them), and a synchronizer started again
// (a restart, a new leader) finds it as it is and writes nothing.
func TestACronJobRunsTheHashedScheduleResolved(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.createJob("nightly-load")
	f.deploy("nightly-load", job.DeploymentChange{JobVersion: ptr("v1"), Schedule: ptr("H H * * *")})
	f.start()
	f.synced("nightly-load")
	cj := f.cronJob("nightly-load")
	require.Equal(t, "48 22 * * *", cj.Spec.Schedule)

	f.stop()
	before := f.rowVersions("nightly-load")
	f.start()
	f.synced("nightly-load")
	require.Equal(t, cj.ResourceVersion, f.cronJob("nightly-load").ResourceVersion, "a restart resolves to the same schedule")
	require.Equal(t, before, f.rowVersions("nightly-load"))
}
