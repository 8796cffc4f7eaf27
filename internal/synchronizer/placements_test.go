package synchronizer_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/kube"
	"github.com/datajobs/datajobs/internal/synchronizer"
)

// placements is the placements in the data of the profiles' ConfigMap in the fixture's
// namespace (accounts: the ServiceAccounts), nil when there is none.
func (f *fixture) placements() map[string]string { return f.profilesData(false) }

func (f *fixture) accounts() map[string]string { return f.profilesData(true) }

func (f *fixture) profilesData(accounts bool) map[string]string {
	f.t.Helper()
	cm, err := f.client.CoreV1().ConfigMaps(f.ns).Get(f.t.Context(), kube.ProfilesConfigMapName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	require.NoError(f.t, err)
	out := map[string]string{}
	for k, v := range cm.Data {
		if strings.HasPrefix(k, kube.AccountsKeyPrefix) == accounts {
			out[k] = v
		}
	}
	return out
}

// Issue 43: the ConfigMap the chart's admission policy reads (the node selectors and
// tolerations granted to each team) follows the profiles table (without a grace): made at the start of a
// term, changed by a profile's create, update of its placement or of its grants, and
// delete, and repaired after a hand edit or a delete, with no job deployed at all.
func TestProfilePlacementsFollowTheProfiles(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	f.startWith(synchronizer.Config{PlacementGrace: -1}) // the exact projection: the grace has its own test
	f.eventually(func() bool { m := f.placements(); return m != nil && len(m) == 0 },
		"made at the start of a term, empty: the default profile places nothing")
	cm, err := f.client.CoreV1().ConfigMaps(f.ns).Get(ctx, kube.ProfilesConfigMapName, metav1.GetOptions{})
	require.NoError(t, err)
	installation, err := f.db.InstallationID(ctx)
	require.NoError(t, err)
	require.Equal(t, installation, cm.Labels[kube.LabelInstallation], "labelled as this installation's")

	pool := job.Profile{
		Name: "pool", NodeSelector: map[string]string{"pool": "a"}, Teams: []string{"team-a"},
		Tolerations: []job.Toleration{{Key: "dedicated", Operator: "Equal", Value: "a", Effect: "NoSchedule"}},
	}
	_, err = f.svc.PutProfile(ctx, pool)
	require.NoError(t, err)
	lineA := "nodeSelector:pool=a toleration:dedicated,Equal,a,NoSchedule,"
	f.eventually(func() bool { return f.placements()["team-a"] == lineA }, "a created profile's placement, under its team")
	require.Equal(t, map[string]string{
		kube.AccountsKeyPrefix + kube.EveryTeamKey: job.DefaultServiceAccountTemplate, // the default profile's
		kube.AccountsKeyPrefix + "team-a":          "datajobs-job-team-a",
	}, f.accounts(), "and its ServiceAccount")

	pool.NodeSelector = map[string]string{"pool": "b"}
	_, err = f.svc.PutProfile(ctx, pool)
	require.NoError(t, err)
	lineB := "nodeSelector:pool=b toleration:dedicated,Equal,a,NoSchedule,"
	f.eventually(func() bool { return f.placements()["team-a"] == lineB }, "a changed node selector")

	pool.Teams = []string{"team-b"} // a grant alone re-renders no CronJob, yet moves the placement
	pool.ServiceAccount = "pool-{team}"
	_, err = f.svc.PutProfile(ctx, pool)
	require.NoError(t, err)
	f.eventually(func() bool {
		m := f.placements()
		_, a := m["team-a"]
		return !a && m["team-b"] == lineB
	}, "a grant moved from team A to team B")
	f.eventually(func() bool {
		m := f.accounts()
		_, a := m[kube.AccountsKeyPrefix+"team-a"]
		return !a && m[kube.AccountsKeyPrefix+"team-b"] == "pool-team-b"
	}, "and its ServiceAccount, by its own template")

	pool.Teams = []string{job.GrantAllTeams}
	_, err = f.svc.PutProfile(ctx, pool)
	require.NoError(t, err)
	f.eventually(func() bool {
		m := f.placements()
		return len(m) == 1 && m[kube.EveryTeamKey] == lineB
	}, "granted to every team")

	cm, err = f.client.CoreV1().ConfigMaps(f.ns).Get(ctx, kube.ProfilesConfigMapName, metav1.GetOptions{})
	require.NoError(t, err)
	cm.Data["team-x"] = "nodeSelector:pool=gold"
	cm.Data[kube.EveryTeamKey] = lineA
	_, err = f.client.CoreV1().ConfigMaps(f.ns).Update(ctx, cm, metav1.UpdateOptions{FieldManager: "kubectl-edit"})
	require.NoError(t, err)
	f.eventually(func() bool {
		m := f.placements()
		return len(m) == 1 && m[kube.EveryTeamKey] == lineB
	}, "a hand edit is reverted")

	require.NoError(t, f.svc.DeleteProfile(ctx, "pool"))
	f.eventually(func() bool { m := f.placements(); return m != nil && len(m) == 0 }, "a deleted profile's placement is gone")

	require.NoError(t, f.client.CoreV1().ConfigMaps(f.ns).Delete(ctx, kube.ProfilesConfigMapName, metav1.DeleteOptions{}))
	f.eventually(func() bool { return f.placements() != nil }, "a deleted ConfigMap is made again")
}

// A ConfigMap of the name that another installation (or a person) made is never written:
// the synchronizer reports it and leaves it as it is.
func TestProfilePlacementsLeaveAForeignConfigMapAlone(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	foreign := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: kube.ProfilesConfigMapName, Labels: map[string]string{kube.LabelInstallation: "another"}},
		Data:       map[string]string{"team-a": "nodeSelector:pool=theirs"},
	}
	_, err := f.client.CoreV1().ConfigMaps(f.ns).Create(t.Context(), foreign, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = f.svc.PutProfile(t.Context(), job.Profile{Name: "pool", NodeSelector: map[string]string{"pool": "a"}, Teams: []string{"team-a"}})
	require.NoError(t, err)
	f.createJob("placed-report")
	f.deploy("placed-report", job.DeploymentChange{JobVersion: ptr("v1"), ExecutionProfile: ptr("pool")})
	f.start()
	f.synced("placed-report") // the term has run its first pass, which queues the placements too
	require.Equal(t, map[string]string{"team-a": "nodeSelector:pool=theirs"}, f.placements())
}

// A single pass (`datajobs sync --once`) keeps the placements too; a dry one writes nothing.
func TestASinglePassWritesTheProfilePlacements(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	_, err := f.svc.PutProfile(t.Context(), job.Profile{Name: "spot", Tolerations: []job.Toleration{{Key: "spot", Operator: "Exists"}}, Teams: []string{job.GrantAllTeams}})
	require.NoError(t, err)
	rep, err := f.synchronizerWith(synchronizer.Config{DryRun: true}).RunOnce(t.Context(), f.epoch)
	require.NoError(t, err)
	require.Empty(t, rep.Errors)
	require.Nil(t, f.placements(), "a dry run writes no ConfigMap")
	rep, err = f.synchronizer(false).RunOnce(t.Context(), f.epoch)
	require.NoError(t, err)
	require.Empty(t, rep.Errors)
	require.Equal(t, map[string]string{kube.EveryTeamKey: "toleration:spot,Exists,,,"}, f.placements())
}

// A profile's placement change keeps the old line admitted beside the new one for the
// grace (the Jobs made before it keep the old placement), across a change of leader, and
// drops it once the grace has passed, with no other event than the reconcile's own
// requeue (the fixture's resync is an hour); a line added by hand meanwhile is reverted.
func TestAChangedPlacementStaysAdmittedForItsGrace(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	const grace = 10 * time.Second
	cfg := synchronizer.Config{PlacementGrace: grace}
	pool := job.Profile{Name: "pool", NodeSelector: map[string]string{"pool": "a"}, Teams: []string{"team-a"}}
	_, err := f.svc.PutProfile(ctx, pool)
	require.NoError(t, err)
	f.startWith(cfg)
	const lineA, lineB = "nodeSelector:pool=a", "nodeSelector:pool=b"
	f.eventually(func() bool { return f.placements()["team-a"] == lineA }, "the granted placement")

	changed := time.Now()
	pool.NodeSelector = map[string]string{"pool": "b"}
	_, err = f.svc.PutProfile(ctx, pool)
	require.NoError(t, err)
	f.eventually(func() bool { return f.placements()["team-a"] == lineA+"\n"+lineB }, "the new placement beside the old one")
	cm, err := f.client.CoreV1().ConfigMaps(f.ns).Get(ctx, kube.ProfilesConfigMapName, metav1.GetOptions{})
	require.NoError(t, err)
	require.Contains(t, cm.Annotations[kube.AnnotationRetiredPlacements], `"team-a:`, "the old line's retirement time, in the ConfigMap")

	cm.Data["team-x"] = "nodeSelector:pool=gold"
	_, err = f.client.CoreV1().ConfigMaps(f.ns).Update(ctx, cm, metav1.UpdateOptions{FieldManager: "kubectl-edit"})
	require.NoError(t, err)
	f.eventually(func() bool { _, x := f.placements()["team-x"]; return !x }, "a line added by hand is reverted, grace or not")

	f.stop() // a new leader continues the clock it reads from the ConfigMap
	f.startWith(cfg)
	require.Equal(t, lineA+"\n"+lineB, f.placements()["team-a"])
	f.eventually(func() bool { return f.placements()["team-a"] == lineB }, "the old line dropped once its grace has passed")
	require.GreaterOrEqual(t, time.Since(changed), grace-time.Second, "not before (the time is kept to the second)")
	cm, err = f.client.CoreV1().ConfigMaps(f.ns).Get(ctx, kube.ProfilesConfigMapName, metav1.GetOptions{})
	require.NoError(t, err)
	require.NotContains(t, cm.Annotations, kube.AnnotationRetiredPlacements)
	require.NotContains(t, cm.Data["team-a"], lineA)
}
