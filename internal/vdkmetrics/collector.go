// Package vdkmetrics exports VDK's per-job alerting gauges (--vdk-job-metrics, issue 25):
// taurus_datajob_info, taurus_datajob_notification_delay and
// taurus_datajob_termination_status, with VDK's names, labels and values, for the
// installations whose Alertmanager rules (VDK's JobDelay, JobFailurePlatform,
// JobFailureUser, JobSuccess) join them with kube-state-metrics. They are off by default:
// they label series by job and execution, which a large installation's Prometheus pays
// for. Every replica exports them, as VDK's do, read from the database on scrape.
package vdkmetrics

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/datajobs/datajobs/internal/job"
)

// Defaults of Config.
const (
	// DefaultMaxAge is how long one read of the database answers scrapes (VDK refreshes
	// its gauges every 5 s).
	DefaultMaxAge = 5 * time.Second
	// DefaultMaxJobs bounds the jobs one read exports (by name).
	DefaultMaxJobs = 20000
	// readTimeout bounds one read: a scrape never waits on a stuck database for long.
	readTimeout = 5 * time.Second
)

// Source reads the gauges' facts (store.Store).
type Source interface {
	VDKJobGauges(ctx context.Context, limit int) ([]job.VDKJobGauges, error)
}

// Config configures a Collector; the zero value takes the defaults.
type Config struct {
	MaxAge  time.Duration
	MaxJobs int
	Logger  *slog.Logger
	Now     func() time.Time
}

// Collector is a prometheus.Collector of VDK's gauges.
type Collector struct {
	src                 Source
	cfg                 Config
	info, delay, status *prometheus.Desc

	mu     sync.Mutex
	read   time.Time
	cached []job.VDKJobGauges
}

// New returns the collector of src's jobs.
func New(src Source, cfg Config) *Collector {
	if cfg.MaxAge <= 0 {
		cfg.MaxAge = DefaultMaxAge
	}
	if cfg.MaxJobs <= 0 {
		cfg.MaxJobs = DefaultMaxJobs
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Collector{
		src: src, cfg: cfg,
		info: prometheus.NewDesc("taurus_datajob_info", "Info about data jobs",
			[]string{"data_job", "team", "email_notified_on_success", "email_notified_on_user_error", "email_notified_on_platform_error"}, nil),
		delay: prometheus.NewDesc("taurus_datajob_notification_delay",
			"The time (in minutes) a job execution is allowed to be delayed from its schedule before an alert is triggered",
			[]string{"data_job"}, nil),
		status: prometheus.NewDesc("taurus_datajob_termination_status",
			"Termination status of data job executions (0 - Success, 1 - Platform error, 3 - User error)",
			[]string{"data_job", "execution_id"}, nil),
	}
}

// Describe sends the three gauges' descriptions.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.info
	ch <- c.delay
	ch <- c.status
}

// Collect sends the gauges of every job, from a read at most MaxAge old. A failed read
// sends the last one's (none before the first success) and is logged.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	for _, g := range c.jobs() {
		on := g.EnableExecutionNotifications
		ch <- prometheus.MustNewConstMetric(c.info, prometheus.GaugeValue, 1, g.Name, g.Team,
			contacts(on, g.Contacts.NotifiedOnJobSuccess), contacts(on, g.Contacts.NotifiedOnJobFailureUserError),
			contacts(on, g.Contacts.NotifiedOnJobFailurePlatformError))
		ch <- prometheus.MustNewConstMetric(c.delay, prometheus.GaugeValue, float64(g.DelayMinutes), g.Name)
		if g.LastExecutionID != "" {
			ch <- prometheus.MustNewConstMetric(c.status, prometheus.GaugeValue, alertValue(g.LastStatus), g.Name, g.LastExecutionID)
		}
	}
}

// jobs returns the cached read, reading again when it is older than MaxAge. Concurrent
// scrapes wait for one read.
func (c *Collector) jobs() []job.VDKJobGauges {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.cfg.Now()
	if !c.read.IsZero() && now.Sub(c.read) < c.cfg.MaxAge {
		return c.cached
	}
	ctx, cancel := context.WithTimeout(context.Background(), readTimeout)
	defer cancel()
	gs, err := c.src.VDKJobGauges(ctx, c.cfg.MaxJobs)
	if err != nil {
		c.cfg.Logger.Warn("vdk_job_metrics_read_failed", "error", err)
		return c.cached
	}
	if len(gs) == c.cfg.MaxJobs {
		c.cfg.Logger.Warn("vdk_job_metrics_truncated", "exported_jobs", len(gs))
	}
	c.read, c.cached = now, gs
	return gs
}

// contacts is VDK's label value of a contact list: the addresses joined by ";", empty
// when execution notifications are off (so VDK's rules, which select a non-empty value,
// send nothing).
func contacts(on bool, addrs []string) string {
	if !on {
		return ""
	}
	return strings.Join(addrs, ";")
}

// alertValue is VDK's ExecutionStatus.alertValue of s (-1: unknown).
func alertValue(s job.ExecutionStatus) float64 {
	switch s {
	case job.ExecSucceeded:
		return 0
	case job.ExecPlatformError:
		return 1
	case job.ExecSubmitted:
		return 2
	case job.ExecUserError:
		return 3
	case job.ExecSkipped:
		return 4
	case job.ExecRunning:
		return 5
	case job.ExecCancelled:
		return 6
	}
	return -1
}
