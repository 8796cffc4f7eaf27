package kube

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/datajobs/datajobs/internal/job"
)

func testJob() job.Job {
	return job.Job{
		Name:          "sales-ingest",
		UID:           "5b0f5c1e-0d7c-4bb4-9a52-0f5d1c7a8e21",
		Team:          "finance",
		Description:   "ingests sales",
		Schedule:      "0 * * * *",
		DBDefaultType: "trino",
		Contacts: job.Contacts{
			NotifiedOnJobFailureUserError:     []string{"a@example.com", "b@example.com"},
			NotifiedOnJobFailurePlatformError: []string{"ops@example.com"},
			NotifiedOnJobSuccess:              nil,
			NotifiedOnJobDeploy:               []string{"c@example.com"},
		},
		EnableExecutionNotifications: true,
		Generation:                   7,
	}
}

func testDeployment() job.Deployment {
	return job.Deployment{
		JobName:       "sales-ingest",
		JobVersion:    "3f2a9c1",
		VDKVersion:    "0.3.1",
		PythonVersion: "3.11",
		// Once a year (not */15): these CronJobs live in a cluster whose CronJob controller
		// writes a fired one's status, which made a test's read-then-apply a Conflict (make
		// test at a7c8913, 08:14 UTC: TestApplyRepairsHandEdits).
		Schedule: "15 3 1 1 *",
		Resources: job.Resources{
			CPURequestMillis:   500,
			CPULimitMillis:     1500,
			MemoryRequestBytes: 256 << 20,
			MemoryLimitBytes:   1000000000,
		},
		Enabled:      true,
		DeployedBy:   "alice",
		DeployedDate: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
		Status:       job.StatusPending,
	}
}

func testConfig() RenderConfig {
	return RenderConfig{
		Namespace:        "jobs",
		ImageRegistry:    "registry.example.com/datajobs/",
		ImagePullSecrets: []string{"pull-a", "", "pull-b"},
	}
}

func TestRenderFullDeployment(t *testing.T) {
	t.Parallel()
	cj, hash := Render(testJob(), testDeployment(), testConfig())

	wantLabels := map[string]string{
		"app.kubernetes.io/managed-by": "datajobs",
		"datajobs.io/job":              "sales-ingest",
		"datajobs.io/team":             "finance",
		"datajobs.io/job-uid":          "5b0f5c1e-0d7c-4bb4-9a52-0f5d1c7a8e21",
	}
	require.Equal(t, "batch/v1", cj.APIVersion)
	require.Equal(t, "CronJob", cj.Kind)
	require.Equal(t, "sales-ingest", cj.Name)
	require.Equal(t, "jobs", cj.Namespace)
	require.Equal(t, wantLabels, cj.Labels)
	require.Equal(t, map[string]string{
		"datajobs.io/deployment-hash": hash,
		"datajobs.io/job-version":     "3f2a9c1",
		"datajobs.io/python-version":  "3.11",
		"datajobs.io/vdk-version":     "0.3.1",
		"datajobs.io/deployed-by":     "alice",
	}, cj.Annotations)
	require.Len(t, hash, 64)
	require.True(t, ManagedSelector().Matches(labels.Set(cj.Labels)))

	s := cj.Spec
	require.Equal(t, "15 3 1 1 *", s.Schedule)
	require.Equal(t, "UTC", *s.TimeZone)
	require.Equal(t, batchv1.ForbidConcurrent, s.ConcurrencyPolicy)
	require.Equal(t, int64(1800), *s.StartingDeadlineSeconds)
	require.False(t, *s.Suspend)
	require.Equal(t, int32(1), *s.SuccessfulJobsHistoryLimit)
	require.Equal(t, int32(2), *s.FailedJobsHistoryLimit)

	jt := s.JobTemplate
	require.Equal(t, wantLabels, jt.Labels)
	require.Equal(t, map[string]string{
		"datajobs.io/job-version":    "3f2a9c1",
		"datajobs.io/python-version": "3.11",
		"datajobs.io/vdk-version":    "0.3.1",
	}, jt.Annotations)
	require.Equal(t, int64(43200), *jt.Spec.ActiveDeadlineSeconds)
	require.Equal(t, int32(3), *jt.Spec.BackoffLimit)
	require.Equal(t, int32(600), *jt.Spec.TTLSecondsAfterFinished)

	pt := jt.Spec.Template
	require.Equal(t, wantLabels, pt.Labels)
	require.Empty(t, pt.Annotations)
	ps := pt.Spec
	require.Equal(t, corev1.RestartPolicyNever, ps.RestartPolicy)
	require.False(t, *ps.AutomountServiceAccountToken)
	require.NotNil(t, ps.EnableServiceLinks)
	require.False(t, *ps.EnableServiceLinks)
	require.Equal(t, []corev1.LocalObjectReference{{Name: "pull-a"}, {Name: "pull-b"}}, ps.ImagePullSecrets)
	require.Equal(t, &corev1.PodSecurityContext{
		RunAsNonRoot:   new(true),
		RunAsUser:      new(int64(1000)),
		RunAsGroup:     new(int64(1000)),
		FSGroup:        new(int64(1000)),
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}, ps.SecurityContext)
	require.Empty(t, ps.InitContainers)
	// The job's identity: a token of its own ServiceAccount for datajobs only, no other.
	require.Equal(t, "datajobs-job-finance", ps.ServiceAccountName, "the team's (docs/profiles.md)")
	require.Equal(t, []corev1.Volume{{Name: "datajobs-token", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
		Sources: []corev1.VolumeProjection{{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{
			Audience: "datajobs", ExpirationSeconds: new(int64(600)), Path: "token",
		}}},
	}}}}, ps.Volumes)
	require.Len(t, ps.Containers, 1)
	require.Equal(t, []corev1.VolumeMount{{Name: "datajobs-token", MountPath: "/var/run/secrets/datajobs.io", ReadOnly: true}}, ps.Containers[0].VolumeMounts)

	c := ps.Containers[0]
	require.Equal(t, "sales-ingest", c.Name)
	require.Equal(t, "registry.example.com/datajobs/sales-ingest:3f2a9c1", c.Image)
	require.Equal(t, corev1.PullIfNotPresent, c.ImagePullPolicy)
	require.Empty(t, c.Command)
	require.Empty(t, c.Args)
	require.Equal(t, &corev1.SecurityContext{
		AllowPrivilegeEscalation: new(false),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
	}, c.SecurityContext)
	requireQuantity(t, "500m", c.Resources.Requests[corev1.ResourceCPU])
	requireQuantity(t, "1500m", c.Resources.Limits[corev1.ResourceCPU])
	requireQuantity(t, "256Mi", c.Resources.Requests[corev1.ResourceMemory])
	requireQuantity(t, "1G", c.Resources.Limits[corev1.ResourceMemory])
	require.Len(t, c.Resources.Requests, 2)
	require.Len(t, c.Resources.Limits, 3)

	require.Equal(t, []corev1.EnvVar{
		{Name: "DATAJOBS_DEPLOYMENT_ID", Value: "sales-ingest"},
		{Name: "DATAJOBS_TOKEN_FILE", Value: "/var/run/secrets/datajobs.io/token"},
		{Name: "DATA_JOB_NAME", Value: "sales-ingest"},
		{Name: "DATA_JOB_PYTHON_VERSION", Value: "3.11"},
		{Name: "DATA_JOB_VDK_VERSION", Value: "0.3.1"},
		{Name: "PYTHONUNBUFFERED", Value: "1"},
		{Name: "VDK_ATTEMPT_ID", ValueFrom: &corev1.EnvVarSource{
			FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.name"},
		}},
		{Name: "VDK_DB_DEFAULT_TYPE", Value: "trino"},
		{Name: "VDK_ENABLE_EXECUTION_NOTIFICATIONS", Value: "true"},
		{Name: "VDK_JOB_GITHASH", Value: "3f2a9c1"},
		{Name: "VDK_JOB_TEAM", Value: "finance"},
		{Name: "VDK_NOTIFIED_ON_JOB_DEPLOY", Value: "c@example.com"},
		{Name: "VDK_NOTIFIED_ON_JOB_FAILURE_PLATFORM_ERROR", Value: "ops@example.com"},
		{Name: "VDK_NOTIFIED_ON_JOB_FAILURE_USER_ERROR", Value: "a@example.com,b@example.com"},
		{Name: "VDK_NOTIFIED_ON_JOB_SUCCESS", Value: ""},
	}, c.Env)
}

// A user error (the plugin's exit code) fails the Job at once: a deterministic error
// retried three times took 114 s to report. A disruption is retried without counting;
// everything else (a platform error, an image without the plugin that exits 1) counts
// against the backoff limit as before. Manual runs carry the same policy.
func TestRenderFailsTheJobAtOnceOnAUserErrorAndRetriesTheRest(t *testing.T) {
	t.Parallel()
	cj, _ := Render(testJob(), testDeployment(), testConfig())
	want := &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{
		{Action: batchv1.PodFailurePolicyActionIgnore, OnPodConditions: []batchv1.PodFailurePolicyOnPodConditionsPattern{
			{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue},
		}},
		{Action: batchv1.PodFailurePolicyActionFailJob, OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{
			ContainerName: new("sales-ingest"), Operator: batchv1.PodFailurePolicyOnExitCodesOpIn, Values: []int32{65},
		}},
	}}
	spec := cj.Spec.JobTemplate.Spec
	require.Equal(t, want, spec.PodFailurePolicy)
	require.Equal(t, "sales-ingest", spec.Template.Spec.Containers[0].Name, "the rule names the job's container")
	require.Equal(t, corev1.RestartPolicyNever, spec.Template.Spec.RestartPolicy, "a podFailurePolicy needs restartPolicy Never")
	require.NotContains(t, want.Rules[1].OnExitCodes.Values, PlatformErrorExitCode, "a platform error is retried")
	require.Equal(t, want, ExecutionJob(cj, ManualExecution{ID: "sales-ingest-manual"}).Spec.PodFailurePolicy)
}

// requireQuantity checks the quantity and that it is written in the form the apiserver
// stores, so that drift comparison of the JSON forms holds.
func requireQuantity(t *testing.T, want string, got resource.Quantity) {
	t.Helper()
	require.Equal(t, want, got.String())
	b, err := got.MarshalJSON()
	require.NoError(t, err)
	require.JSONEq(t, `"`+want+`"`, string(b))
}

func TestRenderZeroResourcesUsesDefaults(t *testing.T) {
	t.Parallel()
	d := testDeployment()
	d.Resources = job.Resources{}

	t.Run("built-in defaults", func(t *testing.T) {
		t.Parallel()
		cj, _ := Render(testJob(), d, RenderConfig{})
		r := cj.Spec.JobTemplate.Spec.Template.Spec.Containers[0].Resources
		requireQuantity(t, "1", r.Requests[corev1.ResourceCPU])
		requireQuantity(t, "2", r.Limits[corev1.ResourceCPU])
		requireQuantity(t, "500Mi", r.Requests[corev1.ResourceMemory])
		requireQuantity(t, "1000Mi", r.Limits[corev1.ResourceMemory])
		require.Equal(t, "datajobs", cj.Namespace)
		require.Equal(t, "sales-ingest:3f2a9c1", cj.Spec.JobTemplate.Spec.Template.Spec.Containers[0].Image)
		require.Nil(t, cj.Spec.JobTemplate.Spec.Template.Spec.ImagePullSecrets)
	})
	t.Run("configured defaults, one field set", func(t *testing.T) {
		t.Parallel()
		d := d
		d.Resources.MemoryLimitBytes = 2 << 30
		cfg := RenderConfig{Resources: job.ResourceBounds{Default: job.Resources{
			CPURequestMillis: 250, CPULimitMillis: 750, MemoryRequestBytes: 128 << 20, MemoryLimitBytes: 512 << 20,
		}}}
		cj, _ := Render(testJob(), d, cfg)
		r := cj.Spec.JobTemplate.Spec.Template.Spec.Containers[0].Resources
		requireQuantity(t, "250m", r.Requests[corev1.ResourceCPU])
		requireQuantity(t, "750m", r.Limits[corev1.ResourceCPU])
		requireQuantity(t, "128Mi", r.Requests[corev1.ResourceMemory])
		requireQuantity(t, "2Gi", r.Limits[corev1.ResourceMemory])
	})
}

func TestRenderUnscheduled(t *testing.T) {
	t.Parallel()
	d := testDeployment()
	d.Schedule = ""
	cj, hash := Render(testJob(), d, testConfig())
	require.Equal(t, "0 0 30 2 *", cj.Spec.Schedule)
	require.Equal(t, "true", cj.Annotations[AnnotationUnscheduled])
	require.NotContains(t, cj.Spec.JobTemplate.Annotations, AnnotationUnscheduled)

	_, scheduled := Render(testJob(), testDeployment(), testConfig())
	require.NotEqual(t, scheduled, hash)
	cj, _ = Render(testJob(), testDeployment(), testConfig())
	require.NotContains(t, cj.Annotations, AnnotationUnscheduled)
}

func TestRenderDisabledIsSuspended(t *testing.T) {
	t.Parallel()
	d := testDeployment()
	d.Enabled = false
	cj, _ := Render(testJob(), d, testConfig())
	require.True(t, *cj.Spec.Suspend)
}

func TestRenderDoesNotKeepPointersIntoInputs(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	a, _ := Render(testJob(), testDeployment(), cfg)
	*a.Spec.StartingDeadlineSeconds = 1
	*a.Spec.TimeZone = "Europe/Sofia"
	b, _ := Render(testJob(), testDeployment(), cfg)
	require.Equal(t, int64(1800), *b.Spec.StartingDeadlineSeconds)
	require.Equal(t, "UTC", *b.Spec.TimeZone)
}

// Issue 22: a job pod must not learn the platform's addresses from the environment
// (enableServiceLinks puts HOST/PORT variables of every Service of the namespace, the
// service's admin Service among them, into each container), and must not be able to fill
// the node's disk (without an ephemeral-storage limit the kubelet evicts other pods
// first). Both hold by default and the limit follows the configuration.
func TestRenderedPodHasNoServiceLinksAndADiskLimit(t *testing.T) {
	t.Parallel()
	cj, _ := Render(testJob(), testDeployment(), testConfig())
	ps := cj.Spec.JobTemplate.Spec.Template.Spec
	require.Equal(t, new(false), ps.EnableServiceLinks, "a job pod gets no Service environment variables")
	requireQuantity(t, "2Gi", ps.Containers[0].Resources.Limits[corev1.ResourceEphemeralStorage])

	cfg := testConfig()
	cfg.EphemeralStorageLimitBytes = 10 << 30
	cj, _ = Render(testJob(), testDeployment(), cfg)
	requireQuantity(t, "10Gi", cj.Spec.JobTemplate.Spec.Template.Spec.Containers[0].Resources.Limits[corev1.ResourceEphemeralStorage])
}

func TestHashIsStable(t *testing.T) {
	t.Parallel()
	d := testDeployment()
	d.Schedule = "*/15 * * * *" // the deployment the value below was fixed for
	_, want := Render(testJob(), d, testConfig())
	// Every render builds its maps anew, so Go's random map order varies between them.
	for range 1000 {
		cj, got := Render(testJob(), d, testConfig())
		require.Equal(t, want, got)
		require.Equal(t, want, Hash(cj))
		require.Equal(t, want, cj.Annotations[AnnotationHash], "Hash leaves the object it hashes as it was")
	}
	// Fixed, so that a change of the rendering (which redeploys every job once) is a
	// deliberate decision: update this value and say so in the release notes. (Changed by
	// issue 22: enableServiceLinks false and the ephemeral-storage limit; issue 26: the
	// job's ServiceAccount, its token volume and DATAJOBS_* variables; issue 48: the
	// podFailurePolicy and PYTHONUNBUFFERED, then terminationMessagePolicy
	// FallbackToLogsOnError; issue 43: the team's ServiceAccount, datajobs-job-{team}.)
	require.Equal(t, "c96ce79304217e1e560eca6d267b288e3f020cf3cb28e47934d515b8e974f712", want)
}

func TestHashCoversEveryRenderedField(t *testing.T) {
	t.Parallel()
	_, base := Render(testJob(), testDeployment(), testConfig())
	tests := []struct {
		name    string
		change  func(*job.Job, *job.Deployment, *RenderConfig)
		changes bool
	}{
		{"job name changes it", func(j *job.Job, d *job.Deployment, c *RenderConfig) { j.Name = "sales-ingest2" }, true},
		{"job uid changes it", func(j *job.Job, d *job.Deployment, c *RenderConfig) { j.UID = "other" }, true},
		{"team changes it", func(j *job.Job, d *job.Deployment, c *RenderConfig) { j.Team = "marketing" }, true},
		{"team credentials change it", func(j *job.Job, d *job.Deployment, c *RenderConfig) { j.TeamOAuth = true }, true},
		{"db default type changes it", func(j *job.Job, d *job.Deployment, c *RenderConfig) { j.DBDefaultType = "impala" }, true},
		{"execution notifications change it", func(j *job.Job, d *job.Deployment, c *RenderConfig) { j.EnableExecutionNotifications = false }, true},
		{"success contacts change it", func(j *job.Job, d *job.Deployment, c *RenderConfig) {
			j.Contacts.NotifiedOnJobSuccess = []string{"x@example.com"}
		}, true},
		{"user error contacts change it", func(j *job.Job, d *job.Deployment, c *RenderConfig) {
			j.Contacts.NotifiedOnJobFailureUserError = []string{"a@example.com"}
		}, true},
		{"platform error contacts change it", func(j *job.Job, d *job.Deployment, c *RenderConfig) {
			j.Contacts.NotifiedOnJobFailurePlatformError = nil
		}, true},
		{"deploy contacts change it", func(j *job.Job, d *job.Deployment, c *RenderConfig) {
			j.Contacts.NotifiedOnJobDeploy = []string{"c@example.com", "d@example.com"}
		}, true},
		{"job version changes it", func(j *job.Job, d *job.Deployment, c *RenderConfig) { d.JobVersion = "4e5f6a7" }, true},
		{"vdk version changes it", func(j *job.Job, d *job.Deployment, c *RenderConfig) { d.VDKVersion = "0.3.2" }, true},
		{"python version changes it", func(j *job.Job, d *job.Deployment, c *RenderConfig) { d.PythonVersion = "3.12" }, true},
		{"schedule changes it", func(j *job.Job, d *job.Deployment, c *RenderConfig) { d.Schedule = "0 1 * * *" }, true},
		{"enabled changes it", func(j *job.Job, d *job.Deployment, c *RenderConfig) { d.Enabled = false }, true},
		{"cpu request changes it", func(j *job.Job, d *job.Deployment, c *RenderConfig) { d.Resources.CPURequestMillis = 501 }, true},
		{"cpu limit changes it", func(j *job.Job, d *job.Deployment, c *RenderConfig) { d.Resources.CPULimitMillis = 2000 }, true},
		{"memory request changes it", func(j *job.Job, d *job.Deployment, c *RenderConfig) { d.Resources.MemoryRequestBytes = 257 << 20 }, true},
		{"memory limit changes it", func(j *job.Job, d *job.Deployment, c *RenderConfig) { d.Resources.MemoryLimitBytes = 1 << 30 }, true},
		{"namespace changes it", func(j *job.Job, d *job.Deployment, c *RenderConfig) { c.Namespace = "other" }, true},
		{"image registry changes it", func(j *job.Job, d *job.Deployment, c *RenderConfig) { c.ImageRegistry = "r.example.com" }, true},
		{"default resources change it when used", func(j *job.Job, d *job.Deployment, c *RenderConfig) {
			d.Resources.CPURequestMillis = 0
			c.Resources.Default.CPURequestMillis = 250
		}, true},
		{"default resources leave it when not used", func(j *job.Job, d *job.Deployment, c *RenderConfig) {
			c.Resources.Default.CPURequestMillis = 250
		}, false},
		{"a default equal to the explicit value leaves it", func(j *job.Job, d *job.Deployment, c *RenderConfig) {
			d.Resources.CPURequestMillis = 0
			c.Resources.Default.CPURequestMillis = 500
		}, false},
		{"image pull policy changes it", func(j *job.Job, d *job.Deployment, c *RenderConfig) { c.ImagePullPolicy = corev1.PullAlways }, true},
		{"image pull secrets change it", func(j *job.Job, d *job.Deployment, c *RenderConfig) { c.ImagePullSecrets = []string{"pull-a"} }, true},
		{"time zone changes it", func(j *job.Job, d *job.Deployment, c *RenderConfig) { c.TimeZone = "Europe/Sofia" }, true},
		{"concurrency policy changes it", func(j *job.Job, d *job.Deployment, c *RenderConfig) { c.ConcurrencyPolicy = batchv1.ReplaceConcurrent }, true},
		{"starting deadline changes it", func(j *job.Job, d *job.Deployment, c *RenderConfig) { c.StartingDeadlineSeconds = 60 }, true},
		{"successful history changes it", func(j *job.Job, d *job.Deployment, c *RenderConfig) { c.SuccessfulJobsHistoryLimit = 3 }, true},
		{"failed history changes it", func(j *job.Job, d *job.Deployment, c *RenderConfig) { c.FailedJobsHistoryLimit = 3 }, true},
		{"active deadline changes it", func(j *job.Job, d *job.Deployment, c *RenderConfig) { c.ActiveDeadlineSeconds = 60 }, true},
		{"backoff limit changes it", func(j *job.Job, d *job.Deployment, c *RenderConfig) { c.BackoffLimit = 6 }, true},
		{"ttl changes it", func(j *job.Job, d *job.Deployment, c *RenderConfig) { c.TTLSecondsAfterFinished = 60 }, true},
		{"run as user changes it", func(j *job.Job, d *job.Deployment, c *RenderConfig) { c.RunAsUser = 2000 }, true},
		{"run as group changes it", func(j *job.Job, d *job.Deployment, c *RenderConfig) { c.RunAsGroup = 2000 }, true},
		{"fs group changes it", func(j *job.Job, d *job.Deployment, c *RenderConfig) { c.FSGroup = 2000 }, true},
		{"ephemeral storage limit changes it", func(j *job.Job, d *job.Deployment, c *RenderConfig) { c.EphemeralStorageLimitBytes = 1 << 30 }, true},

		{"policy retries change it", func(j *job.Job, d *job.Deployment, c *RenderConfig) { d.Policy.Retries = new(int32(0)) }, true},
		{"policy retries equal to the default leave it", func(j *job.Job, d *job.Deployment, c *RenderConfig) { d.Policy.Retries = new(int32(3)) }, false},
		{"policy timeout changes it", func(j *job.Job, d *job.Deployment, c *RenderConfig) { d.Policy.TimeoutSeconds = 60 }, true},
		{"policy concurrency changes it", func(j *job.Job, d *job.Deployment, c *RenderConfig) { d.Policy.ConcurrencyPolicy = "Allow" }, true},
		{"policy time zone changes it", func(j *job.Job, d *job.Deployment, c *RenderConfig) { d.Policy.TimeZone = "Asia/Tokyo" }, true},
		{"policy starting deadline changes it", func(j *job.Job, d *job.Deployment, c *RenderConfig) { d.Policy.StartingDeadlineSeconds = 60 }, true},
		{"policy catch-up leaves it (the leader's, not the CronJob's)", func(j *job.Job, d *job.Deployment, c *RenderConfig) { d.Policy.CatchUp = 2 }, false},

		{"nothing changed leaves it", func(j *job.Job, d *job.Deployment, c *RenderConfig) {}, false},
		{"deployed by leaves it", func(j *job.Job, d *job.Deployment, c *RenderConfig) { d.DeployedBy = "bob" }, false},
		{"deployed date leaves it", func(j *job.Job, d *job.Deployment, c *RenderConfig) { d.DeployedDate = time.Now() }, false},
		{"sync status leaves it", func(j *job.Job, d *job.Deployment, c *RenderConfig) {
			d.Status, d.Message, d.StatusGeneration, d.LastSyncAt = job.StatusSynced, "ok", 9, new(time.Now())
		}, false},
		{"job schedule leaves it (the deployment's is rendered)", func(j *job.Job, d *job.Deployment, c *RenderConfig) { j.Schedule = "@daily" }, false},
		{"description and generation leave it", func(j *job.Job, d *job.Deployment, c *RenderConfig) {
			j.Description, j.Generation, j.UpdatedAt = "other", 8, time.Now()
		}, false},
		{"explicit defaults leave it", func(j *job.Job, d *job.Deployment, c *RenderConfig) {
			*c = c.WithDefaults()
		}, false},
		{"the registry's trailing slash leaves it", func(j *job.Job, d *job.Deployment, c *RenderConfig) {
			c.ImageRegistry = "registry.example.com/datajobs"
		}, false},
		{"an equal quantity written differently leaves it", func(j *job.Job, d *job.Deployment, c *RenderConfig) {
			q := resource.MustParse("1000M")
			d.Resources.MemoryLimitBytes = q.Value()
		}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			j, d, c := testJob(), testDeployment(), testConfig()
			tt.change(&j, &d, &c)
			_, got := Render(j, d, c)
			if tt.changes {
				require.NotEqual(t, base, got)
			} else {
				require.Equal(t, base, got)
			}
		})
	}
}

// The ephemeral-storage limit is part of the rendering configuration, but at its default
// it leaves the fingerprint that of a release before it: an upgrade that changes nothing
// else passes the synchronizer's configuration guard (--accept-config-change) instead of
// stopping every installation's sync. Another limit changes the fingerprint. The pinned
// values are those of main before the field existed.
func TestFingerprintAtTheDefaultEphemeralLimitIsThatOfEarlierReleases(t *testing.T) {
	t.Parallel()
	require.Equal(t, "610a97ee94c0e184", testConfig().Fingerprint())
	require.Equal(t, "da5fb600eecb4ef7", RenderConfig{}.Fingerprint())
	cfg := testConfig()
	cfg.EphemeralStorageLimitBytes = DefaultEphemeralStorageLimitBytes
	require.Equal(t, "610a97ee94c0e184", cfg.Fingerprint())
	cfg.EphemeralStorageLimitBytes = 10 << 30
	require.NotEqual(t, "610a97ee94c0e184", cfg.Fingerprint())
}

// TestJobAPIURLReachesThePodAndTheDefaultsKeepTheFingerprint guards the upgrade: the job
// identity's defaults leave the rendering configuration's fingerprint as it was (a new
// leader would otherwise refuse to sync), while a set --job-api-url is a real change of
// the rendering, given to the pod as the variable vdk's clients read.
func TestJobAPIURLReachesThePodAndTheDefaultsKeepTheFingerprint(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	withDefault := cfg
	withDefault.JobServiceAccount = DefaultJobServiceAccount
	require.Equal(t, cfg.Fingerprint(), withDefault.Fingerprint())

	cfg.JobAPIURL = "http://datajobs.datajobs.svc:8092"
	require.NotEqual(t, withDefault.Fingerprint(), cfg.Fingerprint())
	cj, _ := Render(testJob(), testDeployment(), cfg)
	env := cj.Spec.JobTemplate.Spec.Template.Spec.Containers[0].Env
	require.Contains(t, env, corev1.EnvVar{Name: "VDK_CONTROL_SERVICE_REST_API_URL", Value: "http://datajobs.datajobs.svc:8092"})
	require.True(t, slices.IsSortedFunc(env, func(a, b corev1.EnvVar) int { return strings.Compare(a.Name, b.Name) }))
}

// A deployment's run policy replaces the platform defaults in the CronJob and its Job
// template: without it every job would still run with 3 retries, 12 h, Forbid and UTC.
func TestRenderAppliesTheRunPolicy(t *testing.T) {
	d := testDeployment()
	d.Policy = job.RunPolicy{
		Retries: new(int32(0)), TimeoutSeconds: 90, ConcurrencyPolicy: "Replace",
		TimeZone: "America/New_York", StartingDeadlineSeconds: 120,
	}
	cj, _ := Render(testJob(), d, testConfig())
	s := cj.Spec
	require.Equal(t, int32(0), *s.JobTemplate.Spec.BackoffLimit)
	require.Equal(t, int64(90), *s.JobTemplate.Spec.ActiveDeadlineSeconds)
	require.Equal(t, batchv1.ReplaceConcurrent, s.ConcurrencyPolicy)
	require.Equal(t, "America/New_York", *s.TimeZone)
	require.Equal(t, int64(120), *s.StartingDeadlineSeconds)
}
