package synchronizer

import (
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/kube"
)

// planPlacements decides the placements' ConfigMap from the profiles' projection and the
// informer's copy alone; these are the cases a live test cannot all reach cheaply.
func TestPlanPlacements(t *testing.T) {
	t.Parallel()
	const inst = "inst-1"
	profiles := []job.Profile{
		{Name: job.DefaultProfile, Teams: []string{job.GrantAllTeams}},
		{Name: "pool-a", NodeSelector: map[string]string{"pool": "a"}, Teams: []string{"team-a"}},
	}
	want := kube.ProfilesConfigMap("ns", inst, profiles)
	edited := func(edit func(*corev1.ConfigMap)) *corev1.ConfigMap {
		cm := want.DeepCopy()
		edit(cm)
		return cm
	}
	tests := []struct {
		name   string
		live   *corev1.ConfigMap
		action Action
		again  bool
	}{
		{"no ConfigMap: create", nil, ActionCreate, false},
		{"the same placements: nothing", want.DeepCopy(), ActionUnchanged, false},
		{"another label or annotation someone added: nothing", edited(func(cm *corev1.ConfigMap) {
			cm.Labels["example.com/owner"] = "ops"
			cm.Annotations = map[string]string{"note": "x"}
		}), ActionUnchanged, false},
		{"a profile changed (other data): update", kube.ProfilesConfigMap("ns", inst, profiles[:1]), ActionUpdate, false},
		{"a team's line edited by hand: update", edited(func(cm *corev1.ConfigMap) { cm.Data["team-a"] = "nodeSelector:pool=b" }), ActionUpdate, false},
		{"a team added by hand: update", edited(func(cm *corev1.ConfigMap) { cm.Data["team-b"] = "nodeSelector:pool=a" }), ActionUpdate, false},
		{"binary data added by hand: update", edited(func(cm *corev1.ConfigMap) { cm.BinaryData = map[string][]byte{"x": nil} }), ActionUpdate, false},
		{"our component label removed: update", edited(func(cm *corev1.ConfigMap) { delete(cm.Labels, kube.LabelComponent) }), ActionUpdate, false},
		{"another installation's ConfigMap: left alone", kube.ProfilesConfigMap("ns", "inst-2", nil), ActionConflict, false},
		{"an unlabelled ConfigMap of the name: left alone", edited(func(cm *corev1.ConfigMap) { cm.Labels = nil }), ActionConflict, false},
		{"being deleted: wait, look again", edited(func(cm *corev1.ConfigMap) { cm.DeletionTimestamp = &metav1.Time{} }), ActionWait, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := planPlacements(want, tc.live, inst)
			require.Equal(t, tc.action, p.Action, p.Reason)
			require.Equal(t, tc.again, p.again)
		})
	}
}
