package email_test

import (
	"bufio"
	"net"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/notify"
	"github.com/datajobs/datajobs/internal/notify/email"
)

// plainSMTP starts an SMTP server that offers no STARTTLS on an address of this machine
// that is not loopback (the test is skipped without one); it returns its address and
// the commands it received.
func plainSMTP(t *testing.T) (string, func() []string) {
	t.Helper()
	var host string
	addrs, err := net.InterfaceAddrs()
	require.NoError(t, err)
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() {
			host = n.IP.String()
			break
		}
	}
	if host == "" {
		t.Skip("no address off loopback")
	}
	ln, err := net.Listen("tcp", host+":0")
	require.NoError(t, err)
	var (
		mu   sync.Mutex
		cmds []string
		wg   sync.WaitGroup
	)
	t.Cleanup(func() { _ = ln.Close(); wg.Wait() })
	wg.Go(func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		r, w := bufio.NewReader(c), bufio.NewWriter(c)
		say := func(s string) { _, _ = w.WriteString(s + "\r\n"); _ = w.Flush() }
		say("220 plain ESMTP")
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			cmd := strings.ToUpper(strings.Fields(line + " x")[0])
			mu.Lock()
			cmds = append(cmds, cmd)
			mu.Unlock()
			switch cmd {
			case "EHLO":
				say("250-plain\r\n250 8BITMIME")
			case "DATA":
				say("354 go on")
				for l := ""; l != ".\r\n"; {
					if l, err = r.ReadString('\n'); err != nil {
						return
					}
				}
				say("250 queued")
			case "QUIT":
				say("221 bye")
				return
			default:
				say("250 ok")
			}
		}
	})
	return ln.Addr().String(), func() []string { mu.Lock(); defer mu.Unlock(); return append([]string(nil), cmds...) }
}

func delivery() notify.Delivery {
	return notify.Delivery{
		ID: "datajobs-1", Channel: notify.ChannelEmail, Recipient: "dev@example.com", Subject: "s", Text: "job output",
		Events: []job.NotificationEvent{{Kind: "execution_finished"}},
	}
}

// L10 (issue 41): an smtp:// server off loopback that offers no STARTTLS gets no mail in
// plain text (the message is refused before MAIL FROM, and retried), unless
// --smtp-allow-plaintext allows it. Fails on the sender before the fix, which went on
// in plain text.
func TestNoMailInPlainTextOffLoopbackUnlessAllowed(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		allow bool
	}{{name: "refused by default"}, {name: "sent when allowed", allow: true}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			addr, cmds := plainSMTP(t)
			s, err := email.New(email.Config{URL: "smtp://" + addr, From: "datajobs@example.com", AllowPlaintext: tc.allow})
			require.NoError(t, err)
			err = s.Deliver(t.Context(), delivery())
			if tc.allow {
				require.NoError(t, err)
				require.Contains(t, cmds(), "DATA")
				return
			}
			require.ErrorContains(t, err, "offers no STARTTLS")
			require.False(t, notify.IsPermanent(err), "retried: the server may gain TLS")
			require.NotContains(t, cmds(), "MAIL")
		})
	}
}

// L5 (issue 41): a job's contacts are any addresses a team member writes, and its mails
// quote what the job wrote, from this installation's address. With RecipientDomains mail
// goes to those domains (and their subdomains) alone: another recipient is a permanent
// failure, refused before any connection.
func TestMailGoesOnlyToTheRecipientDomains(t *testing.T) {
	t.Parallel()
	s, err := email.New(email.Config{URL: "smtp://127.0.0.1:1", From: "datajobs@example.com", RecipientDomains: []string{"example.com"}})
	require.NoError(t, err)
	d := delivery()
	d.Recipient = "victim@elsewhere.test"
	err = s.Deliver(t.Context(), d)
	require.ErrorContains(t, err, "mail goes only to the domains example.com")
	require.True(t, notify.IsPermanent(err))
	for _, to := range []string{"dev@example.com", "Dev <dev@Data.Example.COM>"} {
		d.Recipient = to
		err = s.Deliver(t.Context(), d)
		require.ErrorContains(t, err, "smtp connect", "%s is let through to the server", to)
		require.False(t, notify.IsPermanent(err))
	}
}
