package synchronizer

import (
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/datajobs/datajobs/internal/kube"
)

// planTeamSecrets decides each team's Secret from the wanted credentials and the
// informer's Secrets alone; these are the cases a live test cannot all reach cheaply.
func TestPlanTeamSecrets(t *testing.T) {
	t.Parallel()
	const inst = "inst-1"
	want := func(team, secret string) *corev1.Secret { return kube.TeamOAuthSecret("ns", inst, team, "id", secret) }
	of := func(installation string, s *corev1.Secret) *corev1.Secret {
		s = s.DeepCopy()
		s.Labels[kube.LabelInstallation] = installation
		return s
	}
	none := func(string) bool { return false }
	tests := []struct {
		name     string
		want     map[string]*corev1.Secret
		lives    []*corev1.Secret
		referred func(string) bool
		action   Action
		again    bool
	}{
		{"credentials and no Secret: create", map[string]*corev1.Secret{"a": want("a", "s")}, nil, none, ActionCreate, false},
		{"the same Secret: nothing", map[string]*corev1.Secret{"a": want("a", "s")}, []*corev1.Secret{want("a", "s")}, none, ActionUnchanged, false},
		{"another value (changed or edited): update", map[string]*corev1.Secret{"a": want("a", "new")}, []*corev1.Secret{want("a", "old")}, none, ActionUpdate, false},
		{"our labels removed by hand: update", map[string]*corev1.Secret{"a": want("a", "s")}, []*corev1.Secret{func() *corev1.Secret {
			s := want("a", "s")
			delete(s.Labels, kube.LabelTeam)
			return s
		}()}, none, ActionUpdate, false},
		{"another installation's Secret: left alone", map[string]*corev1.Secret{"a": want("a", "s")}, []*corev1.Secret{of("inst-2", want("a", "s"))}, none, ActionConflict, false},
		{"a client secret this keyring cannot open: kept as it is", map[string]*corev1.Secret{"a": nil}, []*corev1.Secret{want("a", "s")}, none, ActionKeep, false},
		{"credentials gone, no CronJob refers to it: delete", nil, []*corev1.Secret{want("a", "s")}, none, ActionDelete, false},
		{"credentials gone, a CronJob still refers to it: kept, look again", nil, []*corev1.Secret{want("a", "s")}, func(string) bool { return true }, ActionKeep, true},
		{"being deleted while wanted: wait", map[string]*corev1.Secret{"a": want("a", "s")}, []*corev1.Secret{func() *corev1.Secret {
			s := want("a", "s")
			s.DeletionTimestamp = &metav1.Time{}
			return s
		}()}, none, ActionWait, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			plans := planTeamSecrets(tc.want, tc.lives, inst, tc.referred)
			require.Len(t, plans, 1)
			require.Equal(t, tc.action, plans[0].Action, plans[0].Reason)
			require.Equal(t, tc.again, plans[0].again)
			require.Equal(t, "datajobs-team-a-oauth", plans[0].Name)
		})
	}
	// Another installation's Secret of a team this one does not want is not even planned.
	require.Empty(t, planTeamSecrets(nil, []*corev1.Secret{of("inst-2", want("a", "s"))}, inst, none))
}
