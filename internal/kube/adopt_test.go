package kube

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/datajobs/datajobs/internal/job"
)

// vdkSpec is a CronJob spec shaped like the original VDK Control Service's.
func vdkSpec() batchv1.CronJobSpec {
	return batchv1.CronJobSpec{
		Schedule:          "15 10 * * *",
		Suspend:           new(false),
		ConcurrencyPolicy: batchv1.ForbidConcurrent,
		JobTemplate: batchv1.JobTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"com.vmware.taurus/type": "DataJob", "com.vmware.taurus/name": "legacy-job"}},
			Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy:  corev1.RestartPolicyOnFailure,
				InitContainers: []corev1.Container{{Name: "vdk", Image: "registry/vdk:1.2"}},
				Containers: []corev1.Container{{
					Name: "legacy-job", Image: "proxy.example/dp/legacy-job:abc123",
					Command: []string{"/bin/bash", "-c", "vdk run ./legacy-job"},
					Resources: corev1.ResourceRequirements{
						Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("1G")},
						Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("2G")},
					},
				}},
			}}},
		},
	}
}

func adopted(t *testing.T, spec batchv1.CronJobSpec) job.Deployment {
	t.Helper()
	raw, err := json.Marshal(spec)
	require.NoError(t, err)
	return job.Deployment{
		JobVersion: "abc123", PythonVersion: "3.9", VDKVersion: "1.2", Schedule: "15 10 * * *", Enabled: true, DeployedBy: "import",
		Resources: job.Resources{CPURequestMillis: 500, CPULimitMillis: 2000, MemoryRequestBytes: 1e9, MemoryLimitBytes: 2e9},
		Adopted:   &job.Adoption{CronJobUID: "uid-1", Spec: raw},
	}
}

func TestAnImportedDeploymentRendersToItsOwnSpec(t *testing.T) {
	t.Parallel()
	j := job.Job{Name: "legacy-job", UID: "job-uid", Team: "team-a"}
	d := adopted(t, vdkSpec())
	cj, hash := Render(j, d, RenderConfig{Namespace: "ns"})
	require.Equal(t, vdkSpec(), cj.Spec, "adoption changes nothing in the spec")
	require.Equal(t, ManagedByValue, cj.Labels[LabelManagedBy])
	require.Equal(t, "job-uid", cj.Labels[LabelJobUID])
	require.Equal(t, hash, cj.Annotations[AnnotationHash])

	// What the deployment controls is set on the imported template, and nothing else.
	d.JobVersion, d.Enabled, d.Schedule = "def456", false, ""
	d.Resources.CPULimitMillis = 4000
	cj, _ = Render(j, d, RenderConfig{Namespace: "ns"})
	want := vdkSpec()
	want.Schedule, want.Suspend = NeverSchedule, new(true)
	c := &want.JobTemplate.Spec.Template.Spec.Containers[0]
	c.Image = "proxy.example/dp/legacy-job:def456"
	c.Resources.Limits[corev1.ResourceCPU] = resource.MustParse("4")
	require.Equal(t, want, cj.Spec)
	require.Equal(t, "true", cj.Annotations[AnnotationUnscheduled])
}

func TestWithTag(t *testing.T) {
	t.Parallel()
	for image, want := range map[string]string{
		"registry:5000/team/job:old": "registry:5000/team/job:v2",
		"registry:5000/team/job":     "registry:5000/team/job:v2",
		"job@sha256:abcd":            "job:v2",
		"job:v2":                     "job:v2",
	} {
		require.Equal(t, want, withTag(image, "v2"), image)
	}
}
