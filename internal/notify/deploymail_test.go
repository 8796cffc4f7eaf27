package notify_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/notify"
	"github.com/datajobs/datajobs/internal/testenv"
)

// deploy changes the fixture job's deployment as alice, records its sync as the
// synchronizer does and delivers; it returns the mail that the sync sent.
func (f *fixture) deploy(change func(d *job.Deployment)) testenv.Mail {
	f.t.Helper()
	s := f.change(change)
	ctx := f.t.Context()
	wrote, err := f.db.RecordAppliedAll(ctx, f.fence, []job.ActualDeployment{{
		JobName: s.Name, JobUID: s.Job.UID, Generation: s.Job.Generation, Team: s.Job.Team,
		DeploymentVersionSHA: "sha-" + s.Desired.JobVersion, JobVersion: s.Desired.JobVersion,
		PythonVersion: s.Desired.PythonVersion, Enabled: s.Desired.Enabled, DeployedBy: "alice",
		DeployedDate: time.Now(), CronJobGeneration: 1, CronJobUID: "cj",
	}})
	require.NoError(f.t, err)
	require.True(f.t, wrote[0])
	return f.newMail()
}

// change changes the fixture job's deployment as alice and returns its sync state.
func (f *fixture) change(change func(d *job.Deployment)) job.SyncState {
	f.t.Helper()
	ctx := job.WithActor(f.t.Context(), job.Actor{User: "alice"})
	_, err := f.db.ChangeDeployment(ctx, f.job.Team, f.job.Name, func(_ job.Job, cur *job.Deployment) (job.Deployment, error) {
		d := job.Deployment{JobVersion: "v1", PythonVersion: "3.11", Enabled: true, DeployedBy: "alice", DeployedDate: time.Now()}
		if cur != nil {
			d = *cur
		}
		change(&d)
		return d, nil
	})
	require.NoError(f.t, err)
	s, err := f.db.LoadSyncState(ctx, f.job.Name)
	require.NoError(f.t, err)
	return s
}

// newMail delivers and returns the one new mail.
func (f *fixture) newMail() testenv.Mail {
	f.t.Helper()
	before := len(f.mails())
	f.pass()
	mails := f.mails()
	require.Len(f.t, mails, before+1, "one mail per change")
	return mails[0]
}

// Disable, enable, a policy change and a new version each send a deployment mail that
// says what changed (the revisions since the last one, field by field): before, all four
// were the same "deployed" mail.
func TestADeploymentMailSaysWhatChanged(t *testing.T) {
	t.Parallel()
	f := newFixture(t, notify.RateLimit{}, "", job.Contacts{NotifiedOnJobDeploy: []string{"ops@example.com"}})
	first := f.deploy(func(*job.Deployment) {})
	require.Equal(t, "[datajobs] nightly-load deployed (version v1)", first.Subject)
	require.Contains(t, first.Text, "create by system")
	require.Contains(t, first.Text, `deployment.job_version: null -> "v1"`)

	retries := int32(0)
	for _, c := range []struct {
		change  func(d *job.Deployment)
		subject string
		text    string
	}{
		{func(d *job.Deployment) { d.Enabled = false }, "[datajobs] nightly-load disabled (version v1)", "deployment.enabled: true -> false"},
		{func(d *job.Deployment) { d.Enabled = true }, "[datajobs] nightly-load enabled (version v1)", "deployment.enabled: false -> true"},
		{func(d *job.Deployment) { d.Policy.Retries = &retries }, "[datajobs] nightly-load changed: policy.retries (version v1)", "deployment.policy.retries: null -> 0"},
		{func(d *job.Deployment) { d.JobVersion = "v2" }, "[datajobs] nightly-load deployed (version v2)", `deployment.job_version: "v1" -> "v2"`},
	} {
		m := f.deploy(c.change)
		require.Equal(t, c.subject, m.Subject)
		require.Contains(t, m.Text, "What changed since the job's last deployment that went live:")
		require.Contains(t, m.Text, "deploy by alice")
		require.Contains(t, m.Text, c.text)
		require.NotContains(t, m.Text, "create by", "only the revisions since the previous mail")
	}

	// A deploy that fails says what failed to go live; the fix that then goes live lists
	// both changes since the last success.
	s := f.change(func(d *job.Deployment) { d.Schedule = "not a cron" })
	_, err := f.db.RecordUnappliedStatus(t.Context(), f.fence, s.Name, s.Job.UID, s.Job.Generation, job.StatusUserError, "bad schedule")
	require.NoError(t, err)
	m := f.newMail()
	require.Equal(t, "[datajobs] nightly-load: deployment failed (user_error)", m.Subject)
	require.Contains(t, m.Text, `deployment.schedule: "" -> "not a cron"`)
	m = f.deploy(func(d *job.Deployment) { d.Schedule = "0 3 * * *" })
	require.Equal(t, "[datajobs] nightly-load changed: schedule (version v2)", m.Subject)
	require.Contains(t, m.Text, `deployment.schedule: "" -> "not a cron"`)
	require.Contains(t, m.Text, `deployment.schedule: "not a cron" -> "0 3 * * *"`)
}
