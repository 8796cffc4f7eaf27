package notify_test

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/controller"
	"github.com/datajobs/datajobs/internal/devenv"
	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/notify"
	"github.com/datajobs/datajobs/internal/notify/email"
	"github.com/datajobs/datajobs/internal/store"
	"github.com/datajobs/datajobs/internal/testenv"
)

// fixture is a database with the synchronizer's lease held, one job, a real Mailpit and
// a dispatcher whose clock the test moves.
type fixture struct {
	t     *testing.T
	dbURL string
	db    *store.Store
	mail  *devenv.Mailpit
	fence job.Fence
	job   job.Job
	d     *notify.Dispatcher

	mu  sync.Mutex
	now time.Time
}

func newFixture(t *testing.T, limit notify.RateLimit, allowed string, contacts job.Contacts) *fixture {
	t.Helper()
	f := &fixture{t: t, dbURL: testenv.DatabaseURL(t), mail: testenv.StartMailpit(t, allowed), now: time.Now()}
	ctx := t.Context()
	db, err := store.Open(ctx, store.Config{URL: f.dbURL})
	require.NoError(t, err)
	t.Cleanup(db.Close)
	f.db = db
	epoch, ok, err := f.db.TryAcquireLease(ctx, store.SyncLeaseName, "leader", time.Hour)
	require.NoError(t, err)
	require.True(t, ok)
	f.fence = job.Fence{Epoch: epoch}
	f.job, err = f.db.CreateJob(ctx, job.Job{Name: "nightly-load", Team: "team-a", Contacts: contacts, EnableExecutionNotifications: true})
	require.NoError(t, err)
	f.mailTo(f.mail, func(c *notify.Config) { c.RateLimit = limit })
	return f
}

// mailTo makes the fixture's dispatcher send e-mail to mail, with its configuration
// changed by opts.
func (f *fixture) mailTo(mail *devenv.Mailpit, opts ...func(*notify.Config)) {
	f.t.Helper()
	sender, err := email.New(email.Config{URL: "smtp://" + mail.SMTPAddr, From: "datajobs@example.com"})
	require.NoError(f.t, err)
	cfg := notify.Config{
		Channels:   map[string]notify.Channel{notify.ChannelEmail: sender},
		ConsoleURL: "https://datajobs.example.com", RetryBase: time.Second, RetryMax: time.Minute,
		Settings: controller.Settings{Now: func() time.Time { f.mu.Lock(); defer f.mu.Unlock(); return f.now }},
	}
	for _, o := range opts {
		o(&cfg)
	}
	f.d = notify.New(cfg, f.db)
}

func (f *fixture) advance(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now = f.now.Add(d)
}

func (f *fixture) pass() {
	f.t.Helper()
	require.NoError(f.t, f.d.Pass(f.t.Context(), f.fence))
}

// finish records a final status of a new run of the job, as the execution tracker does.
func (f *fixture) finish(id string, status job.ExecutionStatus, message, logs string) {
	f.t.Helper()
	f.finishOf(f.job, id, status, message, logs)
}

// finishOf records a final status of a new run of j.
func (f *fixture) finishOf(j job.Job, id string, status job.ExecutionStatus, message, logs string) {
	f.t.Helper()
	start := time.Now().Add(-time.Minute).UTC().Truncate(time.Second)
	end := start.Add(42 * time.Second)
	wrote, err := f.db.RecordExecutions(f.t.Context(), f.fence, []job.ExecutionUpdate{{
		ID: id, JobName: j.Name, JobUID: j.UID, Type: job.ExecScheduled, OpID: id,
		Status: status, Message: message, StartTime: &start, EndTime: &end, Log: &job.StoredLog{Logs: logs},
	}})
	require.NoError(f.t, err)
	require.True(f.t, wrote[0])
}

func (f *fixture) mails() []testenv.Mail { return testenv.Mails(f.t, f.mail.HTTPAddr) }

// A run ending user_error is one mail to the user-error contacts, with the message, the
// last lines of its log and a console link; delivering again (the next pass, a new
// leader's pass) sends no second mail. A deposed leader's pass sends nothing.
func TestAUserErrorRunIsOneMailWithItsMessageAndLogLines(t *testing.T) {
	t.Parallel()
	f := newFixture(t, notify.RateLimit{}, "", job.Contacts{NotifiedOnJobFailureUserError: []string{"Dev@Example.com"}})
	var logs strings.Builder
	for i := range 50 {
		logs.WriteString("step " + strings.Repeat("x", i%3) + " line-" + string(rune('A'+i%26)) + "\n")
	}
	logs.WriteString("ValueError: the input table is empty\n")
	f.finish("nightly-load-1", job.ExecUserError, "the job failed: exit code 1", logs.String())

	require.NoError(t, f.d.Pass(t.Context(), job.Fence{Epoch: f.fence.Epoch - 1}))
	require.Empty(t, f.mails(), "a deposed term delivers nothing")

	f.pass()
	f.pass()
	f.pass()
	mails := f.mails()
	require.Len(t, mails, 1)
	m := mails[0]
	require.Equal(t, "dev@example.com", m.To[0].Address)
	require.Contains(t, m.Subject, "nightly-load")
	require.Contains(t, m.Subject, "user_error")
	require.Contains(t, m.Text, "the job failed: exit code 1")
	require.Contains(t, m.Text, "ValueError: the input table is empty")
	require.Contains(t, m.Text, "Duration:      42s")
	require.Contains(t, m.Text, "https://datajobs.example.com/ui/teams/team-a/jobs/nightly-load")
	require.NotContains(t, m.Text, "line-A\n", "only the last 20 lines, not the first")
}

// SMTP down: the delivery waits and is retried with backoff, the dispatcher says it is
// failing; once the server is back the mail arrives, once.
func TestMailIsDeliveredOnceAfterTheSMTPServerWasDown(t *testing.T) {
	t.Parallel()
	f := newFixture(t, notify.RateLimit{}, "", job.Contacts{NotifiedOnJobSuccess: []string{"team@example.com"}})
	require.NoError(t, f.mail.Stop())
	f.finish("nightly-load-1", job.ExecSucceeded, "", "ok\n")
	f.pass()
	require.Contains(t, f.d.Failing(), notify.ChannelEmail)
	f.advance(30 * time.Second)
	f.pass() // still down
	require.NoError(t, f.mail.Start(t.Context()))
	f.pass() // not due yet: the backoff doubled
	require.Empty(t, f.mails())
	f.advance(time.Minute)
	f.pass()
	f.advance(time.Hour)
	f.pass()
	require.Len(t, f.mails(), 1)
	require.Empty(t, f.d.Failing())
}

// A recipient the server refuses permanently is not retried; the others get their mail.
func TestAPermanentBounceIsNotRetried(t *testing.T) {
	t.Parallel()
	f := newFixture(t, notify.RateLimit{}, "^ok@example\\.com$", job.Contacts{NotifiedOnJobSuccess: []string{"ok@example.com", "gone@example.com"}})
	f.finish("nightly-load-1", job.ExecSucceeded, "", "ok\n")
	for range 3 {
		f.pass()
		f.advance(time.Hour)
	}
	mails := f.mails()
	require.Len(t, mails, 1)
	require.Equal(t, "ok@example.com", mails[0].To[0].Address)
	_, deliveries, err := f.db.JobNotifications(t.Context(), "team-a", "nightly-load", 10)
	require.NoError(t, err)
	states := map[string]string{}
	for _, ds := range deliveries {
		for _, d := range ds {
			states[d.Recipient] = d.State + "/" + string(rune('0'+d.Attempts))
		}
	}
	require.Equal(t, map[string]string{"ok@example.com": "delivered/1", "gone@example.com": "bounced/1"}, states)
}

// A job failing every minute for ten minutes sends a bounded number of mails: the first
// ones under the rate limit, and in the next window as many again, the last of them a
// digest of the rest (at most Messages mails per Window, whatever the failure rate).
func TestAJobFailingEveryMinuteSendsADigestNotAMailPerRun(t *testing.T) {
	t.Parallel()
	f := newFixture(t, notify.RateLimit{Messages: 3, Window: time.Hour}, "", job.Contacts{NotifiedOnJobFailurePlatformError: []string{"oncall@example.com"}})
	for i := range 10 {
		f.finish("nightly-load-"+string(rune('a'+i)), job.ExecPlatformError, "node lost", "")
		f.pass()
		f.advance(time.Minute)
	}
	require.Len(t, f.mails(), 3, "three mails under the limit, the other seven wait")
	f.advance(time.Hour)
	f.pass()
	mails := f.mails()
	require.Len(t, mails, 6, "the next window's three: two runs of their own and a digest of the other five")
	// The window's three are sent at once (deliveries run in parallel), so they arrive in
	// any order (a .ci/run saw the digest second): one of the newest three is the digest.
	var digests []string
	for _, m := range mails[:3] {
		if strings.Contains(m.Subject, "digest: 5 notifications") {
			digests = append(digests, m.Text)
		}
	}
	require.Len(t, digests, 1, "one digest among the next window's three mails")
	require.Equal(t, 5, strings.Count(digests[0], "=== [datajobs] nightly-load: execution"))
	f.advance(24 * time.Hour)
	f.pass()
	require.Len(t, f.mails(), 6, "nothing is sent twice")
}

// A team's webhook answering 500 and then 200 gets the event twice under one webhook-id,
// each signature verified by a receiver using the Standard Webhooks library (with the
// secret the dispatcher opened from its sealed envelope), and never a third time once it
// answered 200.
func TestAWebhookAnswering500Then200GetsTheEventOnceSigned(t *testing.T) {
	t.Parallel()
	f := newFixture(t, notify.RateLimit{}, "", job.Contacts{})
	received := f.withWebhook("500,200", 0)
	f.finish("nightly-load-1", job.ExecUserError, "exit 1", "boom\n")
	for range 4 {
		f.pass()
		f.advance(time.Minute)
	}
	got := received()
	require.Len(t, got, 2)
	require.Equal(t, []int{500, 200}, []int{got[0].Status, got[1].Status})
	require.True(t, got[0].Verified && got[1].Verified, "signed as Standard Webhooks specify: %+v", got)
	require.Equal(t, got[0].ID, got[1].ID, "one webhook-id for both attempts")
	require.Contains(t, got[1].Body, `"execution_user_error"`)
	require.Contains(t, got[1].Body, `"nightly-load"`)
}
