package cli

import (
	"github.com/spf13/pflag"

	"github.com/datajobs/datajobs/internal/notify"
	"github.com/datajobs/datajobs/internal/server"
)

// registerNotificationFlags: e-mail notifications of deploys and runs (issue 25,
// docs/notifications.md).
func registerNotificationFlags(f *pflag.FlagSet, cfg *server.Config) {
	n := &cfg.Notifications
	f.StringVar(&n.SMTPURL, "smtp-url", "", "mail server of the notifications, smtp://[user[:password]@]host[:port] (STARTTLS; plain text only on loopback or with --smtp-allow-plaintext) or smtps://… (implicit TLS); empty: no e-mail is sent")
	f.StringVar(&n.SMTPPasswordFile, "smtp-password-file", "", "file holding the SMTP password (replaces the URL's; keeps it out of the process listing)")
	f.StringSliceVar(&n.SMTPRecipientDomains, "smtp-recipient-domains", nil, "the only domains notification mail goes to, repeatable or comma-separated (default: any)")
	f.BoolVar(&n.SMTPAllowPlaintext, "smtp-allow-plaintext", false, "send mail in plain text to an smtp:// server that offers no STARTTLS (off: refused, and retried, unless the server is on loopback)")
	f.StringVar(&n.SMTPFrom, "smtp-from", "", "sender address of the notification mails (required with --smtp-url)")
	f.DurationVar(&n.MaxAge, "notification-max-age", notify.MaxAgeDefault, "how long a notification is retried before it is marked failed")
	f.IntVar(&n.RateLimit, "notification-rate-limit", notify.RateLimitMessagesDefault, "most e-mails per team and recipient per --notification-rate-window, and as many again for execution failures; more go as one digest (negative: no limit)")
	f.DurationVar(&n.RateWindow, "notification-rate-window", notify.RateWindowDefault, "period of --notification-rate-limit")
	f.DurationVar(&n.Retention, "notification-retention", notify.RetentionDefault, "how long delivered, failed, bounced and suppressed notifications are kept before the leader deletes them (negative: forever)")
	f.DurationVar(&n.SuppressionPeriod, "notification-suppression-period", notify.SuppressForDefault, "how long a recipient whose mail server refused it for good (5xx to RCPT TO) is sent nothing (negative: until `datajobs notifications unsuppress`)")
	f.StringVar(&n.WebhookURL, "notification-webhook-url", "", "platform-wide webhook every notification event goes to (Standard Webhooks, signed)")
	f.StringVar(&n.WebhookSecretFile, "notification-webhook-secret-file", "", "file holding that webhook's signing secret, whsec_<base64> (required with --notification-webhook-url)")
	f.BoolVar(&n.VDKJobMetrics, "vdk-job-metrics", false, "export VDK's per-job alerting gauges on /metrics (taurus_datajob_info, taurus_datajob_notification_delay, taurus_datajob_termination_status) for Alertmanager rules written for VDK; off by default: they label series by job")
}
