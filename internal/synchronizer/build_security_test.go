package synchronizer_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/synchronizer"
	"github.com/datajobs/datajobs/internal/testenv"
)

// Issue 22's attack: a team member's requirements.txt of ${DATAJOBS_DATABASE_URL} had the
// leader's pip expand the service's database URL into the deployment message, which the
// team reads through REST, GraphQL and the console. With the variable set in the
// service's environment, neither the refused line nor a requirement the real pip fails on
// can quote it. (t.Setenv: not parallel, so no other test runs meanwhile.)
func TestBuildADeploymentMessageNeverQuotesAServiceVariable(t *testing.T) {
	const secret = "postgres://datajobs:s3cr3t-password@db.internal:5432/datajobs"
	t.Setenv("DATAJOBS_DATABASE_URL", secret)
	b := newBuilds(t, testenv.Registry(t))
	for i, tc := range []struct{ behaviour, requirements, want string }{
		{"the variable is refused before pip runs", "${DATAJOBS_DATABASE_URL}\n", "line 1 is refused"},
		{"the variable hidden behind a \\r is refused", "tinypkg\r${DATAJOBS_DATABASE_URL}\n", "line 1 is refused"},
		{"the real pip's failure quotes pip, not the environment", "tinypkg==1.0\nnowheel==2.0\n", "pip says"},
	} {
		name := fmt.Sprintf("secret-%d", i)
		b.createJob(name)
		v := b.upload(name, map[string]string{"config.ini": "[owner]\n", "requirements.txt": tc.requirements})
		b.deploy(name, job.DeploymentChange{JobVersion: ptr(v), PythonVersion: ptr("3.11")})
		var d *job.Deployment
		b.eventually(func() bool {
			d = b.state(name).Desired
			return d.Status == job.StatusUserError
		}, tc.behaviour+": user_error recorded")
		assert.Contains(t, d.Message, tc.want, tc.behaviour)
		assert.NotContains(t, d.Message, "s3cr3t", tc.behaviour)
		assert.NotContains(t, d.Message, "db.internal", tc.behaviour)
	}
}

// A build that killed the leader (out of memory, a crash) never recorded a failure, and
// each new leader started it again at once: a poison build took every replica down in
// turn. Builds are counted when they start; a new leader waits the backoff of the count.
func TestBuildANewLeaderBacksOffABuildThatNeverEnded(t *testing.T) {
	t.Parallel()
	reg := testenv.Registry(t)
	b := newBuildsWith(t, reg, func(c *synchronizer.Config) { c.RetryBase, c.RetryMax = time.Second, time.Hour })
	b.createJob("poison")
	v := b.upload("poison", map[string]string{"config.ini": "[owner]\n"})
	j := b.state("poison").Job
	key := job.BuildKey{JobName: "poison", JobUID: j.UID, JobVersion: v, PythonVersion: "3.11", BaseImage: b.base}
	// Three leaders started the build and died with it.
	for n := 1; n <= 3; n++ {
		started, err := b.db.StartBuild(t.Context(), job.Fence{Epoch: b.epoch}, key)
		require.NoError(t, err)
		require.Equal(t, n, started)
	}
	stale, err := b.db.StartBuild(t.Context(), job.Fence{Epoch: b.epoch - 1}, key)
	require.NoError(t, err)
	assert.Zero(t, stale, "a deposed leader's start is not recorded")

	deployed := time.Now()
	b.deploy("poison", job.DeploymentChange{JobVersion: ptr(v), PythonVersion: ptr("3.11")})
	// 3 starts: 1s << 2 = 4s from the last start before the next.
	time.Sleep(2 * time.Second)
	assert.Zero(t, b.counter("datajobs_build_builds_total"), "no build within the backoff")
	assert.NotEqual(t, job.StatusBuilding, b.state("poison").Desired.Status)

	b.builtImage("poison", v)
	assert.GreaterOrEqual(t, time.Since(deployed), 3*time.Second, "built after the backoff")
	st := b.state("poison")
	assert.Zero(t, st.Build.Attempts, "a build that ended with an image forgets its starts")
}
