package ui_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/job"
)

// sql runs statements on the test database as the leader would write them.
func (e *env) sql(t *testing.T, query string, args ...any) {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), e.dbURL)
	require.NoError(t, err)
	defer conn.Close(context.WithoutCancel(t.Context()))
	_, err = conn.Exec(t.Context(), query, args...)
	require.NoError(t, err)
}

// The job page shows the run policy with what the deployment set and the defaults marked,
// the next runs on the clock of its time zone (named), and the jobs list says the schedule
// and next run in that zone too (guards: next runs shown in UTC, hours off, for a job whose
// CronJob reads its schedule in another zone; a default passed off as a choice).
func TestJobPageShowsRunPolicyAndNextRunsInItsTimeZone(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	cron, zone, retries := "0 9 * * *", "Europe/Sofia", int32(0)
	_, err := e.svc.PatchDeployment(t.Context(), "team-b", "job-of-b", job.DeploymentChange{
		Schedule: &cron, Policy: job.PolicyChange{TimeZone: &zone, Retries: &retries},
	}, "bob")
	require.NoError(t, err)
	sofia, err := time.LoadLocation(zone)
	require.NoError(t, err)
	now := time.Now().In(sofia)
	next := time.Date(now.Year(), now.Month(), now.Day(), 9, 0, 0, 0, sofia)
	if !next.After(now) {
		next = time.Date(now.Year(), now.Month(), now.Day()+1, 9, 0, 0, 0, sofia)
	}

	b := e.browser(t)
	page := b.get("/ui/teams/team-b/jobs/job-of-b")
	require.Equal(t, http.StatusOK, page.status, page.body)
	policy := section(t, page.body, `id="policy"`)
	for _, want := range []string{
		"<dt>Retries</dt><dd><code>0</code><br>", // set, so not marked
		`<dt>Timeout</dt><dd><code>12h (43200 s)</code> <span class="pill s-none default">default</span>`,
		`<dt>Concurrency</dt><dd><code>Forbid</code> <span class="pill s-none default">default</span>`,
		"<dt>Time zone</dt><dd><code>Europe/Sofia</code><br>",
		`<dt>Starting deadline</dt><dd><code>30m (1800 s)</code> <span class="pill s-none default">default</span>`,
		`<dt>Catch-up</dt><dd><code>0</code> <span class="pill s-none default">default</span>`,
		`in Europe/Sofia`,
		next.Format("2006-01-02") + " 09:00 Europe/Sofia",
		next.UTC().Format("2006-01-02 15:04:05 UTC"), // the same moment in UTC beside it
	} {
		assert.Contains(t, policy, want)
	}
	assert.NotContains(t, policy, next.Format("2006-01-02")+" 09:00 UTC")

	list := b.get("/ui/?q=job-of-b")
	require.Equal(t, http.StatusOK, list.status)
	assert.Contains(t, list.body, "daily at 09:00 Europe/Sofia")
	assert.Contains(t, list.body, `datetime="`+next.UTC().Format(time.RFC3339)+`"`, "the next run is when the CronJob fires in Sofia")
	assert.Contains(t, list.body, next.Format("2006-01-02")+" 09:00 Europe/Sofia")
}

// The job page lists the job's last notification events with their recipients and each
// delivery's state, as GET …/notifications does (guards: "will I hear when it fails?"
// unanswerable from the console; a failed delivery hidden).
func TestJobPageListsNotificationsWithDeliveryState(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	// As the tracker and the dispatcher write them: a deploy, then a failed run.
	e.sql(t, `INSERT INTO notification_event (key, kind, job_name, team, recipients, payload) VALUES
		('k0', 'deploy_succeeded', 'job-of-b', 'team-b', '{deploy@example.com}', '{"status":"synced","job_version":"v1-of-b"}'),
		('k9', 'deploy_succeeded', 'job-of-a', 'team-a', '{a@example.com}', '{"status":"synced","job_version":"v-of-a"}')`)
	e.sql(t, `WITH ev AS (INSERT INTO notification_event (key, kind, job_name, team, recipients, payload) VALUES
		('k1', 'execution_finished', 'job-of-b', 'team-b', '{oncall@example.com,lead@example.com}',
		 '{"status":"user_error","execution_id":"job-of-b-123","message":"division by zero"}')
		RETURNING id)
		INSERT INTO notification_delivery (event_id, channel, recipient, state, attempts, last_error, delivered_at)
		SELECT id, 'email', 'oncall@example.com', 'delivered', 1, '', now() FROM ev UNION ALL
		SELECT id, 'email', 'lead@example.com', 'bounced', 2, '550 no such mailbox', NULL FROM ev`)
	page := e.browser(t).get("/ui/teams/team-b/jobs/job-of-b")
	require.Equal(t, http.StatusOK, page.status, page.body)
	n := section(t, page.body, `id="notifications"`)
	for _, want := range []string{
		"execution user error", "execution job-of-b-123: division by zero", "oncall@example.com, lead@example.com",
		`<span class="pill d-delivered">delivered</span> email <code>oncall@example.com</code>`,
		`<span class="pill d-bounced">bounced</span> email <code>lead@example.com</code> <span class="small muted">2 attempts</span>`,
		"550 no such mailbox",
		"deploy succeeded", "version v1-of-b", "not yet dispatched",
	} {
		assert.Contains(t, n, want)
	}
	assert.Less(t, strings.Index(n, "execution user error"), strings.Index(n, "deploy succeeded"), "newest first")
	assert.NotContains(t, n, "a@example.com", "another job's events are not listed")
}

// The job page names the job's secrets and never shows a value (guards: a secret value in
// a page, which a screenshot or a shoulder would carry off).
func TestJobPageNamesSecretsWithoutTheirValues(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	const value = "hunter2-value-that-must-not-show"
	require.NoError(t, e.secrets.ReplaceJobSecrets(t.Context(), "team-b", "job-of-b", "bob",
		[]byte(`{"db_password":"`+value+`","api_key":"`+value+`-2"}`)))
	page := e.browser(t).get("/ui/teams/team-b/jobs/job-of-b")
	require.Equal(t, http.StatusOK, page.status, page.body)
	s := section(t, page.body, `id="secrets"`)
	assert.Contains(t, s, "<li><code>api_key</code></li><li><code>db_password</code></li>")
	assert.NotContains(t, page.body, value, "no secret value anywhere in the page")
	assert.NotContains(t, page.body, "hunter2")

	other := e.browser(t).get("/ui/teams/team-a/jobs/job-of-a")
	require.Equal(t, http.StatusOK, other.status)
	assert.Contains(t, section(t, other.body, `id="secrets"`), "No secrets.")
}

// section is the HTML of the page's <section> with attr, up to its end.
func section(t *testing.T, body, attr string) string {
	t.Helper()
	i := strings.Index(body, attr)
	require.GreaterOrEqual(t, i, 0, "the page has a section %s", attr)
	j := strings.Index(body[i:], "</section>")
	require.GreaterOrEqual(t, j, 0)
	return body[i : i+j]
}
