package notify_test

import (
	"context"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/maintenance"
	"github.com/datajobs/datajobs/internal/notify"
	"github.com/datajobs/datajobs/internal/notify/email"
	"github.com/datajobs/datajobs/internal/notify/webhook"
	"github.com/datajobs/datajobs/internal/secrets"
	"github.com/datajobs/datajobs/internal/testenv"
)

// blackHole accepts TCP connections and never answers; it returns its URL.
func blackHole(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var (
		mu    sync.Mutex
		conns []net.Conn
		wg    sync.WaitGroup
	)
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	})
	t.Cleanup(func() {
		_ = ln.Close()
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return "http://" + ln.Addr().String() + "/hook"
}

// H1 (issue 41): team A's 20 webhooks at a receiver that accepts and never answers, with
// events due for all of them, do not hold team B's failure mail: it is delivered within
// 5 s, the dispatcher running as the leader's maintenance runs it. Fails on the
// dispatcher before the fix (8 workers for all teams and channels, a pass waiting for
// its slowest message: the mail waited behind 200 webhook attempts of 10 s each).
func TestAnotherTeamsHangingWebhooksDoNotHoldAMail(t *testing.T) {
	t.Parallel()
	f := newFixture(t, notify.RateLimit{}, "", job.Contacts{})
	ctx := t.Context()
	keys, err := secrets.LoadKeyring(testenv.SecretsKeyFile(t))
	require.NoError(t, err)
	url := blackHole(t)
	for i := range 20 {
		key, err := webhook.GenerateSecret()
		require.NoError(t, err)
		_, err = f.db.CreateTeamWebhook(ctx, job.TeamWebhook{
			Team: "team-a", Name: "hook-" + strconv.Itoa(i), URL: url, Format: webhook.FormatStandard, Events: job.WebhookEvents, CreatedBy: "me",
		}, func(id string) (secrets.Envelope, error) { return keys.Seal(secrets.WebhookOwner(id), key) })
		require.NoError(t, err)
	}
	for i := range 10 {
		f.finish("nightly-load-"+strconv.Itoa(i), job.ExecUserError, "exit 1", "boom\n")
	}
	other, err := f.db.CreateJob(ctx, job.Job{
		Name: "billing", Team: "team-b", EnableExecutionNotifications: true,
		Contacts: job.Contacts{NotifiedOnJobFailureUserError: []string{"team-b@example.com"}},
	})
	require.NoError(t, err)
	f.finishOf(other, "billing-1", job.ExecUserError, "exit 1", "boom\n")

	sender, err := email.New(email.Config{URL: "smtp://" + f.mail.SMTPAddr, From: "datajobs@example.com"})
	require.NoError(t, err)
	hooks := &notify.Webhooks{Sender: webhook.NewSender(webhook.Config{AllowPrivate: true}), Store: f.db, Keys: keys}
	d := notify.New(notify.Config{
		Channels: map[string]notify.Channel{notify.ChannelEmail: sender, notify.ChannelWebhook: hooks}, Targets: hooks.Targets,
	}, f.db)
	runCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	t.Cleanup(wg.Wait)
	t.Cleanup(stop)
	start := time.Now()
	wg.Go(func() { _ = maintenance.New(maintenance.Config{}, maintenance.Dispatch(d)).Run(runCtx, f.fence.Epoch) })
	require.Eventually(t, func() bool {
		for _, m := range f.mails() {
			if m.To[0].Address == "team-b@example.com" {
				return true
			}
		}
		return false
	}, 5*time.Second, 100*time.Millisecond, "team B's mail within 5 s, whatever team A's webhooks do")
	t.Logf("team B's mail delivered after %s", time.Since(start).Round(time.Millisecond))
}

// With the recipient's budget spent on a success, the next success waits and its
// delivery says why, while a failure (issue 48 item 4: failures never wait behind
// successes) and another team's mail to the same address (L2, issue 41: the budget is
// per team and recipient) are sent at once. Fails on the dispatcher before the fix,
// whose one budget per recipient held both.
func TestAFailureAndAnotherTeamsMailDoNotWaitBehindASpentBudget(t *testing.T) {
	t.Parallel()
	shared := "shared@example.com"
	f := newFixture(t, notify.RateLimit{Messages: 1, Window: time.Hour}, "", job.Contacts{
		NotifiedOnJobSuccess: []string{shared}, NotifiedOnJobFailureUserError: []string{shared},
	})
	other, err := f.db.CreateJob(t.Context(), job.Job{
		Name: "billing", Team: "team-b", EnableExecutionNotifications: true,
		Contacts: job.Contacts{NotifiedOnJobSuccess: []string{shared}},
	})
	require.NoError(t, err)
	f.finish("nightly-load-1", job.ExecSucceeded, "", "ok\n")
	f.pass()
	require.Len(t, f.mails(), 1, "the success spends team A's budget")
	f.finish("nightly-load-2", job.ExecSucceeded, "", "ok\n")
	f.pass()
	require.Len(t, f.mails(), 1, "the next success waits")
	f.finish("nightly-load-3", job.ExecUserError, "exit 1", "boom\n")
	f.finishOf(other, "billing-1", job.ExecSucceeded, "", "ok\n")
	f.pass()
	var subjects []string
	for _, m := range f.mails() {
		subjects = append(subjects, m.Subject)
	}
	require.Len(t, subjects, 3, "the failure and team B's success are sent: %v", subjects)
	require.Contains(t, strings.Join(subjects, "\n"), "nightly-load: execution nightly-load-3 user_error")
	require.Contains(t, strings.Join(subjects, "\n"), "billing: execution billing-1 succeeded")
	_, deliveries, err := f.db.JobNotifications(t.Context(), "team-a", "nightly-load", 10)
	require.NoError(t, err)
	var held string
	for _, ds := range deliveries {
		for _, d := range ds {
			if d.State == job.DeliveryPending {
				held = d.LastError
			}
		}
	}
	require.Contains(t, held, "held by the rate limit", "a held mail says why")
}
