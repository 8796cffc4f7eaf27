// Package service holds the use cases of the datajobs API, shared by the REST and GraphQL
// layers: it validates input, applies VDK's merge rules and writes the desired state
// through the store. It is the only writer of desired state; it never talks to
// Kubernetes (the synchronizer does).
package service

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/secrets"
	"github.com/datajobs/datajobs/internal/trigger"
)

// Config configures the service.
type Config struct {
	// SupportedPythonVersions are the python versions a deployment may ask for
	// (default: job.DefaultSupportedPythonVersions).
	SupportedPythonVersions []string
	// DefaultPythonVersion is used when the first deployment of a job names none
	// (default: job.DefaultPythonVersion with the default supported versions, else the
	// first supported version). It must be supported.
	DefaultPythonVersion string
	// Resources are the defaults that fill unset resources (shown in responses as the
	// effective values) and the maxima a request may ask for. Zero fields take
	// job.DefaultResources.
	Resources job.ResourceBounds
	// MaxExecutionTimeout bounds a deployment's timeout_seconds (zero: no bound); below
	// 12 h it is also the timeout of a run whose policy sets none.
	MaxExecutionTimeout time.Duration
	// Sources bounds uploaded job sources; zero fields take defaults (see SourcesConfig).
	Sources SourcesConfig
	// APIVersion is reported by GET .../info (default "datajobs").
	APIVersion string
	// Now is the clock of deployment dates (default time.Now).
	Now func() time.Time

	// Executions.

	// LogsURLTemplate renders the logs_url of executions (see LogsURL); empty: no URL.
	LogsURLTemplate string
	// Logs reads the logs of running executions from the cluster (default nil: only the
	// logs stored at the end of an execution are served).
	Logs LogReader

	// WebhookAllowPrivate accepts team webhook URLs on loopback, link-local and private
	// addresses (--notification-webhook-allow-private; default false: refused with 400).
	WebhookAllowPrivate bool
	// Keys seals team webhook secrets (--secrets-key-file); nil: they are stored open, as
	// in auth mode none without a key file (docs/webhooks.md).
	Keys *secrets.Keyring
	// TriggerMetrics counts the events of signed trigger calls (nil: none).
	TriggerMetrics *trigger.Metrics
}

// Service runs the use cases of data jobs and their deployments.
type Service struct {
	cfg       Config
	store     Store
	schedules job.Schedules // parsed cron schedules, for next runs
}

// New returns a service on st. It fails when the configuration contradicts itself.
func New(cfg Config, st Store) (*Service, error) {
	if len(cfg.SupportedPythonVersions) == 0 {
		cfg.SupportedPythonVersions = job.DefaultSupportedPythonVersions()
		cfg.DefaultPythonVersion = cmp.Or(cfg.DefaultPythonVersion, job.DefaultPythonVersion)
	}
	cfg.SupportedPythonVersions = slices.Clone(cfg.SupportedPythonVersions)
	cfg.DefaultPythonVersion = cmp.Or(cfg.DefaultPythonVersion, cfg.SupportedPythonVersions[0])
	if !slices.Contains(cfg.SupportedPythonVersions, cfg.DefaultPythonVersion) {
		return nil, fmt.Errorf("default python version %q is not one of the supported versions %v", cfg.DefaultPythonVersion, cfg.SupportedPythonVersions)
	}
	cfg.Resources = cfg.Resources.WithDefaults()
	if err := (job.ResourceBounds{Max: cfg.Resources.Max}).Validate(cfg.Resources.Default); err != nil {
		return nil, fmt.Errorf("default resources: %w", err)
	}
	cfg.APIVersion = cmp.Or(cfg.APIVersion, "datajobs")
	cfg.Sources = cfg.Sources.withDefaults()
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Service{cfg: cfg, store: st}, nil
}

// Info is what GET .../info reports.
type Info struct {
	APIVersion              string
	SupportedPythonVersions []string
}

// Info reports the API version and the supported python versions.
func (s *Service) Info() Info {
	return Info{APIVersion: s.cfg.APIVersion, SupportedPythonVersions: slices.Clone(s.cfg.SupportedPythonVersions)}
}

// Config returns the configuration in force, defaults filled in.
func (s *Service) Config() Config { return s.cfg }

// now is the deployment clock at the database's precision, so that what a write returns
// equals what a later read shows.
func (s *Service) now() time.Time { return s.cfg.Now().UTC().Truncate(time.Microsecond) }

// ValidateUser checks who makes a change: it is stored and shown as last_deployed_by.
func ValidateUser(user string) error {
	if user == "" {
		return job.Invalid("deployed_by", "non-empty", `""`)
	}
	return job.ValidateText("deployed_by", user, 253)
}
