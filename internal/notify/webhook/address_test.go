package webhook_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"unicode"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/notify/webhook"
)

// Issue 41, L4: addresses that carry an IPv4 address a gateway or the kernel may turn
// back into one inside the installation, and zoned addresses (a prefix contains none),
// passed the address check. Each is refused as the URL is entered (and when dialled: the
// same check).
func TestAddressesThatCarryAPrivateAddressAreRefused(t *testing.T) {
	t.Parallel()
	for _, host := range []string{
		"[::ffff:10.0.0.1]",          // IPv4-mapped
		"[::ffff:10.0.0.1%25eth0]",   // IPv4-mapped, with a zone
		"0.1.2.3",                    // 0.0.0.0/8
		"[64:ff9b::10.0.0.1]",        // NAT64
		"[64:ff9b::10.0.0.1%25eth0]", // NAT64, with a zone: passed
		"[::10.0.0.1]",               // IPv4-compatible: passed
		"[::ffff:0:10.0.0.1]",        // SIIT's IPv4-translated: passed
		"[2002:a00:1::1]",            // 6to4 of 10.0.0.1: passed
		"[2001:0:a00:1::1]",          // Teredo: passed
		"[fec0::1]",                  // site-local: passed
		"192.88.99.1",                // the 6to4 relay: passed
	} {
		_, err := webhook.ParseURL("http://"+host+"/hook", false)
		require.Error(t, err, host)
	}
	for _, host := range []string{"hooks.example.com", "93.184.215.14", "[2606:2800:21f:cb07:6820:80da:af6b:8b2c]"} {
		_, err := webhook.ParseURL("https://"+host+"/hook", false)
		require.NoError(t, err, host)
	}
}

// Issue 41, L4: a receiver's answer was quoted in the delivery's error, which the team
// reads, 200 bytes of it with its control characters (escaped): a URL at a service that
// answers with what it holds read that back. An error quotes at most 80 bytes now, one
// line of printable text.
func TestAReceiversAnswerIsQuotedShortAndPlain(t *testing.T) {
	t.Parallel()
	answer := "line one\r\n\x1b[31mred\x00\xe9" + strings.Repeat("secret ", 100)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(answer))
	}))
	t.Cleanup(srv.Close)
	s := newSender(t, webhook.Config{AllowPrivate: true})

	err := s.Send(t.Context(), webhook.Endpoint{URL: srv.URL, Secret: []byte("k")}, message("evt"))
	require.Error(t, err)
	msg := err.Error()
	quoted := msg[strings.Index(msg, `"`):]
	assert.LessOrEqual(t, len(quoted), 80+2, msg)
	assert.True(t, strings.HasPrefix(quoted, `"line one [31mred`), msg)
	assert.NotContains(t, quoted, `\`, "nothing left to escape: %s", msg)
	for _, r := range msg {
		assert.True(t, unicode.IsPrint(r), "%q in %s", r, msg)
	}
}
