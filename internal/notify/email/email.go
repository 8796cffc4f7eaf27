// Package email is the e-mail channel of the notifications (internal/notify): one SMTP
// session per message, STARTTLS (implicit TLS with smtps://; plain text only to a server
// on loopback or when allowed), the event's idempotency key as the Message-ID.
package email

import (
	"bytes"
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"mime"
	"mime/quotedprintable"
	"net"
	"net/mail"
	"net/smtp"
	"net/textproto"
	"net/url"
	"strings"
	"time"

	"github.com/datajobs/datajobs/internal/notify"
)

// Config configures a Sender.
type Config struct {
	// URL is the SMTP server, smtp://[user[:password]@]host[:port] (port 25; STARTTLS)
	// or smtps://… (port 465, implicit TLS). Required.
	URL string
	// Password, when not empty, replaces the URL's password (read from a file, as the
	// other secrets are, so it is in no process listing or environment).
	Password string
	// From is the sender address. Required.
	From string
	// Timeout bounds one message's SMTP session (default 30s).
	Timeout time.Duration
	// TLS is the client's TLS configuration (default: the system's roots, the URL's host).
	TLS *tls.Config
	// AllowPlaintext sends over a connection without TLS when an smtp:// server does not
	// offer STARTTLS (--smtp-allow-plaintext; default false: such a message is refused,
	// and retried, unless the server is on loopback). Mails carry job output.
	AllowPlaintext bool
	// RecipientDomains, when not empty, are the only domains mail goes to (each with its
	// subdomains): a recipient elsewhere is a permanent failure, never sent. A job's
	// contacts are any addresses a team member writes, and its mails quote what the job
	// wrote (its message, its log's last lines), from this installation's address
	// (issue 41, L5). Default: any domain.
	RecipientDomains []string
}

// Sender delivers notifications by e-mail.
type Sender struct {
	cfg            Config
	implicitTLS    bool
	addr, host     string
	loopback       bool // the URL's host is this machine: plain text is allowed
	user, password string
	from           *mail.Address
	domain         string
}

// New checks cfg and returns its sender.
func New(cfg Config) (*Sender, error) {
	u, err := url.Parse(cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("smtp url: %w", err)
	}
	s := &Sender{cfg: cfg, implicitTLS: u.Scheme == "smtps", host: u.Hostname()}
	switch {
	case u.Scheme != "smtp" && u.Scheme != "smtps":
		return nil, fmt.Errorf("smtp url: scheme %q: must be smtp or smtps", u.Scheme)
	case s.host == "":
		return nil, errors.New("smtp url: no host")
	}
	port := cmp.Or(u.Port(), map[bool]string{true: "465", false: "25"}[s.implicitTLS])
	s.addr = net.JoinHostPort(s.host, port)
	s.loopback = isLoopback(s.host)
	if u.User != nil {
		s.user = u.User.Username()
		s.password, _ = u.User.Password()
	}
	s.password = cmp.Or(cfg.Password, s.password)
	if s.from, err = mail.ParseAddress(cfg.From); err != nil {
		return nil, fmt.Errorf("smtp from %q: %w", cfg.From, err)
	}
	s.domain = s.from.Address[strings.LastIndex(s.from.Address, "@")+1:]
	s.cfg.Timeout = cmp.Or(cfg.Timeout, 30*time.Second)
	if s.cfg.TLS == nil {
		s.cfg.TLS = &tls.Config{ServerName: s.host, MinVersion: tls.VersionTLS12}
	}
	return s, nil
}

// Deliver sends d as one mail. A recipient the server refuses with a 5xx reply is refused
// for good (notify.RecipientRefused: suppressed for a while), an address that does not
// parse a permanent failure; anything else is retried.
func (s *Sender) Deliver(ctx context.Context, d notify.Delivery) error {
	to, err := mail.ParseAddress(d.Recipient)
	if err != nil {
		return notify.Permanent(fmt.Errorf("recipient %q: %w", d.Recipient, err))
	}
	if !s.allowed(to.Address) {
		return notify.Permanent(fmt.Errorf("recipient %s: mail goes only to the domains %s (--smtp-recipient-domains)",
			to.Address, strings.Join(s.cfg.RecipientDomains, ", ")))
	}
	msg, err := s.message(d, to)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	c, err := s.dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	if err := c.Mail(s.from.Address); err != nil {
		return fmt.Errorf("smtp MAIL FROM: %w", err)
	}
	if err := c.Rcpt(to.Address); err != nil {
		var tp *textproto.Error
		if errors.As(err, &tp) && tp.Code >= 500 {
			return notify.RecipientRefused(fmt.Errorf("smtp RCPT TO %s: %w", to.Address, err))
		}
		return fmt.Errorf("smtp RCPT TO %s: %w", to.Address, err)
	}
	w, err := c.Data()
	if err != nil {
		return fmt.Errorf("smtp DATA: %w", err)
	}
	if _, err := w.Write(msg); err != nil {
		return fmt.Errorf("smtp DATA: %w", err)
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("smtp DATA: %w", err)
	}
	_ = c.Quit() // the server accepted the message; a failed QUIT changes nothing
	return nil
}

// allowed reports whether address is in one of RecipientDomains (any, when there are none).
func (s *Sender) allowed(address string) bool {
	if len(s.cfg.RecipientDomains) == 0 {
		return true
	}
	domain := strings.ToLower(address[strings.LastIndex(address, "@")+1:])
	for _, d := range s.cfg.RecipientDomains {
		d = strings.ToLower(strings.TrimPrefix(d, "."))
		if domain == d || strings.HasSuffix(domain, "."+d) {
			return true
		}
	}
	return false
}

// dial opens the session: TLS, EHLO, STARTTLS when offered, AUTH when a user is set.
func (s *Sender) dial(ctx context.Context) (*smtp.Client, error) {
	var (
		conn net.Conn
		err  error
	)
	if s.implicitTLS {
		conn, err = (&tls.Dialer{Config: s.cfg.TLS}).DialContext(ctx, "tcp", s.addr)
	} else {
		conn, err = (&net.Dialer{}).DialContext(ctx, "tcp", s.addr)
	}
	if err != nil {
		return nil, fmt.Errorf("smtp connect %s: %w", s.addr, err)
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	c, err := smtp.NewClient(conn, s.host)
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("smtp greeting from %s: %w", s.addr, err)
	}
	if err := s.hello(c); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

func (s *Sender) hello(c *smtp.Client) error {
	if err := c.Hello(s.domain); err != nil {
		return fmt.Errorf("smtp EHLO: %w", err)
	}
	if err := s.startTLS(c); err != nil {
		return err
	}
	if s.user != "" {
		// PlainAuth refuses to send the password over a connection without TLS to a
		// host other than localhost.
		if err := c.Auth(smtp.PlainAuth("", s.user, s.password, s.host)); err != nil {
			return fmt.Errorf("smtp AUTH as %s: %w", s.user, err)
		}
	}
	return nil
}

// startTLS upgrades an smtp:// session to TLS, or refuses to go on without it (a server
// that does not offer STARTTLS, or a man in the middle who removed it) unless the server
// is on loopback or AllowPlaintext says so.
func (s *Sender) startTLS(c *smtp.Client) error {
	if s.implicitTLS {
		return nil
	}
	if ok, _ := c.Extension("STARTTLS"); ok {
		if err := c.StartTLS(s.cfg.TLS); err != nil {
			return fmt.Errorf("smtp STARTTLS: %w", err)
		}
		return nil
	}
	if s.cfg.AllowPlaintext || s.loopback {
		return nil
	}
	return fmt.Errorf("smtp %s offers no STARTTLS: not sending in plain text (--smtp-allow-plaintext allows it, smtps:// uses implicit TLS)", s.addr)
}

// isLoopback says whether host names this machine: localhost or a loopback address.
func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// message is the mail of d: plain text, quoted-printable (a log line may be longer than
// SMTP's 998 characters), with the idempotency key as its Message-ID.
func (s *Sender) message(d notify.Delivery, to *mail.Address) ([]byte, error) {
	var b bytes.Buffer
	h := func(k, v string) { fmt.Fprintf(&b, "%s: %s\r\n", k, v) }
	h("From", s.from.String())
	h("To", to.String())
	h("Subject", mime.QEncoding.Encode("utf-8", strings.NewReplacer("\r", " ", "\n", " ").Replace(d.Subject)))
	h("Message-ID", "<"+d.ID+"@"+s.domain+">")
	h("Date", time.Now().UTC().Format(time.RFC1123Z))
	h("MIME-Version", "1.0")
	h("Content-Type", "text/plain; charset=utf-8")
	h("Content-Transfer-Encoding", "quoted-printable")
	h("Auto-Submitted", "auto-generated")
	if len(d.Events) == 1 {
		h("X-Datajobs-Event", d.Events[0].Kind)
	}
	b.WriteString("\r\n")
	qp := quotedprintable.NewWriter(&b)
	if _, err := qp.Write([]byte(strings.ReplaceAll(d.Text, "\n", "\r\n"))); err != nil {
		return nil, err
	}
	if err := qp.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
