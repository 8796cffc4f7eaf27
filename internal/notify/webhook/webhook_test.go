package webhook_test

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/notify/webhook"
)

func message(id string) webhook.Message {
	return webhook.Message{
		ID:        id,
		Type:      "execution.failed",
		Timestamp: time.Date(2026, 12, 1, 13, 0, 0, 0, time.UTC),
		Payload:   json.RawMessage(`{"job":"daily-sales","status":"user_error"}`),
		Text:      "daily-sales failed: user_error",
	}
}

func newSender(t *testing.T, cfg webhook.Config) *webhook.Sender {
	t.Helper()
	s := webhook.NewSender(cfg)
	t.Cleanup(s.Close)
	return s
}

// A receiver answering 500 and then 200 sees the same event twice with the same
// webhook-id, each signature verified by the Standard Webhooks library: the Sender says
// the first failure may pass (the dispatcher retries) and the second attempt succeeds.
// Guards a sender whose signature a real receiver rejects, or whose retry changes the id.
func TestAReceiverAnswering500Then200VerifiesTheSignatureAndGetsTheEventOnce(t *testing.T) {
	t.Parallel()
	key, err := webhook.GenerateSecret()
	require.NoError(t, err)
	url, list := pythonReceiver(t, webhook.EncodeSecret(key), "500,200")
	s := newSender(t, webhook.Config{AllowPrivate: true})
	e := webhook.Endpoint{URL: url, Secret: key, Format: webhook.FormatStandard}

	err = s.Send(t.Context(), e, message("evt_1"))
	require.Error(t, err)
	assert.False(t, webhook.IsPermanent(err), "a 500 may pass: %v", err)
	require.NoError(t, s.Send(t.Context(), e, message("evt_1")))

	got := list()
	require.Len(t, got, 2)
	for _, r := range got {
		assert.True(t, r.Verified, "the library rejected the signature: %s", r.Error)
		assert.Equal(t, "evt_1", r.ID)
	}
	assert.Equal(t, []int{500, 200}, []int{got[0].Status, got[1].Status})
	var body struct {
		Type      string          `json:"type"`
		Timestamp string          `json:"timestamp"`
		Data      json.RawMessage `json:"data"`
	}
	require.NoError(t, json.Unmarshal([]byte(got[1].Body), &body))
	assert.Equal(t, "execution.failed", body.Type)
	assert.Equal(t, "2026-12-01T13:00:00Z", body.Timestamp)
	assert.JSONEq(t, `{"job":"daily-sales","status":"user_error"}`, string(body.Data))
}

// A signature made with another key does not verify in the library: the receiver test
// above can fail (a receiver that accepts everything would prove nothing).
func TestTheLibraryRejectsASignatureMadeWithAnotherKey(t *testing.T) {
	t.Parallel()
	key, err := webhook.GenerateSecret()
	require.NoError(t, err)
	other, err := webhook.GenerateSecret()
	require.NoError(t, err)
	url, list := pythonReceiver(t, webhook.EncodeSecret(key), "200")
	s := newSender(t, webhook.Config{AllowPrivate: true})

	err = s.Send(t.Context(), webhook.Endpoint{URL: url, Secret: other}, message("evt_2"))
	require.Error(t, err)
	assert.True(t, webhook.IsPermanent(err), "a 401 is permanent: %v", err)
	got := list()
	require.Len(t, got, 1)
	assert.False(t, got[0].Verified)
}

// Which answers end the retries: a 4xx other than 408 and 429 is permanent (the receiver
// will refuse the same request again), a 5xx, 408 and 429 are not, and Retry-After is
// carried in the error so the dispatcher waits as long as the receiver asked.
func TestAnswersAreClassifiedPermanentOrRetryableWithTheirRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 13, 0, 0, 0, time.UTC)
	for name, tc := range map[string]struct {
		status     int
		retryAfter string
		permanent  bool
		wait       time.Duration
	}{
		"a 400 is permanent":                       {status: 400, permanent: true},
		"a 404 is permanent":                       {status: 404, permanent: true},
		"a 410 is permanent":                       {status: 410, permanent: true},
		"a 408 may pass":                           {status: 408},
		"a 429 may pass, after its Retry-After":    {status: 429, retryAfter: "120", wait: 2 * time.Minute},
		"a 503 may pass, after its Retry-After":    {status: 503, retryAfter: now.Add(30 * time.Second).Format(http.TimeFormat), wait: 30 * time.Second},
		"a 500 may pass":                           {status: 500},
		"a Retry-After of a year is capped at 1 h": {status: 429, retryAfter: "31536000", wait: time.Hour},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				if tc.retryAfter != "" {
					w.Header().Set("Retry-After", tc.retryAfter)
				}
				w.WriteHeader(tc.status)
			}))
			t.Cleanup(srv.Close)
			s := newSender(t, webhook.Config{AllowPrivate: true, Now: func() time.Time { return now }})
			err := s.Send(t.Context(), webhook.Endpoint{URL: srv.URL, Secret: []byte("k")}, message("evt"))
			require.Error(t, err)
			assert.Equal(t, tc.permanent, webhook.IsPermanent(err), "%v", err)
			assert.Equal(t, tc.wait, webhook.RetryAfter(err))
		})
	}
}

// A redirect is not followed: a receiver cannot steer signed events to another address
// (nor past the address check), and the answer is permanent.
func TestARedirectIsNotFollowed(t *testing.T) {
	t.Parallel()
	var reached atomic.Bool
	target := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { reached.Store(true) }))
	t.Cleanup(target.Close)
	srv := httptest.NewServer(http.RedirectHandler(target.URL, http.StatusTemporaryRedirect))
	t.Cleanup(srv.Close)
	s := newSender(t, webhook.Config{AllowPrivate: true})

	err := s.Send(t.Context(), webhook.Endpoint{URL: srv.URL, Secret: []byte("k")}, message("evt"))
	require.Error(t, err)
	assert.True(t, webhook.IsPermanent(err))
	assert.Contains(t, err.Error(), "307")
	assert.False(t, reached.Load(), "the redirect was followed")
}

// Without AllowPrivate a webhook cannot reach the service's own network: a loopback
// receiver is refused (a literal address at once, a name when it is dialled, after it
// resolved), permanently, and nothing reaches it. Guards SSRF through a team's webhook URL
// (the cloud metadata address, the database, the admin listener).
func TestAPrivateTargetIsRefusedWithoutTheFlag(t *testing.T) {
	t.Parallel()
	var reached atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { reached.Add(1) }))
	t.Cleanup(srv.Close)
	port := srv.URL[strings.LastIndex(srv.URL, ":"):]
	s := newSender(t, webhook.Config{})
	for _, url := range []string{
		srv.URL,                               // 127.0.0.1, refused before the dial
		"http://localhost" + port,             // a name for loopback
		"http://127.0.0.1.nip.invalid" + port, // does not resolve: may pass, not permanent
		"http://[::ffff:127.0.0.1]" + port,
		"http://169.254.169.254/latest/meta-data",
		"http://10.0.0.1" + port,
	} {
		err := s.Send(t.Context(), webhook.Endpoint{URL: url, Secret: []byte("k")}, message("evt"))
		require.Error(t, err, url)
		if strings.Contains(url, ".invalid") {
			assert.False(t, webhook.IsPermanent(err), "%s: %v", url, err)
			continue
		}
		assert.True(t, webhook.IsPermanent(err), "%s: %v", url, err)
	}
	assert.Zero(t, reached.Load())

	allowed := newSender(t, webhook.Config{AllowPrivate: true})
	require.NoError(t, allowed.Send(t.Context(), webhook.Endpoint{URL: srv.URL, Secret: []byte("k")}, message("evt")))
	assert.Equal(t, int32(1), reached.Load(), "with the flag the same receiver is reached")
}

// A name that passes the URL check (not "localhost", not a literal address) but resolves
// to a loopback or private address is refused by the dial-time check, after resolution:
// the Sender never connects to what the name resolved to. The machine's own host name is
// such a name (/etc/hosts maps it to loopback, or it resolves to the machine's private
// address).
func TestANameResolvingToAPrivateAddressIsRefusedWhenDialled(t *testing.T) {
	t.Parallel()
	var reached atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { reached.Add(1) }))
	t.Cleanup(srv.Close)
	port := srv.URL[strings.LastIndex(srv.URL, ":"):]
	host, err := os.Hostname()
	require.NoError(t, err)
	if _, err := net.DefaultResolver.LookupHost(t.Context(), host); err != nil {
		t.Skipf("this machine's host name %q does not resolve: %v", host, err)
	}
	s := newSender(t, webhook.Config{})

	err = s.Send(t.Context(), webhook.Endpoint{URL: "http://" + host + port, Secret: []byte("k")}, message("evt"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "resolves to a loopback, link-local or private address")
	assert.True(t, webhook.IsPermanent(err), "%v", err)
	assert.Zero(t, reached.Load())
}

// The slack format is an incoming-webhook body: "text" and one mrkdwn section with the
// same text, Slack's control characters escaped so that a job's message cannot page a
// channel, and cut to Slack's 3,000 characters.
func TestTheSlackBodyIsTextAndASectionBlock(t *testing.T) {
	t.Parallel()
	var body []byte
	srv := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		body, _ = io.ReadAll(r.Body)
	}))
	t.Cleanup(srv.Close)
	s := newSender(t, webhook.Config{AllowPrivate: true})
	m := message("evt")
	m.Text = "*daily-sales* failed <!channel> & " + strings.Repeat("x", 4000)

	require.NoError(t, s.Send(t.Context(), webhook.Endpoint{URL: srv.URL, Format: webhook.FormatSlack}, m))
	var got struct {
		Text   string `json:"text"`
		Blocks []struct {
			Type string `json:"type"`
			Text struct {
				Type string `json:"type"`
				Text string `json:"text"`
			} `json:"text"`
		} `json:"blocks"`
	}
	require.NoError(t, json.Unmarshal(body, &got))
	assert.True(t, strings.HasPrefix(got.Text, "*daily-sales* failed &lt;!channel&gt; &amp; x"), got.Text[:60])
	assert.Len(t, []rune(got.Text), 3000)
	require.Len(t, got.Blocks, 1)
	assert.Equal(t, "section", got.Blocks[0].Type)
	assert.Equal(t, "mrkdwn", got.Blocks[0].Text.Type)
	assert.Equal(t, got.Text, got.Blocks[0].Text.Text)
}

// A receiver that never answers, or answers without end, holds the Sender no longer than
// its timeout and no more than its read bound; the error may pass and names the host only
// (a Slack URL's path is a credential).
func TestASlowReceiverIsBoundedByTheTimeoutAndTheURLStaysOutOfTheError(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-release }))
	t.Cleanup(func() { close(release); srv.Close() })
	s := newSender(t, webhook.Config{AllowPrivate: true, Timeout: 200 * time.Millisecond})

	err := s.Send(t.Context(), webhook.Endpoint{URL: srv.URL + "/services/T0/B0/SECRETTOKEN", Secret: []byte("k")}, message("evt"))
	require.Error(t, err)
	assert.False(t, webhook.IsPermanent(err))
	assert.NotContains(t, err.Error(), "SECRETTOKEN")
}

// An endpoint that cannot be sent to is a permanent error, before any request: a bad URL,
// a standard webhook without a secret, an unknown format, a message without an id.
func TestAnEndpointThatCannotBeSentToIsPermanent(t *testing.T) {
	t.Parallel()
	s := newSender(t, webhook.Config{AllowPrivate: true})
	for name, tc := range map[string]struct {
		e webhook.Endpoint
		m webhook.Message
	}{
		"ftp url":               {e: webhook.Endpoint{URL: "ftp://example.com/x", Secret: []byte("k")}, m: message("e")},
		"no host":               {e: webhook.Endpoint{URL: "http:///x", Secret: []byte("k")}, m: message("e")},
		"standard, no secret":   {e: webhook.Endpoint{URL: "https://example.com/x"}, m: message("e")},
		"unknown format":        {e: webhook.Endpoint{URL: "https://example.com/x", Format: "teams"}, m: message("e")},
		"message without an id": {e: webhook.Endpoint{URL: "https://example.com/x", Secret: []byte("k")}, m: message("")},
	} {
		err := s.Send(t.Context(), tc.e, tc.m)
		require.Error(t, err, name)
		assert.True(t, webhook.IsPermanent(err), "%s: %v", name, err)
	}
}
