package cli

import (
	"context"
	"io"
	"net/smtp"
	"net/url"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/server"
	"github.com/datajobs/datajobs/internal/testenv"
)

var devMailLine = regexp.MustCompile(`(?m)^  mail: +http://(127\.0\.0\.1:\d+)/ \(Mailpit`)

// TestDevStartsMailpitAndTheServicesMailsShowAtThePrintedAddress guards issue 25's dev
// promise: `datajobs dev` starts Mailpit, points the service's --smtp-url (and a sender)
// at it, and prints its web address, where a mail sent the way the service is configured
// to send shows. A flag's own --smtp-url is kept.
func TestDevStartsMailpitAndTheServicesMailsShowAtThePrintedAddress(t *testing.T) {
	t.Parallel()
	state := devStateDir(t)
	var cfg server.Config
	out, err := runDev(t.Context(), func(ctx context.Context, _, _ string, _ io.Writer) error {
		cfg = withDevMail(ctx, server.Config{})
		u, err := url.Parse(cfg.Notifications.SMTPURL)
		if err != nil {
			return err
		}
		msg := "From: " + cfg.Notifications.SMTPFrom + "\r\nTo: team@example.com\r\nSubject: dev-notification\r\n\r\nhello\r\n"
		return smtp.SendMail(u.Host, nil, cfg.Notifications.SMTPFrom, []string{"team@example.com"}, []byte(msg))
	}, "--state-dir", state, "--controllers=false", "--fast")
	require.NoError(t, err)
	m := devMailLine.FindStringSubmatch(out)
	require.NotNil(t, m, "dev prints Mailpit's web address:\n%s", out)
	require.Equal(t, devMailFrom, cfg.Notifications.SMTPFrom)

	// dev has stopped; its Mailpit comes back on the same address with the mail.
	_, err = runDev(t.Context(), func(ctx context.Context, _, _ string, _ io.Writer) error {
		mails := testenv.Mails(t, m[1])
		require.Len(t, mails, 1)
		require.Equal(t, "dev-notification", mails[0].Subject)
		mine := withDevMail(ctx, server.Config{Notifications: server.NotificationsConfig{SMTPURL: "smtp://mail.example.com:25"}})
		require.Equal(t, "smtp://mail.example.com:25", mine.Notifications.SMTPURL, "--smtp-url given: kept")
		return nil
	}, "--state-dir", state, "--controllers=false", "--fast")
	require.NoError(t, err)
}
