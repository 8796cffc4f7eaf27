package job

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"strings"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Defaults of a data job's configuration when a request leaves a field out (VDK's).
const (
	DefaultGenerateKeytab                 = true
	DefaultEnableExecutionNotifications   = true
	DefaultNotificationDelayPeriodMinutes = 240
)

// Limits on free-text input. They keep rows, labels and log lines small; the request body
// limit alone would allow a megabyte in a single field.
const (
	maxDescriptionLen = 10_000
	maxShortTextLen   = 253 // db_default_type, contact addresses, deployed_by
	maxContacts       = 100 // per contact list
	maxDelayMinutes   = 366 * 24 * 60
)

// versionPattern is an OCI image tag: the job version becomes the tag of the job image.
var versionPattern = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$`)

// Absolute caps on resource quantities, whatever the configuration: above them the
// conversion to millicores or bytes would overflow an int64.
var (
	maxCPUQuantity    = resource.MustParse("1M")  // one million cores
	maxMemoryQuantity = resource.MustParse("1Pi") // one pebibyte
)

// ValidateJob checks the configuration of a data job given on create or update. The
// caller has already filled the team from the path and the defaults of absent fields.
func ValidateJob(j Job) error {
	if err := ValidateName(j.Name); err != nil {
		return err
	}
	if err := ValidateTeam(j.Team); err != nil {
		return err
	}
	if err := ValidateText("description", j.Description, maxDescriptionLen); err != nil {
		return err
	}
	if err := ValidateText("config.db_default_type", j.DBDefaultType, maxShortTextLen); err != nil {
		return err
	}
	if err := ValidateSchedule(j.Schedule); err != nil {
		return WithParam(err, "config.schedule.schedule_cron")
	}
	if j.NotificationDelayPeriodMinutes < 0 || j.NotificationDelayPeriodMinutes > maxDelayMinutes {
		return Invalid("config.notification_delay_period_minutes", fmt.Sprintf("between 0 and %d", maxDelayMinutes), j.NotificationDelayPeriodMinutes)
	}
	lists := []struct {
		name string
		list []string
	}{
		{"notified_on_job_failure_user_error", j.Contacts.NotifiedOnJobFailureUserError},
		{"notified_on_job_failure_platform_error", j.Contacts.NotifiedOnJobFailurePlatformError},
		{"notified_on_job_success", j.Contacts.NotifiedOnJobSuccess},
		{"notified_on_job_deploy", j.Contacts.NotifiedOnJobDeploy},
	}
	for _, l := range lists {
		field := "config.contacts." + l.name
		if len(l.list) > maxContacts {
			return Invalid(field, fmt.Sprintf("a list of at most %d addresses", maxContacts), fmt.Sprintf("%d addresses", len(l.list)))
		}
		for _, c := range l.list {
			if c == "" {
				return Invalid(field, "a list of non-empty addresses", quote(c))
			}
			if err := ValidateText(field, c, maxShortTextLen); err != nil {
				return err
			}
		}
	}
	return nil
}

// ValidateText checks free text: valid UTF-8 without NUL characters (PostgreSQL text
// cannot hold them) and at most max bytes long.
func ValidateText(field, s string, max int) error {
	if len(s) > max {
		return Invalid(field, fmt.Sprintf("at most %d bytes long", max), fmt.Sprintf("%d bytes", len(s)))
	}
	if !utf8.ValidString(s) || strings.ContainsRune(s, 0) {
		return Invalid(field, "valid UTF-8 text without NUL characters", quote(s))
	}
	return nil
}

// ValidateVersion checks a job or VDK version: it becomes an image tag, so it must be a
// valid OCI tag (letters, digits, '_', '.', '-', at most 128 characters).
func ValidateVersion(field, v string) error {
	if !versionPattern.MatchString(v) {
		return Invalid(field, "a valid image tag (letters, digits, '_', '.' and '-', at most 128 characters, not starting with '.' or '-')", quote(v))
	}
	return nil
}

// DeploymentChange is what a deployment request asks to change. A nil field, or a zero
// resource, was not given: POST fills some of them (see service), PATCH keeps the stored
// value. Resources given by a user are always positive, so zero is free to mean "not given".
type DeploymentChange struct {
	JobVersion    *string
	VDKVersion    *string
	PythonVersion *string
	Schedule      *string
	Enabled       *bool
	Resources     Resources
	Policy        PolicyChange
	// ExecutionProfile names the profile to select (docs/profiles.md); nil keeps the
	// deployment's (DefaultProfile on a first deployment).
	ExecutionProfile *string
	// ExecutionTarget names the execution target to run in (docs/targets.md); "" is the
	// team's default target, nil keeps the deployment's.
	ExecutionTarget *string
}

// Validate checks every field the change gives, on its own. Checks across fields that
// depend on the stored deployment (limit at least request) run on the merged result.
func (c DeploymentChange) Validate(supportedPython []string, bounds ResourceBounds) error {
	if c.JobVersion != nil {
		if err := ValidateVersion("job_version", *c.JobVersion); err != nil {
			return err
		}
	}
	// An empty VDK version means "the default of the python version", as in VDK.
	if c.VDKVersion != nil && *c.VDKVersion != "" {
		if err := ValidateVersion("vdk_version", *c.VDKVersion); err != nil {
			return err
		}
	}
	if c.PythonVersion != nil {
		if err := ValidatePythonVersion(*c.PythonVersion, supportedPython); err != nil {
			return err
		}
	}
	if c.Schedule != nil {
		if err := ValidateSchedule(*c.Schedule); err != nil {
			return err
		}
	}
	if c.ExecutionProfile != nil {
		if errs := validation.IsDNS1123Label(*c.ExecutionProfile); len(errs) > 0 {
			return kubeInvalid("execution_profile", "the name of an execution profile (a DNS label)", *c.ExecutionProfile, errs)
		}
	}
	if c.ExecutionTarget != nil && *c.ExecutionTarget != "" {
		if errs := validation.IsDNS1123Label(*c.ExecutionTarget); len(errs) > 0 {
			return kubeInvalid("execution_target", "the name of an execution target (a DNS label), or empty for the team's default", *c.ExecutionTarget, errs)
		}
	}
	// Each given resource within its maximum; ResourceBounds.Validate checks the merged
	// deployment as a whole.
	given := []struct {
		name       string
		value, max int64
		cpu        bool
	}{
		{"resources.cpu_request", c.Resources.CPURequestMillis, bounds.Max.CPURequestMillis, true},
		{"resources.cpu_limit", c.Resources.CPULimitMillis, bounds.Max.CPULimitMillis, true},
		{"resources.memory_request", c.Resources.MemoryRequestBytes, bounds.Max.MemoryRequestBytes, false},
		{"resources.memory_limit", c.Resources.MemoryLimitBytes, bounds.Max.MemoryLimitBytes, false},
	}
	for _, f := range given {
		if f.value < 0 {
			return Invalid(f.name, "positive", formatQuantity(f.value, f.cpu))
		}
		if f.max > 0 && f.value > f.max {
			return Invalid(f.name, "at most "+formatQuantity(f.max, f.cpu), formatQuantity(f.value, f.cpu))
		}
	}
	return nil
}

// ApplyTo returns d with every field the change gives replaced; resources merge per field.
// A new python version resets the VDK version to its default unless the change sets one,
// as VDK does: a VDK version is tied to the python version it was built for.
func (c DeploymentChange) ApplyTo(d Deployment) Deployment {
	if c.JobVersion != nil {
		d.JobVersion = *c.JobVersion
	}
	if c.PythonVersion != nil && *c.PythonVersion != d.PythonVersion {
		d.PythonVersion = *c.PythonVersion
		d.VDKVersion = ""
	}
	if c.VDKVersion != nil {
		d.VDKVersion = *c.VDKVersion
	}
	if c.Schedule != nil { // as sent: the caller resolves it (ResolveSchedule)
		d.Schedule, d.HashedSchedule = *c.Schedule, ""
	}
	if c.Enabled != nil {
		d.Enabled = *c.Enabled
	}
	d.Policy = c.Policy.ApplyTo(d.Policy)
	if c.ExecutionProfile != nil {
		d.ExecutionProfile = *c.ExecutionProfile
	}
	if c.ExecutionTarget != nil {
		d.ExecutionTarget = *c.ExecutionTarget
	}
	pick := func(v, cur int64) int64 {
		if v != 0 {
			return v
		}
		return cur
	}
	d.Resources = Resources{
		CPURequestMillis:   pick(c.Resources.CPURequestMillis, d.Resources.CPURequestMillis),
		CPULimitMillis:     pick(c.Resources.CPULimitMillis, d.Resources.CPULimitMillis),
		MemoryRequestBytes: pick(c.Resources.MemoryRequestBytes, d.Resources.MemoryRequestBytes),
		MemoryLimitBytes:   pick(c.Resources.MemoryLimitBytes, d.Resources.MemoryLimitBytes),
	}
	return d
}

// CPUFromCores converts VDK's CPU number (cores, fractions allowed) into millicores.
func CPUFromCores(field string, cores float64) (int64, error) {
	if math.IsNaN(cores) || cores <= 0 || cores > float64(maxCPUQuantity.Value()) {
		return 0, Invalid(field, "a positive number of cores of at most "+maxCPUQuantity.String(), cores)
	}
	m := int64(math.Ceil(cores * 1000))
	return m, nil
}

// MemoryFromMiB converts VDK's memory number (MiB) into bytes.
func MemoryFromMiB(field string, mib float64) (int64, error) {
	if math.IsNaN(mib) || mib <= 0 || mib > float64(maxMemoryQuantity.Value()>>20) {
		return 0, Invalid(field, "a positive number of MiB of at most "+fmt.Sprint(maxMemoryQuantity.Value()>>20), mib)
	}
	return int64(math.Ceil(mib * (1 << 20))), nil
}

// CPUFromQuantity parses a positive Kubernetes CPU quantity ("500m", "2") into millicores.
func CPUFromQuantity(field, s string) (int64, error) {
	q, err := resource.ParseQuantity(s)
	if err != nil || q.Sign() <= 0 || q.Cmp(maxCPUQuantity) > 0 {
		return 0, Invalid(field, `a positive Kubernetes CPU quantity of at most `+maxCPUQuantity.String()+`, such as "500m" or "2"`, quote(s))
	}
	return q.MilliValue(), nil
}

// MemoryFromQuantity parses a positive Kubernetes memory quantity ("512Mi", "1G") into bytes.
func MemoryFromQuantity(field, s string) (int64, error) {
	q, err := resource.ParseQuantity(s)
	if err != nil || q.Sign() <= 0 || q.Cmp(maxMemoryQuantity) > 0 {
		return 0, Invalid(field, `a positive Kubernetes memory quantity of at most `+maxMemoryQuantity.String()+`, such as "512Mi" or "1Gi"`, quote(s))
	}
	return q.Value(), nil
}

// WithParam renames the parameter of an Invalid error produced by a shared validator, so
// that the message names the field as the user sent it (nil stays nil).
func WithParam(err error, param string) error {
	var e *Error
	if !errors.As(err, &e) || e.Kind != KindInvalid {
		return err
	}
	c := *e
	c.What = fmt.Sprintf("Parameter %s is not valid.", param)
	c.Countermeasures = fmt.Sprintf("Correct %s and retry.", param)
	return &c
}
