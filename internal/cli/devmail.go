package cli

import (
	"cmp"
	"context"
	"fmt"
	"io"

	"github.com/datajobs/datajobs/internal/devenv"
	"github.com/datajobs/datajobs/internal/server"
)

// devMailFrom is the sender of dev's notification mails.
const devMailFrom = "datajobs-dev@localhost"

// devMail is what `datajobs dev` tells the service about its Mailpit.
type devMail struct {
	smtpURL, web string
}

type devMailKey struct{}

// mailpitForDev builds Mailpit from the checkout (instant once built) for dev to start,
// or returns "" with a line saying that no mail is sent when there is no checkout.
func mailpitForDev(ctx context.Context, progress, out io.Writer) (string, error) {
	root, err := devenv.RepoRoot()
	if err != nil {
		fmt.Fprintf(out, "mail: no Mailpit, no e-mail is sent (%v)\n", err)
		return "", nil
	}
	return devenv.EnsureMailpitBinary(ctx, root, progress)
}

// withDevMailpit returns ctx carrying the environment's Mailpit, when it has one, and
// prints its web address, where a user reads the mails their jobs make datajobs send.
func withDevMailpit(ctx context.Context, env *devenv.Env, out io.Writer) context.Context {
	if env.Mailpit == nil {
		return ctx
	}
	m := devMail{smtpURL: "smtp://" + env.Mailpit.SMTPAddr, web: "http://" + env.Mailpit.HTTPAddr + "/"}
	fmt.Fprintf(out, "  mail:        %s (Mailpit: every mail datajobs sends; SMTP %s)\n", m.web, env.Mailpit.SMTPAddr)
	return context.WithValue(ctx, devMailKey{}, m)
}

// withDevMail points the service's notification mails at dev's Mailpit, unless the flags
// chose a mail server.
func withDevMail(ctx context.Context, c server.Config) server.Config {
	m, ok := ctx.Value(devMailKey{}).(devMail)
	if !ok || c.Notifications.SMTPURL != "" {
		return c
	}
	c.Notifications.SMTPURL = m.smtpURL
	c.Notifications.SMTPFrom = cmp.Or(c.Notifications.SMTPFrom, devMailFrom)
	return c
}
