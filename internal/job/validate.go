package job

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/robfig/cron/v3"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
)

var (
	// teamPattern is a DNS label (RFC 1123): the team goes into a Kubernetes label value.
	teamPattern = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)
	cronParser  = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)
	// cronMacros are the descriptors Kubernetes CronJobs accept (no @every).
	cronMacros = []string{"@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly"}
)

// Bounds of job names (VDK's) and schedules. A CronJob name may have 52 characters, so
// that the names of its Jobs (name-<minutes>) stay DNS labels.
const (
	minNameLen     = 6
	maxNameLen     = 50
	maxScheduleLen = 512 // a cron expression listing every minute, hour and day fits
)

// ValidateName checks a job name. It is the CronJob's name and a label value, so it must
// be what Kubernetes accepts as both (a DNS-1123 label, checked by Kubernetes's own
// function, so that no name passes here and fails in the apiserver), and what VDK
// accepts: 6 to 50 characters, starting with a letter.
func ValidateName(name string) error {
	const want = "starting with a lowercase letter, ending with a letter or digit, only lowercase alphanumeric characters or dashes, and between 6 and 50 characters"
	if len(name) < minNameLen || len(name) > maxNameLen || name[0] < 'a' || name[0] > 'z' {
		return Invalid("job_name", want, quote(name))
	}
	if errs := validation.IsDNS1123Label(name); len(errs) > 0 {
		e := Invalid("job_name", want, quote(name))
		e.Why += " Kubernetes says: " + strings.Join(errs, "; ") + "."
		return e
	}
	return nil
}

// ValidateTeam checks a team name: non-empty, at most 63 characters and a DNS label.
func ValidateTeam(team string) error {
	if !teamPattern.MatchString(team) {
		return Invalid("team", "a non-empty DNS label of at most 63 characters (lowercase letters, digits and dashes, starting and ending with a letter or digit)", quote(team))
	}
	return nil
}

// ValidateSchedule checks a cron schedule the way Kubernetes will: five fields or one of
// the @hourly-style macros, at most 512 bytes; hashed fields (H, hashed.go) must
// resolve to such an expression. Time zones in the expression are refused;
// empty means "never". Surrounding spaces pass (Kubernetes ignores them, and imported
// CronJobs keep their schedule as it is); the API trims them before storing
// (CleanSchedule).
func ValidateSchedule(schedule string) error {
	if schedule == "" {
		return nil
	}
	if len(schedule) > maxScheduleLen {
		return Invalid("schedule_cron", fmt.Sprintf("at most %d bytes long", maxScheduleLen), fmt.Sprintf("%d bytes", len(schedule)))
	}
	s := strings.TrimSpace(schedule)
	if strings.Contains(s, "TZ=") {
		return Invalid("schedule_cron", "a cron expression without a time zone (TZ= and CRON_TZ= are not supported)", quote(schedule))
	}
	if strings.HasPrefix(s, "@") && !slices.Contains(cronMacros, s) {
		return Invalid("schedule_cron", "five cron fields or one of "+strings.Join(cronMacros, ", "), quote(schedule))
	}
	if HasHashedFields(s) { // any key: the values differ per job, the form does not
		resolved, err := ResolveHashed(s, "validate/validate")
		if err != nil {
			e := Invalid("schedule_cron", "a cron expression whose H fields are H, H(lo-hi), H/step or H(lo-hi)/step", quote(schedule))
			msg := err.Error()
			e.Why += " " + strings.ToUpper(msg[:1]) + msg[1:] + "."
			return e
		}
		s = resolved
	}
	if _, err := cronParser.Parse(s); err != nil {
		e := Invalid("schedule_cron", "a valid cron expression of five fields (minute hour day-of-month month day-of-week) or a macro such as @hourly", quote(schedule))
		e.Why += " " + err.Error() + "."
		return e
	}
	return nil
}

// CleanSchedule is the schedule as the API stores it: without the surrounding spaces a
// user may have typed, so that the job, its deployment and its CronJob show the same
// expression.
func CleanSchedule(schedule string) string { return strings.TrimSpace(schedule) }

// ValidatePythonVersion checks that the version is one of the supported ones. VDK answers
// 409 Conflict for an unsupported version, and so do we.
func ValidatePythonVersion(version string, supported []string) error {
	if slices.Contains(supported, version) {
		return nil
	}
	return NewError(KindConflict, fmt.Sprintf("Not supported python version: %q.", version),
		"The service is configured to run data jobs only on these python versions: "+strings.Join(supported, ", ")+".",
		"The deployment was not changed.", "Choose one of the supported python versions (GET .../info lists them).")
}

// ResourceBounds are the configured defaults and maxima of deployment resources.
type ResourceBounds struct {
	Default Resources // used for every zero field
	Max     Resources // zero fields mean "no maximum"
}

// Effective fills the zero fields of r from the defaults.
func (b ResourceBounds) Effective(r Resources) Resources {
	pick := func(v, d int64) int64 {
		if v != 0 {
			return v
		}
		return d
	}
	return Resources{
		CPURequestMillis:   pick(r.CPURequestMillis, b.Default.CPURequestMillis),
		CPULimitMillis:     pick(r.CPULimitMillis, b.Default.CPULimitMillis),
		MemoryRequestBytes: pick(r.MemoryRequestBytes, b.Default.MemoryRequestBytes),
		MemoryLimitBytes:   pick(r.MemoryLimitBytes, b.Default.MemoryLimitBytes),
	}
}

// Validate checks the resources a user asked for: positive, each limit at least its
// request (after defaults are filled in), and within the configured maxima.
func (b ResourceBounds) Validate(r Resources) error {
	fields := []struct {
		name       string
		value, max int64
		cpu        bool
	}{
		{"resources.cpu_request", r.CPURequestMillis, b.Max.CPURequestMillis, true},
		{"resources.cpu_limit", r.CPULimitMillis, b.Max.CPULimitMillis, true},
		{"resources.memory_request", r.MemoryRequestBytes, b.Max.MemoryRequestBytes, false},
		{"resources.memory_limit", r.MemoryLimitBytes, b.Max.MemoryLimitBytes, false},
	}
	for _, f := range fields {
		if f.value < 0 {
			return Invalid(f.name, "positive", formatQuantity(f.value, f.cpu))
		}
		if f.max > 0 && f.value > f.max {
			return Invalid(f.name, "at most "+formatQuantity(f.max, f.cpu), formatQuantity(f.value, f.cpu))
		}
	}
	eff := b.Effective(r)
	if eff.CPULimitMillis < eff.CPURequestMillis {
		return Invalid("resources.cpu_limit", "at least the CPU request ("+formatQuantity(eff.CPURequestMillis, true)+")", formatQuantity(eff.CPULimitMillis, true))
	}
	if eff.MemoryLimitBytes < eff.MemoryRequestBytes {
		return Invalid("resources.memory_limit", "at least the memory request ("+formatQuantity(eff.MemoryRequestBytes, false)+")", formatQuantity(eff.MemoryLimitBytes, false))
	}
	return nil
}

func formatQuantity(v int64, cpu bool) string {
	if cpu {
		return resource.NewMilliQuantity(v, resource.DecimalSI).String()
	}
	return resource.NewQuantity(v, resource.BinarySI).String()
}

func quote(s string) string { return fmt.Sprintf("%q", s) }
