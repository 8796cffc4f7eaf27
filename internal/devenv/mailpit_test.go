package devenv_test

import (
	"net/smtp"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/devenv"
	"github.com/datajobs/datajobs/internal/testenv"
)

// TestTheEnvironmentsMailpitShowsASentMailAndKeepsItsAddressAcrossRestarts guards what
// `make dev` promises about mail: Mailpit is part of the environment, a mail sent to its
// SMTP address shows in its web API, and after a restart on the same state folder the
// address a user bookmarked still works and the mail is still there.
func TestTheEnvironmentsMailpitShowsASentMailAndKeepsItsAddressAcrossRestarts(t *testing.T) {
	t.Parallel()
	root, err := devenv.RepoRoot()
	require.NoError(t, err)
	bin, err := devenv.EnsureMailpitBinary(t.Context(), root, nil)
	require.NoError(t, err)
	dir := stateDir(t)
	env, err := devenv.Start(t.Context(), devenv.Config{StateDir: dir, MailpitBin: bin, Fast: true})
	require.NoError(t, err)
	require.NotNil(t, env.Mailpit)
	smtpAddr, web := env.Mailpit.SMTPAddr, env.Mailpit.HTTPAddr
	msg := "From: datajobs@localhost\r\nTo: team@example.com\r\nSubject: dev-mail-kept\r\n\r\nhello\r\n"
	require.NoError(t, smtp.SendMail(smtpAddr, nil, "datajobs@localhost", []string{"team@example.com"}, []byte(msg)))
	require.Equal(t, "dev-mail-kept", testenv.Mails(t, web)[0].Subject)
	require.NoError(t, env.Stop())

	again := start(t, devenv.Config{StateDir: dir, MailpitBin: bin})
	require.Equal(t, web, again.Mailpit.HTTPAddr, "the web address is the same")
	require.Equal(t, smtpAddr, again.Mailpit.SMTPAddr)
	mails := testenv.Mails(t, web)
	require.Len(t, mails, 1)
	require.Equal(t, "dev-mail-kept", mails[0].Subject, "the mail is kept in the state folder")
}
