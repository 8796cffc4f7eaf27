package ui_test

import (
	"html"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/job"
)

// Issue 44: a target whose shard cannot run was told only by the /healthz detail and a
// metric of the replica running the shard. Now that replica writes it to the database
// and every page of every replica shows a banner: to an admin with the reason (escaped),
// to a member of a team whose jobs run there without it, to other teams not at all; and
// none once the shard runs again.
func TestABannerNamesAnUnreachableTargetToThoseItConcerns(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	ctx := t.Context()
	_, err := e.store.PutTarget(ctx, job.Target{Name: "far", Namespace: "jobs-far", KubeconfigSecret: "far-kubeconfig", DefaultFor: []string{"team-b"}})
	require.NoError(t, err)
	const reason = `connect to the cluster of target far: Get "https://far:6443/api": <b>refused</b>`
	require.NoError(t, e.store.ReportTargetUnreachable(ctx, "far", reason, time.Minute))
	const banner = "Execution target <strong>far</strong> is unreachable since"

	admin := e.provider.SignIn(t, e.browser(t).client, e.url+"/ui/", "root", "platform")
	require.Contains(t, admin, banner)
	assert.Contains(t, admin, html.EscapeString(reason), "an admin reads why, escaped")
	assert.NotContains(t, admin, "<b>refused</b>")
	assert.Contains(t, admin, "Changes to its jobs wait; other targets are unaffected.")

	teamB := e.browser(t)
	page := e.provider.SignIn(t, teamB.client, e.url+"/ui/", "bob", "team-b")
	require.Contains(t, page, banner, "team-b's jobs run there")
	assert.NotContains(t, page, "https://far:6443", "the cluster's error is the admins'")
	job := teamB.get("/ui/teams/team-b/jobs/job-of-b")
	require.Equal(t, 200, job.status)
	assert.Contains(t, job.body, banner, "every page carries it")

	teamA := e.provider.SignIn(t, e.browser(t).client, e.url+"/ui/", "alice", "team-a")
	assert.NotContains(t, teamA, "is unreachable since", "team-a's jobs do not run there")

	require.NoError(t, e.store.ReportTargetReachable(ctx, "far", 0))
	assert.NotContains(t, teamB.get("/ui/").body, "is unreachable since", "gone once the shard runs again")
}
