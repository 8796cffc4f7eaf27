package synchronizer

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/kube"
	"github.com/datajobs/datajobs/internal/store"
)

func TestPlanForCronJobsDatajobsDoesNotManage(t *testing.T) {
	t.Parallel()
	unmanaged := &batchv1.CronJob{
		ObjectMeta: metav1.ObjectMeta{Name: "legacy-job", UID: "cronjob-uid", Labels: map[string]string{"app": "other"}},
		Spec:       batchv1.CronJobSpec{Schedule: "0 * * * *", Suspend: new(false)},
	}
	spec, err := json.Marshal(unmanaged.Spec)
	require.NoError(t, err)
	j := &job.Job{Name: "legacy-job", UID: "job-uid", Team: "team-a", Generation: 1}
	imported := &job.Deployment{JobVersion: "v1", Schedule: "0 * * * *", Enabled: true, Adopted: &job.Adoption{CronJobUID: "cronjob-uid", Spec: spec}}
	disabledSinceImport := *imported
	disabledSinceImport.Enabled = false
	oldSpec, err := json.Marshal(batchv1.CronJobSpec{Schedule: "30 * * * *", Suspend: new(false)})
	require.NoError(t, err)
	changedLive := &job.Deployment{JobVersion: "v1", Schedule: "30 * * * *", Enabled: true, Adopted: &job.Adoption{CronJobUID: "cronjob-uid", Spec: oldSpec}}
	otherImport := &job.Deployment{JobVersion: "v1", Enabled: true, Adopted: &job.Adoption{CronJobUID: "another-uid", Spec: spec}}
	for _, tc := range []struct {
		behaviour string
		state     store.SyncState
		want      Action
	}{
		{"the CronJob an import recorded is adopted", store.SyncState{Job: j, Desired: imported}, ActionAdopt},
		{"a deployment changed since the import is applied on adoption", store.SyncState{Job: j, Desired: &disabledSinceImport}, ActionUpdate},
		{"a CronJob changed since its import is not overwritten", store.SyncState{Job: j, Desired: changedLive}, ActionConflict},
		{"another object of that name is never touched", store.SyncState{Job: j, Desired: otherImport}, ActionConflict},
		{"a deployment of our own does not take over a foreign CronJob", store.SyncState{Job: j, Desired: &job.Deployment{JobVersion: "v1"}}, ActionConflict},
		{"a foreign CronJob without a deployment is not deleted", store.SyncState{Job: j}, ActionUnchanged},
		{"nor is one without any row", store.SyncState{}, ActionUnchanged},
		{"an actual row left behind is forgotten, the CronJob kept", store.SyncState{Actual: &job.ActualDeployment{JobName: "legacy-job"}}, ActionDelete},
	} {
		t.Run(tc.behaviour, func(t *testing.T) {
			t.Parallel()
			tc.state.Name = "legacy-job"
			p := plan(tc.state, unmanaged, kube.RenderConfig{Namespace: "ns"}, nil)
			require.Equal(t, tc.want, p.Action, p.Reason)
			if tc.want == ActionDelete {
				require.Nil(t, p.Live, "the foreign CronJob is not deleted")
			}
		})
	}
}
