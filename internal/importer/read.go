package importer

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/kube"
)

// Labels and annotations of the CronJobs the VDK Control Service creates (reference,
// section 4). They sit on the job template; CronJobs made by hand may carry them on the
// CronJob itself, so both places are read, the job template first.
const (
	// LabelVDKType is "DataJob" on every data job's template.
	LabelVDKType = "com.vmware.taurus/type"
	// LabelVDKName is the data job name.
	LabelVDKName = "com.vmware.taurus/name"
	// LabelVDKVersion is the deployed job version (a git commit sha).
	LabelVDKVersion = "com.vmware.taurus/version"
	// AnnotationVDKDeployedBy is who deployed the job.
	AnnotationVDKDeployedBy = "com.vmware.taurus/deployed-by"
	// AnnotationVDKDeployedDate is when, as a Java OffsetDateTime.
	AnnotationVDKDeployedDate = "com.vmware.taurus/deployed-date"
	// AnnotationVDKUnscheduled is "true" when the schedule is the never-firing placeholder.
	AnnotationVDKUnscheduled = "com.vmware.taurus/unscheduled"
	// AnnotationVDKPythonVersion is the deployment's python version.
	AnnotationVDKPythonVersion = "com.vmware.taurus/python-version"
	// VDKTypeDataJob is the value of LabelVDKType on data jobs.
	VDKTypeDataJob = "DataJob"
	// vdkInitContainer is the init container that copies vdk into the pod; its image tag
	// is the VDK version.
	vdkInitContainer = "vdk"
	// DefaultDeployedBy is the deployer recorded when the CronJob names none.
	DefaultDeployedBy = "import"
)

// source says how a CronJob was selected for import.
type source string

const (
	sourceVDK      source = "vdk"      // created by the VDK Control Service (its labels)
	sourceSelected source = "selected" // matched --selector
)

// isVDK reports whether the CronJob looks like one the VDK Control Service created.
func isVDK(cj *batchv1.CronJob) bool {
	l := cj.Spec.JobTemplate.Labels
	return l[LabelVDKType] == VDKTypeDataJob || l[LabelVDKName] != ""
}

// mapping is how CronJobs become data jobs: the choices of the import command.
type mapping struct {
	teamFromLabel        string
	defaultTeam          string
	defaultPythonVersion string
	supportedPython      []string
	bounds               job.ResourceBounds
}

// candidate is a CronJob read as a data job and its deployment, ready to store.
type candidate struct {
	job        job.Job
	deployment job.Deployment
	// notes are facts about the import the operator should know (a defaulted python
	// version, resources outside the bounds); the job is imported regardless.
	notes []string
}

// skip is why a CronJob is not imported.
type skip struct{ reason string }

func (s *skip) Error() string { return s.reason }

func skipf(format string, args ...any) *skip { return &skip{reason: fmt.Sprintf(format, args...)} }

// read maps a CronJob to a data job and deployment whose rendering, with the CronJob's
// spec adopted, is that very spec: so the synchronizer's first pass changes nothing but
// metadata. It returns a *skip when the CronJob cannot be imported as it is.
func (m mapping) read(cj *batchv1.CronJob) (candidate, error) {
	var c candidate
	main, err := importable(cj)
	if err != nil {
		return c, err
	}
	team, err := m.team(cj, main)
	if err != nil {
		return c, err
	}
	schedule := cj.Spec.Schedule
	if schedule == kube.NeverSchedule {
		schedule = "" // VDK's "unscheduled" placeholder, and ours: February 30th
	}
	if err := job.ValidateSchedule(schedule); err != nil {
		return c, skipf("schedule %q is not one datajobs accepts (five fields or a macro, no time zone in the expression)", schedule)
	}
	version, vdkVersion, err := c.versions(cj, main)
	if err != nil {
		return c, err
	}
	python := m.python(cj, &c)
	res, err := resources(main)
	if err != nil {
		return c, err
	}
	if err := m.bounds.Validate(res); err != nil {
		c.notes = append(c.notes, "resources outside the configured bounds: a later change of this deployment must set resources within them")
	}
	deployedBy := meta(cj, AnnotationVDKDeployedBy, false)
	if deployedBy == "" || job.ValidateText("deployed_by", deployedBy, 253) != nil {
		deployedBy = DefaultDeployedBy
	}
	deployedDate, ok := parseDate(meta(cj, AnnotationVDKDeployedDate, false))
	if !ok {
		deployedDate = cj.CreationTimestamp.UTC()
	}
	spec, err := json.Marshal(cj.Spec)
	if err != nil {
		return c, fmt.Errorf("marshal spec of cronjob %s: %w", cj.Name, err)
	}
	c.job = jobOf(cj.Name, team, schedule, main)
	if err := job.ValidateJob(c.job); err != nil {
		return c, skipf("%s", oneLine(err))
	}
	c.deployment = job.Deployment{
		JobName:       cj.Name,
		JobVersion:    version,
		VDKVersion:    vdkVersion,
		PythonVersion: python,
		Schedule:      schedule,
		Resources:     res,
		Enabled:       cj.Spec.Suspend == nil || !*cj.Spec.Suspend,
		Adopted:       &job.Adoption{CronJobUID: string(cj.UID), Spec: spec},
		DeployedBy:    deployedBy,
		DeployedDate:  deployedDate,
		Status:        job.StatusSynced,
	}
	return c, nil
}

// importable returns the main container of a CronJob datajobs may take over, or the
// *skip that says why it may not.
func importable(cj *batchv1.CronJob) (*corev1.Container, error) {
	if err := job.ValidateName(cj.Name); err != nil {
		return nil, skipf("invalid job name: 6 to 50 lowercase letters, digits or dashes, starting with a letter")
	}
	if cj.Labels[kube.LabelManagedBy] == kube.ManagedByValue {
		return nil, skipf("already managed by datajobs")
	}
	if cj.DeletionTimestamp != nil {
		return nil, skipf("being deleted")
	}
	if ref := controllerOf(cj); ref != "" {
		return nil, skipf("controlled by %s, which would fight datajobs over it", ref)
	}
	main := mainContainer(cj.Spec.JobTemplate.Spec.Template.Spec.Containers, cj.Name)
	if main == nil {
		return nil, skipf("no container")
	}
	return main, nil
}

// versions reads the job version (the main image's tag) and the vdk version (the tag of
// VDK's init container, "" without one).
func (c *candidate) versions(cj *batchv1.CronJob, main *corev1.Container) (version, vdkVersion string, err error) {
	if strings.Contains(main.Image, "@") {
		return "", "", skipf("image %q of container %s is pinned by digest: datajobs deploys job versions as image tags", main.Image, main.Name)
	}
	version = imageTag(main.Image)
	if version == "" {
		return "", "", skipf("image %q of container %s has no tag: datajobs deploys job versions as image tags", main.Image, main.Name)
	}
	if label := meta(cj, LabelVDKVersion, true); label != "" && label != version {
		c.notes = append(c.notes, fmt.Sprintf("label %s=%s differs from the image tag; the image tag %s is what runs and is the job version", LabelVDKVersion, label, version))
	}
	if err := job.ValidateVersion("job_version", version); err != nil {
		return "", "", skipf("image tag %q is not a valid job version", version)
	}
	inits := cj.Spec.JobTemplate.Spec.Template.Spec.InitContainers
	if i := slices.IndexFunc(inits, func(c corev1.Container) bool { return c.Name == vdkInitContainer }); i >= 0 {
		vdkVersion = imageTag(inits[i].Image)
	}
	return version, vdkVersion, nil
}

// python is the CronJob's python version annotation, else the default; either way the
// job is imported, with a note when it is defaulted or not supported here.
func (m mapping) python(cj *batchv1.CronJob, c *candidate) string {
	python := meta(cj, AnnotationVDKPythonVersion, false)
	switch {
	case python == "":
		python = m.defaultPythonVersion
		c.notes = append(c.notes, "no python version annotation: recorded as "+python)
	case !slices.Contains(m.supportedPython, python):
		c.notes = append(c.notes, fmt.Sprintf("python %s is not supported here: the job keeps running, and its next deployment must choose one of %s", python, strings.Join(m.supportedPython, ", ")))
	}
	return python
}

// jobOf is the data job of a CronJob: its configuration from the main container's
// environment (VDK's variables), the rest at VDK's defaults.
func jobOf(name, team, schedule string, main *corev1.Container) job.Job {
	envs := plainEnv(main)
	j := job.Job{
		Name:                           name,
		Team:                           team,
		Schedule:                       schedule,
		DBDefaultType:                  envs[kube.EnvDBDefaultType],
		GenerateKeytab:                 job.DefaultGenerateKeytab,
		EnableExecutionNotifications:   job.DefaultEnableExecutionNotifications,
		NotificationDelayPeriodMinutes: job.DefaultNotificationDelayPeriodMinutes,
		Contacts: job.Contacts{
			NotifiedOnJobSuccess:              list(envs[kube.EnvNotifiedOnSuccess]),
			NotifiedOnJobFailureUserError:     list(envs[kube.EnvNotifiedOnUserError]),
			NotifiedOnJobFailurePlatformError: list(envs[kube.EnvNotifiedOnPlatform]),
			NotifiedOnJobDeploy:               list(envs[kube.EnvNotifiedOnDeploy]),
		},
	}
	if v, err := strconv.ParseBool(envs[kube.EnvEnableNotifications]); err == nil {
		j.EnableExecutionNotifications = v
	}
	return j
}

// team is the job's team: the --team-from-label label (on the CronJob, then its job
// template), else the VDK_JOB_TEAM variable of the main container, else --default-team.
func (m mapping) team(cj *batchv1.CronJob, main *corev1.Container) (string, error) {
	team, from := "", ""
	if m.teamFromLabel != "" {
		team = cmp.Or(cj.Labels[m.teamFromLabel], cj.Spec.JobTemplate.Labels[m.teamFromLabel])
		from = "label " + m.teamFromLabel
	}
	if team == "" {
		team, from = plainEnv(main)[kube.EnvJobTeam], kube.EnvJobTeam
	}
	if team == "" {
		team, from = m.defaultTeam, "--default-team"
	}
	if team == "" {
		return "", skipf("no team: no %s in container %s; set --team-from-label or --default-team", kube.EnvJobTeam, main.Name)
	}
	if err := job.ValidateTeam(team); err != nil {
		return "", skipf("team %q (from %s) is not a DNS label", team, from)
	}
	return team, nil
}

// meta reads a label (or annotation) from the job template, then from the CronJob.
func meta(cj *batchv1.CronJob, key string, label bool) string {
	if label {
		return cmp.Or(cj.Spec.JobTemplate.Labels[key], cj.Labels[key])
	}
	return cmp.Or(cj.Spec.JobTemplate.Annotations[key], cj.Annotations[key])
}

// controllerOf names the controller that owns the CronJob, if any.
func controllerOf(cj *batchv1.CronJob) string {
	for _, ref := range cj.OwnerReferences {
		if ref.Controller != nil && *ref.Controller {
			return ref.Kind + "/" + ref.Name
		}
	}
	return ""
}

// mainContainer is the container named after the job (VDK's convention), else the first.
func mainContainer(cs []corev1.Container, name string) *corev1.Container {
	for i := range cs {
		if cs[i].Name == name {
			return &cs[i]
		}
	}
	if len(cs) == 0 {
		return nil
	}
	return &cs[0]
}

// imageTag is the tag of an image reference ("" when it has none); a digest is ignored.
func imageTag(image string) string {
	if i := strings.IndexByte(image, '@'); i >= 0 {
		image = image[:i]
	}
	colon := strings.LastIndexByte(image, ':')
	if colon < 0 || colon < strings.LastIndexByte(image, '/') {
		return ""
	}
	return image[colon+1:]
}

// resources reads the main container's requests and limits; what is not set stays zero.
func resources(c *corev1.Container) (job.Resources, error) {
	var r job.Resources
	fields := []struct {
		list  corev1.ResourceList
		name  corev1.ResourceName
		field string
		dst   *int64
	}{
		{c.Resources.Requests, corev1.ResourceCPU, "cpu request", &r.CPURequestMillis},
		{c.Resources.Limits, corev1.ResourceCPU, "cpu limit", &r.CPULimitMillis},
		{c.Resources.Requests, corev1.ResourceMemory, "memory request", &r.MemoryRequestBytes},
		{c.Resources.Limits, corev1.ResourceMemory, "memory limit", &r.MemoryLimitBytes},
	}
	for _, f := range fields {
		q, ok := f.list[f.name]
		if !ok {
			continue
		}
		v, err := quantity(q, f.name == corev1.ResourceCPU)
		if err != nil {
			return r, skipf("%s %s of container %s is not a positive quantity", f.field, q.String(), c.Name)
		}
		*f.dst = v
	}
	return r, nil
}

func quantity(q resource.Quantity, cpu bool) (int64, error) {
	if cpu {
		return job.CPUFromQuantity("cpu", q.String())
	}
	return job.MemoryFromQuantity("memory", q.String())
}

// plainEnv is the main container's environment variables that have a literal value.
func plainEnv(c *corev1.Container) map[string]string {
	out := map[string]string{}
	for _, e := range c.Env {
		if e.ValueFrom == nil {
			out[e.Name] = e.Value
		}
	}
	return out
}

// list splits VDK's comma-joined contact lists.
func list(s string) []string {
	var out []string
	for p := range strings.SplitSeq(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// parseDate reads a Java OffsetDateTime.toString() value ("2024-03-01T10:15:30.123+01:00",
// seconds left out when zero).
func parseDate(s string) (time.Time, bool) {
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04Z07:00"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UTC(), true
		}
	}
	return time.Time{}, false
}

// oneLine is a domain error's what and why, for the results table.
func oneLine(err error) string {
	var e *job.Error
	if errors.As(err, &e) {
		return strings.TrimSpace(e.What + " " + e.Why)
	}
	return err.Error()
}
