package notify_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/controller"
	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/notify"
	"github.com/datajobs/datajobs/internal/notify/webhook"
	"github.com/datajobs/datajobs/internal/secrets"
	"github.com/datajobs/datajobs/internal/testenv"
)

// withWebhook gives the fixture's team a webhook at a real receiver (answering statuses,
// testenv.StartWebhookReceiver) whose secret is sealed with a key file, and makes the
// dispatcher deliver to it alone (maxAge 0: the default). It returns what the receiver
// got.
func (f *fixture) withWebhook(statuses string, maxAge time.Duration) func() []testenv.WebhookRequest {
	t := f.t
	key, err := webhook.GenerateSecret()
	require.NoError(t, err)
	url, received := testenv.StartWebhookReceiver(t, webhook.EncodeSecret(key), statuses)
	keys, err := secrets.LoadKeyring(testenv.SecretsKeyFile(t))
	require.NoError(t, err)
	_, err = f.db.CreateTeamWebhook(t.Context(), job.TeamWebhook{
		Team: "team-a", Name: "ops", URL: url, Format: webhook.FormatStandard, Events: job.WebhookEvents, CreatedBy: "me",
	}, func(id string) (secrets.Envelope, error) { return keys.Seal(secrets.WebhookOwner(id), key) })
	require.NoError(t, err)
	hooks := &notify.Webhooks{Sender: webhook.NewSender(webhook.Config{AllowPrivate: true}), Store: f.db, Keys: keys}
	f.d = notify.New(notify.Config{
		Channels: map[string]notify.Channel{notify.ChannelWebhook: hooks}, Targets: hooks.Targets,
		RetryBase: time.Second, MaxAge: maxAge, Settings: controller.Settings{Now: func() time.Time { f.mu.Lock(); defer f.mu.Unlock(); return f.now }},
	}, f.db)
	return received
}

// A receiver answering 429 with Retry-After in seconds, then 503 with Retry-After as an
// HTTP date, then 429 asking for two hours, is not tried again before each wait it asked
// for (the dispatcher's own backoff would retry after a second), and the wait past the
// event's maximum age (20 minutes here) is cut to it: the last attempt is at the maximum
// age, and delivers. Guards a dispatcher that hammers a receiver asking it to back off,
// or that lets a long Retry-After outlive the event.
func TestAWebhooksRetryAfterIsWaitedForUpToTheMaxAge(t *testing.T) {
	t.Parallel()
	f := newFixture(t, notify.RateLimit{}, "", job.Contacts{})
	received := f.withWebhook("429:120,503:date+600,429:7200,200", 20*time.Minute)
	f.finish("nightly-load-1", job.ExecUserError, "exit 1", "boom\n")
	attempts := func() int { return len(received()) }

	f.pass()
	require.Equal(t, 1, attempts(), "the first attempt: 429, Retry-After: 120")
	f.advance(110 * time.Second)
	f.pass()
	require.Equal(t, 1, attempts(), "110 s after a Retry-After of 120 s: not yet")
	f.advance(15 * time.Second)
	f.pass()
	require.Equal(t, 2, attempts(), "after 125 s: the second attempt, 503 with an HTTP date 600 s ahead")

	f.advance(580 * time.Second)
	f.pass()
	require.Equal(t, 2, attempts(), "580 s after a Retry-After date 600 s ahead: not yet")
	f.advance(25 * time.Second)
	f.pass()
	require.Equal(t, 3, attempts(), "after 605 s: the third attempt, 429 asking for 2 h")

	// Now about 730 s after the event; its maximum age ends at 1200 s.
	f.advance(400 * time.Second)
	f.pass()
	require.Equal(t, 3, attempts(), "before the maximum age: not yet")
	f.advance(90 * time.Second)
	f.pass()
	got := received()
	require.Len(t, got, 4, "at the maximum age, not 2 h later: the last attempt")
	require.Equal(t, []int{429, 503, 429, 200}, []int{got[0].Status, got[1].Status, got[2].Status, got[3].Status})
	for _, g := range got {
		require.True(t, g.Verified, "signed: %+v", g)
		require.Equal(t, got[0].ID, g.ID, "one webhook-id for every attempt")
	}
	f.advance(time.Hour)
	f.pass()
	require.Len(t, received(), 4, "delivered: never sent again")
}
