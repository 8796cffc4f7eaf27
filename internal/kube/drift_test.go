package kube

import (
	"cmp"
	"testing"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// asStored is what the apiserver returns for a rendered CronJob: defaults filled in,
// server metadata, status, and managedFields with datajobs owning what it applied.
func asStored(rendered *batchv1.CronJob) *batchv1.CronJob {
	live := rendered.DeepCopy()
	live.TypeMeta = metav1.TypeMeta{}
	live.UID = "0a6f1d3e-1111-2222-3333-444455556666"
	live.ResourceVersion = "4711"
	live.Generation = 1
	live.Labels["example.com/owner"] = "someone"
	live.Annotations["example.com/note"] = "hand-written"
	live.ManagedFields = []metav1.ManagedFieldsEntry{
		{
			Manager: FieldManager, Operation: metav1.ManagedFieldsOperationApply, FieldsType: "FieldsV1",
			FieldsV1: metav1.NewFieldsV1(`{"f:metadata":{"f:labels":{"f:datajobs.io/job":{}}},"f:spec":{"f:schedule":{},"f:suspend":{}}}`),
		},
		{
			Manager: "kubectl-label", Operation: metav1.ManagedFieldsOperationUpdate, FieldsType: "FieldsV1",
			FieldsV1: metav1.NewFieldsV1(`{"f:metadata":{"f:labels":{"f:example.com/owner":{}}}}`),
		},
		{
			Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate, Subresource: "status", FieldsType: "FieldsV1",
			FieldsV1: metav1.NewFieldsV1(`{"f:status":{"f:lastScheduleTime":{}}}`),
		},
	}
	live.Status.LastScheduleTime = &metav1.Time{}
	ps := &live.Spec.JobTemplate.Spec.Template.Spec
	ps.DNSPolicy = corev1.DNSClusterFirst
	ps.SchedulerName = "default-scheduler"
	ps.TerminationGracePeriodSeconds = new(int64(30))
	c := &ps.Containers[0]
	c.TerminationMessagePath = "/dev/termination-log"
	c.TerminationMessagePolicy = cmp.Or(c.TerminationMessagePolicy, corev1.TerminationMessageReadFile)
	live.Spec.JobTemplate.Spec.Completions = new(int32(1))
	live.Spec.JobTemplate.Spec.Parallelism = new(int32(1))
	return live
}

func TestDrifted(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		change func(live *batchv1.CronJob)
		drift  bool
		reason string
	}{
		{"an object as stored has not drifted", func(live *batchv1.CronJob) {}, false, ""},
		{"another deployer has not drifted", func(live *batchv1.CronJob) { live.Annotations[AnnotationDeployedBy] = "bob" }, false, ""},
		{"a quantity written differently but equal has not drifted", func(live *batchv1.CronJob) {
			container(live).Resources.Limits[corev1.ResourceMemory] = resource.MustParse("1000M")
		}, false, ""},
		{"a foreign manager sharing our field has not drifted", func(live *batchv1.CronJob) {
			live.ManagedFields = append(live.ManagedFields, metav1.ManagedFieldsEntry{
				Manager: "other-apply", Operation: metav1.ManagedFieldsOperationApply,
				FieldsV1: metav1.NewFieldsV1(`{"f:spec":{"f:schedule":{}}}`),
			})
		}, false, ""},

		{
			"another job uid has drifted", func(live *batchv1.CronJob) { live.Labels[LabelJobUID] = "old" }, true,
			`label datajobs.io/job-uid is "old", want "5b0f5c1e-0d7c-4bb4-9a52-0f5d1c7a8e21"`,
		},
		{
			"a missing job uid has drifted", func(live *batchv1.CronJob) { delete(live.Labels, LabelJobUID) }, true,
			`label datajobs.io/job-uid is "", want "5b0f5c1e-0d7c-4bb4-9a52-0f5d1c7a8e21"`,
		},
		{
			"a missing hash has drifted", func(live *batchv1.CronJob) { delete(live.Annotations, AnnotationHash) }, true,
			"annotation datajobs.io/deployment-hash",
		},
		{
			"another hash has drifted", func(live *batchv1.CronJob) { live.Annotations[AnnotationHash] = "abc" }, true,
			`annotation datajobs.io/deployment-hash is "abc"`,
		},
		{
			"an edited schedule has drifted", func(live *batchv1.CronJob) { live.Spec.Schedule = "* * * * *" }, true,
			"spec.schedule differs",
		},
		{
			"a resumed cronjob has drifted", func(live *batchv1.CronJob) { live.Spec.Suspend = new(true) }, true,
			"spec.suspend differs",
		},
		{
			"a removed time zone has drifted", func(live *batchv1.CronJob) { live.Spec.TimeZone = nil }, true,
			"spec.timeZone differs",
		},
		{
			"an edited image has drifted", func(live *batchv1.CronJob) { container(live).Image = "evil:latest" }, true,
			"spec.jobTemplate.spec.template.spec.containers[sales-ingest].image differs",
		},
		{
			"an edited env var has drifted", func(live *batchv1.CronJob) { container(live).Env[0].Value = "x" }, true,
			"containers[sales-ingest].env[DATAJOBS_DEPLOYMENT_ID].value differs",
		},
		{"an added env var has drifted", func(live *batchv1.CronJob) {
			container(live).Env = append(container(live).Env, corev1.EnvVar{Name: "ZZZ", Value: "1"})
		}, true, "containers[sales-ingest].env differs"},
		{"an edited memory limit has drifted", func(live *batchv1.CronJob) {
			container(live).Resources.Limits[corev1.ResourceMemory] = resource.MustParse("2Gi")
		}, true, "resources.limits.memory differs"},
		{
			"an edited label has drifted", func(live *batchv1.CronJob) { live.Labels[LabelTeam] = "other" }, true,
			"metadata.labels.datajobs.io/team differs",
		},
		{
			"an edited job template label has drifted", func(live *batchv1.CronJob) { delete(live.Spec.JobTemplate.Labels, LabelJob) }, true,
			"spec.jobTemplate.metadata.labels.datajobs.io/job differs",
		},
		{
			"an edited version annotation has drifted", func(live *batchv1.CronJob) { live.Annotations[AnnotationJobVersion] = "x" }, true,
			"metadata.annotations.datajobs.io/job-version differs",
		},
		{"a field we never render, set by hand, has drifted", func(live *batchv1.CronJob) {
			container(live).Resources.Limits[neverRendered] = resource.MustParse("1")
			live.ManagedFields = append(live.ManagedFields, metav1.ManagedFieldsEntry{
				Manager: "kubectl-edit", Operation: metav1.ManagedFieldsOperationUpdate,
				FieldsV1: metav1.NewFieldsV1(`{"f:spec":{"f:jobTemplate":{"f:spec":{"f:template":{"f:spec":{"f:containers":{"k:{\"name\":\"sales-ingest\"}":{"f:resources":{"f:limits":{"f:example.com/widgets":{}}}}}}}}}}}`),
			})
		}, true, `f:spec/f:jobTemplate/f:spec/f:template/f:spec/f:containers/k:{"name":"sales-ingest"}/f:resources/f:limits/f:example.com/widgets is set by field manager "kubectl-edit"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rendered, _ := Render(testJob(), testDeployment(), testConfig())
			live := asStored(rendered)
			tt.change(live)
			drift, reason := Drifted(live, rendered)
			require.Equal(t, tt.drift, drift, reason)
			require.Contains(t, reason, tt.reason)
		})
	}
}

func TestDriftedMissing(t *testing.T) {
	t.Parallel()
	rendered, _ := Render(testJob(), testDeployment(), testConfig())
	drift, reason := Drifted(nil, rendered)
	require.True(t, drift)
	require.Equal(t, "cronjob is missing", reason)
}

func container(cj *batchv1.CronJob) *corev1.Container {
	return &cj.Spec.JobTemplate.Spec.Template.Spec.Containers[0]
}

// neverRendered is a resource datajobs never renders (an extended resource), for the
// tests of fields someone else adds.
const neverRendered corev1.ResourceName = "example.com/widgets"
