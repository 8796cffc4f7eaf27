package job

import (
	"cmp"
	"fmt"
	"slices"
	"time"
)

// RunPolicy is how the runs of a deployment are run: datajobs extensions of VDK's
// deployment that VDK clients never send. Every zero field means the platform's default,
// today's behaviour (3 retries, a 12 h deadline, one run at a time, UTC, a 30 minute
// starting deadline, a missed run skipped); Retries is a pointer because 0 retries is a
// choice of its own. It is stored as JSON in the desired deployment row.
type RunPolicy struct {
	// Retries is the number of retries of a failed run (the Job's backoffLimit).
	Retries *int32 `json:"retries,omitempty"`
	// TimeoutSeconds bounds one run (the Job's activeDeadlineSeconds).
	TimeoutSeconds int64 `json:"timeout_seconds,omitempty"`
	// ConcurrencyPolicy is the CronJob's: Allow, Forbid or Replace.
	ConcurrencyPolicy string `json:"concurrency_policy,omitempty"`
	// TimeZone is the IANA zone the schedule is read in (the CronJob's timeZone).
	TimeZone string `json:"time_zone,omitempty"`
	// StartingDeadlineSeconds is how late the CronJob controller may still start a run.
	StartingDeadlineSeconds int64 `json:"starting_deadline_seconds,omitempty"`
	// CatchUp is how many runs missed beyond the starting deadline (an outage) the leader
	// starts late; the other missed runs are recorded as skipped. 0 starts none.
	CatchUp int `json:"catch_up,omitempty"`
}

// Bounds of a run policy. MaxRetries keeps a crash-looping job from occupying a node for
// hours; MaxCatchUp keeps an outage of days from starting a flood of runs at once.
const (
	MaxRetries                 = 10
	MaxCatchUp                 = 10
	MinStartingDeadlineSeconds = 10 // the CronJob controller checks schedules about every 10 s
	MaxStartingDeadlineSeconds = 7 * 24 * 3600
)

// Concurrency policies, the CronJob's.
var concurrencyPolicies = []string{"Allow", "Forbid", "Replace"}

// Same reports whether two policies render the same objects.
func (p RunPolicy) Same(o RunPolicy) bool {
	a, b := p, o
	a.Retries, b.Retries = nil, nil
	return a == b && (p.Retries == nil) == (o.Retries == nil) && (p.Retries == nil || *p.Retries == *o.Retries)
}

// Validate checks each field the policy sets; maxTimeout bounds TimeoutSeconds (zero: no
// bound, only tests of this package alone leave it zero).
func (p RunPolicy) Validate(maxTimeout time.Duration) error {
	if r := p.Retries; r != nil && (*r < 0 || *r > MaxRetries) {
		return Invalid("retries", fmt.Sprintf("a number of retries from 0 to %d", MaxRetries), *r)
	}
	if p.TimeoutSeconds < 0 {
		return Invalid("timeout_seconds", "a positive number of seconds", p.TimeoutSeconds)
	}
	if maxTimeout > 0 && p.TimeoutSeconds > int64(maxTimeout/time.Second) {
		return Invalid("timeout_seconds", fmt.Sprintf("at most %d seconds (the installation's --max-execution-timeout)", int64(maxTimeout/time.Second)), p.TimeoutSeconds)
	}
	if c := p.ConcurrencyPolicy; c != "" && !slices.Contains(concurrencyPolicies, c) {
		return Invalid("concurrency_policy", "one of Allow, Forbid and Replace", quote(c))
	}
	if err := ValidateTimeZone(p.TimeZone); err != nil {
		return err
	}
	if s := p.StartingDeadlineSeconds; s != 0 && (s < MinStartingDeadlineSeconds || s > MaxStartingDeadlineSeconds) {
		return Invalid("starting_deadline_seconds", fmt.Sprintf("from %d to %d seconds", MinStartingDeadlineSeconds, MaxStartingDeadlineSeconds), s)
	}
	if p.CatchUp < 0 || p.CatchUp > MaxCatchUp {
		return Invalid("catch_up", fmt.Sprintf("a number of runs from 0 to %d", MaxCatchUp), p.CatchUp)
	}
	return nil
}

// ValidateTimeZone checks an IANA time zone name as the CronJob controller will read it
// (the Go time zone database); empty is the default, UTC. "Local" is refused: it would be
// the zone of whichever controller-manager runs the schedule.
func ValidateTimeZone(tz string) error {
	if tz == "" {
		return nil
	}
	if _, err := time.LoadLocation(tz); err != nil || tz == "Local" {
		return Invalid("time_zone", `an IANA time zone name such as "Europe/Sofia" or "UTC"`, quote(tz))
	}
	return nil
}

// PolicyChange is the part of a deployment request that sets run policy fields: each
// non-nil field replaces the stored one; an absent field keeps it, on POST too, so a VDK
// client that redeploys does not reset what a datajobs client set. Its JSON is the
// request body's fields (and the stored form of a config.ini's, store.SourcesPolicy).
type PolicyChange struct {
	Retries                 *int32  `json:"retries,omitempty"`
	TimeoutSeconds          *int64  `json:"timeout_seconds,omitempty"`
	ConcurrencyPolicy       *string `json:"concurrency_policy,omitempty"`
	TimeZone                *string `json:"time_zone,omitempty"`
	StartingDeadlineSeconds *int64  `json:"starting_deadline_seconds,omitempty"`
	CatchUp                 *int    `json:"catch_up,omitempty"`
	// ExecutionProfile is config.ini's execution_profile: not a run policy field but a
	// deployment's (DeploymentChange.ExecutionProfile), carried with the keys of the
	// version's config.ini that a deploy applies; ApplyTo ignores it.
	ExecutionProfile *string `json:"execution_profile,omitempty"`
	// ExecutionTarget is the body's execution_target, carried the same way (a datajobs
	// extension; DeploymentChange.ExecutionTarget).
	ExecutionTarget *string `json:"execution_target,omitempty"`
}

// IsZero reports a change that sets no field.
func (c PolicyChange) IsZero() bool { return c == PolicyChange{} }

// Or returns c with every field c does not give taken from fallback: a request's own
// fields win over the deployed version's config.ini.
func (c PolicyChange) Or(fallback PolicyChange) PolicyChange {
	c.Retries = cmp.Or(c.Retries, fallback.Retries)
	c.TimeoutSeconds = cmp.Or(c.TimeoutSeconds, fallback.TimeoutSeconds)
	c.ConcurrencyPolicy = cmp.Or(c.ConcurrencyPolicy, fallback.ConcurrencyPolicy)
	c.TimeZone = cmp.Or(c.TimeZone, fallback.TimeZone)
	c.StartingDeadlineSeconds = cmp.Or(c.StartingDeadlineSeconds, fallback.StartingDeadlineSeconds)
	c.CatchUp = cmp.Or(c.CatchUp, fallback.CatchUp)
	c.ExecutionProfile = cmp.Or(c.ExecutionProfile, fallback.ExecutionProfile)
	c.ExecutionTarget = cmp.Or(c.ExecutionTarget, fallback.ExecutionTarget)
	return c
}

// ApplyTo returns p with every field the change gives replaced.
func (c PolicyChange) ApplyTo(p RunPolicy) RunPolicy {
	if c.Retries != nil {
		p.Retries = new(*c.Retries)
	}
	set(&p.TimeoutSeconds, c.TimeoutSeconds)
	set(&p.ConcurrencyPolicy, c.ConcurrencyPolicy)
	set(&p.TimeZone, c.TimeZone)
	set(&p.StartingDeadlineSeconds, c.StartingDeadlineSeconds)
	set(&p.CatchUp, c.CatchUp)
	return p
}

func set[T any](dst *T, v *T) {
	if v != nil {
		*dst = *v
	}
}

// The platform defaults of a run policy, today's behaviour (kube.RenderConfig renders them).
const (
	DefaultRetries                 int32 = 3
	DefaultTimeoutSeconds          int64 = 12 * 3600
	DefaultConcurrencyPolicy             = "Forbid"
	DefaultTimeZone                      = "UTC"
	DefaultStartingDeadlineSeconds int64 = 1800
)

// Effective returns p with every unset field at its default, as it is rendered;
// defaultTimeout is the installation's (DefaultTimeoutSeconds within its maximum).
func (p RunPolicy) Effective(defaultTimeout int64) RunPolicy {
	if p.Retries == nil {
		p.Retries = new(DefaultRetries)
	}
	p.TimeoutSeconds = cmp.Or(p.TimeoutSeconds, defaultTimeout, DefaultTimeoutSeconds)
	p.ConcurrencyPolicy = cmp.Or(p.ConcurrencyPolicy, DefaultConcurrencyPolicy)
	p.TimeZone = cmp.Or(p.TimeZone, DefaultTimeZone)
	p.StartingDeadlineSeconds = cmp.Or(p.StartingDeadlineSeconds, DefaultStartingDeadlineSeconds)
	return p
}

// DefaultTimeout is the timeout of a run whose policy sets none: DefaultTimeoutSeconds,
// cut down to the installation's maximum.
func DefaultTimeout(maxTimeout time.Duration) int64 {
	if m := int64(maxTimeout / time.Second); m > 0 && m < DefaultTimeoutSeconds {
		return m
	}
	return DefaultTimeoutSeconds
}
