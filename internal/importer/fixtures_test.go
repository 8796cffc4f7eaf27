package importer_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/datajobs/datajobs/internal/importer"
	"github.com/datajobs/datajobs/internal/kube"
	"github.com/datajobs/datajobs/internal/store"
	"github.com/datajobs/datajobs/internal/testenv"
)

// vdkFieldManager is the field manager the fixtures are created with, as the original
// service's Java client would appear.
const vdkFieldManager = "vdk-control-service"

// env is one import scenario: a fresh database and a fresh namespace.
type env struct {
	t      *testing.T
	dbURL  string
	db     *store.Store
	client kubernetes.Interface
	ns     string
	render kube.RenderConfig
}

func newEnv(t *testing.T) *env {
	t.Helper()
	dbURL := testenv.DatabaseURL(t)
	db, err := store.Open(t.Context(), store.Config{URL: dbURL})
	require.NoError(t, err)
	t.Cleanup(db.Close)
	ns := testenv.Namespace(t)
	return &env{
		t: t, dbURL: dbURL, db: db, client: testenv.Clientset(t), ns: ns,
		render: kube.RenderConfig{Namespace: ns, ImageRegistry: "registry.test/jobs"},
	}
}

// create creates the CronJobs in the namespace, as another tool would, and returns them
// as stored.
func (e *env) create(cjs ...*batchv1.CronJob) map[string]*batchv1.CronJob {
	e.t.Helper()
	out := map[string]*batchv1.CronJob{}
	for _, cj := range cjs {
		got, err := e.client.BatchV1().CronJobs(e.ns).Create(e.t.Context(), cj, metav1.CreateOptions{FieldManager: vdkFieldManager})
		require.NoError(e.t, err, "create cronjob %s", cj.Name)
		out[got.Name] = got
	}
	return out
}

func (e *env) get(name string) *batchv1.CronJob {
	e.t.Helper()
	cj, err := e.client.BatchV1().CronJobs(e.ns).Get(e.t.Context(), name, metav1.GetOptions{})
	require.NoError(e.t, err)
	return cj
}

// importCfg runs an import with the env's render config and the given settings.
func (e *env) importCfg(cfg importer.Config) importer.Report {
	e.t.Helper()
	cfg.Render = e.render
	cfg.SupportedPythonVersions = []string{"3.10", "3.11"}
	im, err := importer.New(cfg, e.db, e.client)
	require.NoError(e.t, err)
	rep, err := im.Run(e.t.Context())
	require.NoError(e.t, err)
	return rep
}

// byName indexes a report's outcomes.
func byName(rep importer.Report) map[string]importer.Outcome {
	out := map[string]importer.Outcome{}
	for _, o := range rep.Outcomes {
		out[o.Name] = o
	}
	return out
}

func specJSON(t *testing.T, cj *batchv1.CronJob) string {
	t.Helper()
	b, err := json.Marshal(cj.Spec)
	require.NoError(t, err)
	return string(b)
}

// vdkOption changes a VDK-shaped fixture.
type vdkOption func(*batchv1.CronJob)

// vdkCronJob builds a CronJob shaped like those the VDK Control Service creates
// (reference, section 4): the com.vmware.taurus labels and annotations on the job
// template, the vdk init container, the main container named after the job with VDK's
// environment, resources, mounts and volumes.
func vdkCronJob(name, team, version string, opts ...vdkOption) *batchv1.CronJob {
	image := func(repo, tag string) string { return "registry.vdk.example/" + repo + ":" + tag }
	mounts := []corev1.VolumeMount{
		{Name: "vdk", MountPath: "/vdk"},
		{Name: "data-job-keytab-" + name, MountPath: "/credentials", ReadOnly: true},
		{Name: "tmpfs", MountPath: "/var/tmp"},
	}
	envFrom := []corev1.EnvFromSource{
		{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "builder-secrets"}, Optional: new(true)}},
		{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "team-oauth-" + team}, Optional: new(true)}},
	}
	quantities := func(cpu, mem string) corev1.ResourceList {
		return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)}
	}
	cj := &batchv1.CronJob{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: batchv1.CronJobSpec{
			Schedule:                   "*/30 * * * *",
			Suspend:                    new(false),
			ConcurrencyPolicy:          batchv1.ForbidConcurrent,
			StartingDeadlineSeconds:    new(int64(1800)),
			SuccessfulJobsHistoryLimit: new(int32(1)),
			FailedJobsHistoryLimit:     new(int32(2)),
			JobTemplate: batchv1.JobTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{
					Labels: map[string]string{
						importer.LabelVDKType:    importer.VDKTypeDataJob,
						importer.LabelVDKName:    name,
						importer.LabelVDKVersion: version,
					},
					Annotations: map[string]string{
						"com.vmware.taurus/schedule":        "*/30 * * * *",
						"com.vmware.taurus/execution-type":  "scheduled",
						importer.AnnotationVDKDeployedBy:    "alice",
						importer.AnnotationVDKDeployedDate:  "2024-03-01T10:15:30.123+01:00",
						"com.vmware.taurus/started-by":      "scheduled/runtime",
						importer.AnnotationVDKUnscheduled:   "false",
						importer.AnnotationVDKPythonVersion: "3.11",
					},
				},
				Spec: batchv1.JobSpec{
					ActiveDeadlineSeconds:   new(int64(43200)),
					BackoffLimit:            new(int32(3)),
					TTLSecondsAfterFinished: new(int32(600)),
					Template: corev1.PodTemplateSpec{
						Spec: corev1.PodSpec{
							RestartPolicy:                corev1.RestartPolicyOnFailure,
							AutomountServiceAccountToken: new(false),
							SecurityContext:              &corev1.PodSecurityContext{RunAsUser: new(int64(1000)), RunAsGroup: new(int64(1000)), FSGroup: new(int64(1000))},
							ImagePullSecrets:             []corev1.LocalObjectReference{{Name: "vdk-registry"}},
							Volumes: []corev1.Volume{
								{Name: "vdk", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
								{Name: "data-job-keytab-" + name, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "data-job-keytab-" + name}}},
								{Name: "tmpfs", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
							},
							InitContainers: []corev1.Container{{
								Name:         "vdk",
								Image:        image("vdk", "0.4.12"),
								Command:      []string{"/bin/bash", "-c", "cp -r $(python -c \"import site; print(site.getsitepackages()[0])\")/* /vdk/site-packages/ && cp /usr/local/bin/vdk /vdk/"},
								Resources:    corev1.ResourceRequirements{Requests: quantities("100m", "100Mi"), Limits: quantities("100m", "100Mi")},
								VolumeMounts: mounts,
								EnvFrom:      envFrom,
							}},
							Containers: []corev1.Container{{
								Name:            name,
								Image:           image(name, version),
								ImagePullPolicy: corev1.PullIfNotPresent,
								SecurityContext: &corev1.SecurityContext{Privileged: new(false), ReadOnlyRootFilesystem: new(false)},
								Resources:       corev1.ResourceRequirements{Requests: quantities("0.5", "500Mi"), Limits: quantities("1", "1000Mi")},
								EnvFrom:         envFrom,
								VolumeMounts:    mounts,
								Command:         []string{"/bin/bash", "-c", "export PYTHONPATH=/usr/local/lib/python3.11/site-packages:/vdk/site-packages/ && /vdk/vdk run ./" + name},
								// A HashMap's order, not sorted.
								Env: []corev1.EnvVar{
									{Name: "VDK_KEYTAB_PRINCIPAL", Value: "pa__view_" + name},
									{Name: "VDK_KEYTAB_FOLDER", Value: "/credentials"},
									{Name: "VDK_ATTEMPT_ID", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
									{Name: "LOG_CONFIG", Value: "CLOUD"},
									{Name: "VDK_KEYTAB_FILENAME", Value: "keytab"},
									{Name: "VDK_TEMPORARY_WRITE_DIRECTORY", Value: "/var/tmp"},
									{Name: "MONITORING_ENABLED", Value: "true"},
									{Name: "VDK_BASE_CONFIG_FOLDER", Value: "/var/tmp"},
									{Name: "VDK_JOB_TEAM", Value: team},
									{Name: "VDK_DB_DEFAULT_TYPE", Value: "trino"},
									{Name: "VDK_ENABLE_EXECUTION_NOTIFICATIONS", Value: "false"},
									{Name: "VDK_NOTIFIED_ON_JOB_SUCCESS", Value: ""},
									{Name: "VDK_NOTIFIED_ON_JOB_FAILURE_PLATFORM_ERROR", Value: "oncall@example.com"},
									{Name: "VDK_NOTIFIED_ON_JOB_FAILURE_USER_ERROR", Value: "alice@example.com,bob@example.com"},
									{Name: "VDK_NOTIFIED_ON_JOB_DEPLOY", Value: ""},
								},
							}},
						},
					},
				},
			},
		},
	}
	for _, o := range opts {
		o(cj)
	}
	return cj
}

func suspended(cj *batchv1.CronJob) { cj.Spec.Suspend = new(true) }

// unscheduled is VDK's deployment without a schedule: February 30th.
func unscheduled(cj *batchv1.CronJob) {
	cj.Spec.Schedule = kube.NeverSchedule
	cj.Spec.JobTemplate.Annotations[importer.AnnotationVDKUnscheduled] = "true"
	cj.Spec.JobTemplate.Annotations["com.vmware.taurus/schedule"] = "null"
}

func schedule(s string) vdkOption { return func(cj *batchv1.CronJob) { cj.Spec.Schedule = s } }

func python(v string) vdkOption {
	return func(cj *batchv1.CronJob) { cj.Spec.JobTemplate.Annotations[importer.AnnotationVDKPythonVersion] = v }
}

// noAnnotations drops every annotation of the job template (an older VDK, or hand edits).
func noAnnotations(cj *batchv1.CronJob) { cj.Spec.JobTemplate.Annotations = nil }

// withoutEnv removes an environment variable of the main container.
func withoutEnv(name string) vdkOption {
	return func(cj *batchv1.CronJob) {
		c := &cj.Spec.JobTemplate.Spec.Template.Spec.Containers[0]
		for i, e := range c.Env {
			if e.Name == name {
				c.Env = append(c.Env[:i], c.Env[i+1:]...)
				return
			}
		}
	}
}

func withEnv(name, value string) vdkOption {
	return func(cj *batchv1.CronJob) {
		c := &cj.Spec.JobTemplate.Spec.Template.Spec.Containers[0]
		for i := range c.Env {
			if c.Env[i].Name == name {
				c.Env[i].Value = value
				return
			}
		}
		c.Env = append(c.Env, corev1.EnvVar{Name: name, Value: value})
	}
}

// handMade is a CronJob someone wrote by hand: no VDK labels, a container not named
// after the job, no resources, a team label, selected for import by a label.
func handMade(name, image string, lbls map[string]string) *batchv1.CronJob {
	return &batchv1.CronJob{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: lbls},
		Spec: batchv1.CronJobSpec{
			Schedule: "15 3 * * *",
			JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{
				Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyNever,
					Containers: []corev1.Container{{
						Name: "main", Image: image,
						Command: []string{"sh", "-c", "echo " + fmt.Sprint(name)},
					}},
				},
			}}},
		},
	}
}
