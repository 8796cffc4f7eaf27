package devenv

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Mailpit, the SMTP server of dev mode and the tests (notifications, issue 25): it keeps
// every mail it accepts and shows them in a web UI and an HTTP API. Built by its own
// stamped script from the nested module hack/mailpit.
const (
	mailpitScript  = "hack/mailpit/build.sh"
	mailpitBinRepo = ".cache/mailpit-bin/mailpit"
)

// EnsureMailpitBinary builds Mailpit with hack/mailpit/build.sh (instant when its stamp
// matches) and returns its path.
func EnsureMailpitBinary(ctx context.Context, repoRoot string, progress io.Writer) (string, error) {
	return ensureBuilt(ctx, repoRoot, mailpitScript, mailpitBinRepo, progress)
}

// Mailpit is a running Mailpit on loopback: SMTP without TLS, any or no credentials.
type Mailpit struct {
	*Process
	// SMTPAddr is the SMTP server's host:port; HTTPAddr the web UI's and API's.
	SMTPAddr, HTTPAddr string
}

// MailpitConfig configures StartMailpit.
type MailpitConfig struct {
	// Bin is the Mailpit binary. Required.
	Bin string
	// Dir holds its database.
	Dir string
	// LogPath receives its output.
	LogPath string
	// SMTPPort and HTTPPort on 127.0.0.1 to try first; 0 picks free ones. Either is
	// replaced by another free one when another process takes it first
	// (processSpec.picked): read SMTPAddr and HTTPAddr.
	SMTPPort, HTTPPort int
	// AllowedRecipients, when set, is a regular expression: Mailpit refuses any other
	// recipient with a permanent (5xx) reply, as a server does for an unknown mailbox.
	AllowedRecipients string
	Logger            *slog.Logger
}

// smtpGreets checks that an SMTP server at addr greets (220), as Mailpit's does.
func smtpGreets(ctx context.Context, addr string) error {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(dl)
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return fmt.Errorf("smtp %s: %w", addr, err)
	}
	if !strings.HasPrefix(line, "220") {
		return fmt.Errorf("smtp %s greets %q", addr, line)
	}
	return nil
}

// StartMailpit starts Mailpit and waits until its API and SMTP server answer.
func StartMailpit(ctx context.Context, cfg MailpitConfig) (*Mailpit, error) {
	if cfg.Bin == "" {
		return nil, errors.New("mailpit: no binary; build it with `bash " + mailpitScript + "`")
	}
	ports := []*int{&cfg.SMTPPort, &cfg.HTTPPort}
	for _, p := range ports {
		if *p == 0 {
			var err error
			if *p, err = freePort(); err != nil {
				return nil, err
			}
		}
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, err
	}
	m := &Mailpit{}
	plain := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	m.Process = newProcess("mailpit", cfg.LogPath, processSpec{
		path: cfg.Bin, dir: cfg.Dir, env: os.Environ(), picked: ports,
		configure: func(s *processSpec) error {
			m.SMTPAddr, m.HTTPAddr = "127.0.0.1:"+strconv.Itoa(cfg.SMTPPort), "127.0.0.1:"+strconv.Itoa(cfg.HTTPPort)
			s.args = []string{
				"--smtp", m.SMTPAddr, "--listen", m.HTTPAddr, "--database", filepath.Join(cfg.Dir, "mailpit.db"),
				"--smtp-auth-accept-any", "--smtp-auth-allow-insecure", "--disable-version-check", "--max", "10000", "--quiet",
			}
			if cfg.AllowedRecipients != "" {
				s.args = append(s.args, "--smtp-allowed-recipients", cfg.AllowedRecipients)
			}
			web := httpReady(plain, "http://"+m.HTTPAddr+"/api/v1/info")
			// Both listeners: Mailpit goes on serving its web UI when SMTP's port is taken.
			s.ready = func(ctx context.Context) error { return errors.Join(web(ctx), smtpGreets(ctx, m.SMTPAddr)) }
			return nil
		},
	}, cmpLogger(cfg.Logger))
	if err := m.Start(ctx); err != nil {
		return nil, err
	}
	return m, nil
}
