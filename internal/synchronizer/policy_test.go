package synchronizer_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"

	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/kube"
)

// TestRunPolicyIsInTheCronJobOnTheAPIServerAndAChangeOfItIsApplied guards the path from
// the stored policy to Kubernetes: each field shows in the CronJob as the apiserver keeps
// it (and so in every Job it makes), and changing one field alone changes the spec hash
// and is applied (a policy outside the hash would never reach a deployed CronJob).
func TestRunPolicyIsInTheCronJobOnTheAPIServerAndAChangeOfItIsApplied(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.createJob("policy-job")
	f.deploy("policy-job", job.DeploymentChange{JobVersion: ptr("v1"), Schedule: ptr("0 9 * * *"), Policy: job.PolicyChange{
		Retries: ptr(int32(0)), TimeoutSeconds: ptr(int64(120)), ConcurrencyPolicy: ptr("Allow"),
		TimeZone: ptr("Asia/Tokyo"), StartingDeadlineSeconds: ptr(int64(300)), CatchUp: ptr(2),
	}})
	f.start()
	st := f.synced("policy-job")
	cj := f.cronJob("policy-job")
	require.Equal(t, int32(0), *cj.Spec.JobTemplate.Spec.BackoffLimit)
	require.Equal(t, int64(120), *cj.Spec.JobTemplate.Spec.ActiveDeadlineSeconds)
	require.Equal(t, batchv1.AllowConcurrent, cj.Spec.ConcurrencyPolicy)
	require.Equal(t, "Asia/Tokyo", *cj.Spec.TimeZone)
	require.Equal(t, int64(300), *cj.Spec.StartingDeadlineSeconds)

	f.patch("policy-job", job.DeploymentChange{Policy: job.PolicyChange{Retries: ptr(int32(4))}})
	f.eventually(func() bool {
		cj := f.cronJob("policy-job")
		return cj != nil && *cj.Spec.JobTemplate.Spec.BackoffLimit == 4
	}, "the new retries are applied")
	after := f.synced("policy-job")
	require.NotEqual(t, st.Actual.DeploymentVersionSHA, after.Actual.DeploymentVersionSHA)
	require.Equal(t, after.Actual.DeploymentVersionSHA, f.cronJob("policy-job").Annotations[kube.AnnotationHash])
	require.Equal(t, "Asia/Tokyo", *f.cronJob("policy-job").Spec.TimeZone, "the other fields are kept")
}
