package server

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/datajobs/datajobs/internal/controller"
	"github.com/datajobs/datajobs/internal/notify"
	"github.com/datajobs/datajobs/internal/notify/email"
	"github.com/datajobs/datajobs/internal/notify/webhook"
	"github.com/datajobs/datajobs/internal/store"
)

// NotificationsConfig configures the notifications the leader delivers from the outbox
// (docs/notifications.md).
type NotificationsConfig struct {
	// SMTPURL is the mail server, smtp[s]://[user[:password]@]host[:port] (default none:
	// no e-mail is sent, the events are still recorded and shown).
	SMTPURL string
	// SMTPPasswordFile holds the SMTP password, replacing the URL's (default none).
	SMTPPasswordFile string
	// SMTPFrom is the sender address (required with SMTPURL).
	SMTPFrom string
	// SMTPAllowPlaintext sends mail in plain text to an smtp:// server that offers no
	// STARTTLS (default false: refused unless the server is on loopback).
	SMTPAllowPlaintext bool
	// SMTPRecipientDomains, when not empty, are the only domains mail goes to (default:
	// any); a recipient elsewhere is refused when a team sets it.
	SMTPRecipientDomains []string
	// MaxAge is how long a delivery is retried before it is marked failed (default 24h).
	MaxAge time.Duration
	// RateLimit is the most e-mails per recipient per RateWindow (default 10; negative:
	// no limit); more go as a digest.
	RateLimit int
	// RateWindow is the rate limit's period (default 1h).
	RateWindow time.Duration
	// WebhookURL is the platform-wide webhook every event goes to (default none).
	WebhookURL string
	// WebhookSecretFile holds its Standard Webhooks secret, "whsec_<base64>" (required
	// with WebhookURL).
	WebhookSecretFile string
	// VDKJobMetrics exports VDK's per-job alerting gauges (taurus_datajob_info and its
	// kin, internal/vdkmetrics) on /metrics (default false: they label series by job).
	VDKJobMetrics bool
	// Retention is how long finished events are kept before the leader deletes them
	// (default 30 days; negative: forever).
	Retention time.Duration
	// SuppressionPeriod is how long a recipient refused for good is sent nothing (default
	// 7 days; negative: until removed with `datajobs notifications unsuppress`).
	SuppressionPeriod time.Duration
}

// newDispatcher builds the leader's notification dispatcher, with the channels the
// configuration names.
func newDispatcher(cfg Config, db *store.Store, reg prometheus.Registerer) (*notify.Dispatcher, error) {
	n := cfg.Notifications
	channels := map[string]notify.Channel{}
	if n.SMTPURL != "" {
		password := ""
		if n.SMTPPasswordFile != "" {
			b, err := os.ReadFile(n.SMTPPasswordFile)
			if err != nil {
				return nil, fmt.Errorf("smtp password file: %w", err)
			}
			password = strings.TrimRight(string(b), "\r\n")
		}
		sender, err := email.New(email.Config{URL: n.SMTPURL, Password: password, From: n.SMTPFrom, AllowPlaintext: n.SMTPAllowPlaintext, RecipientDomains: n.SMTPRecipientDomains})
		if err != nil {
			return nil, err
		}
		channels[notify.ChannelEmail] = sender
	}
	hooks, err := newWebhooks(cfg, db)
	if err != nil {
		return nil, err
	}
	channels[notify.ChannelWebhook] = hooks
	return notify.New(notify.Config{
		Channels: channels, Targets: hooks.Targets, MaxAge: n.MaxAge,
		RateLimit:  notify.RateLimit{Messages: n.RateLimit, Window: n.RateWindow},
		ConsoleURL: cfg.UI.PublicURL, Settings: controller.Settings{Logger: cfg.Logger}, Metrics: notify.NewMetrics(reg),
		Retention: n.Retention, SuppressFor: n.SuppressionPeriod,
	}, db), nil
}

// newWebhooks builds the webhook channel: the teams' webhooks and the platform-wide one.
func newWebhooks(cfg Config, db *store.Store) (*notify.Webhooks, error) {
	n := cfg.Notifications
	keys, err := loadKeyring(cfg)
	if err != nil {
		return nil, err
	}
	w := &notify.Webhooks{Sender: webhook.NewSender(webhook.Config{AllowPrivate: cfg.NotificationWebhookAllowPrivate}), Store: db, Keys: keys}
	if n.WebhookURL == "" {
		return w, nil
	}
	if n.WebhookSecretFile == "" {
		return nil, fmt.Errorf("--notification-webhook-url needs --notification-webhook-secret-file (its Standard Webhooks signing secret)")
	}
	b, err := os.ReadFile(n.WebhookSecretFile)
	if err != nil {
		return nil, fmt.Errorf("notification webhook secret file: %w", err)
	}
	secret, err := notify.ParseSecret(string(b))
	if err != nil {
		return nil, err
	}
	if _, err := webhook.ParseURL(n.WebhookURL, cfg.NotificationWebhookAllowPrivate); err != nil {
		return nil, fmt.Errorf("--notification-webhook-url: %w", err)
	}
	w.Platform = webhook.Endpoint{URL: n.WebhookURL, Secret: secret, Format: webhook.FormatStandard}
	return w, nil
}

// notificationsState is the notifications' part of the /healthz detail: the channels
// whose last delivery failed; withErrors, with the error (it may name the mail server).
func notificationsState(d *notify.Dispatcher, withErrors bool) map[string]string {
	if d == nil {
		return nil
	}
	failing := d.Failing()
	if !withErrors {
		for ch := range failing {
			failing[ch] = "failing"
		}
	}
	return failing
}
