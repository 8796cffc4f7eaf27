package synchronizer

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"maps"
	"strings"
	"testing"
	"time"

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
	want := kube.ProfilesConfigMap(kube.RenderConfig{Namespace: "ns", Installation: inst}, profiles)
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
			cm.Annotations["note"] = "x"
		}), ActionUnchanged, false},
		{"a profile changed (other data): update", kube.ProfilesConfigMap(kube.RenderConfig{Namespace: "ns", Installation: inst}, profiles[:1]), ActionUpdate, false},
		{"a team's line edited by hand: update", edited(func(cm *corev1.ConfigMap) { cm.Data["team-a"] = "nodeSelector:pool=b" }), ActionUpdate, false},
		{"a team added by hand: update", edited(func(cm *corev1.ConfigMap) { cm.Data["team-b"] = "nodeSelector:pool=a" }), ActionUpdate, false},
		{"binary data added by hand: update", edited(func(cm *corev1.ConfigMap) { cm.BinaryData = map[string][]byte{"x": nil} }), ActionUpdate, false},
		{"our digest annotation removed: update", edited(func(cm *corev1.ConfigMap) { cm.Annotations = nil }), ActionUpdate, false},
		{"our component label removed: update", edited(func(cm *corev1.ConfigMap) { delete(cm.Labels, kube.LabelComponent) }), ActionUpdate, false},
		{"another installation's ConfigMap: left alone", kube.ProfilesConfigMap(kube.RenderConfig{Namespace: "ns", Installation: "inst-2"}, nil), ActionConflict, false},
		{"an unlabelled ConfigMap of the name: left alone", edited(func(cm *corev1.ConfigMap) { cm.Labels = nil }), ActionConflict, false},
		{"being deleted: wait, look again", edited(func(cm *corev1.ConfigMap) { cm.DeletionTimestamp = &metav1.Time{} }), ActionWait, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := planPlacements(want, tc.live, inst, time.Now(), time.Hour)
			require.Equal(t, tc.action, p.Action, p.Reason)
			require.Equal(t, tc.again, p.again)
		})
	}
}

// withDefault is the ConfigMap of installation inst for the default profile and p.
func withDefault(inst string, p job.Profile) *corev1.ConfigMap {
	return kube.ProfilesConfigMap(kube.RenderConfig{Namespace: "ns", Installation: inst}, []job.Profile{
		{Name: job.DefaultProfile, Teams: []string{job.GrantAllTeams}}, p,
	})
}

// A placement that leaves a team's key stays in it for the grace, with its retirement time
// in the ConfigMap (so that the next plan, a new leader's too, counts from it), then is
// dropped; lines someone added by hand are not kept.
func TestPlanPlacementsKeepARetiredLineForItsGrace(t *testing.T) {
	t.Parallel()
	const inst, grace = "inst-1", time.Hour
	t0 := time.Date(2026, 12, 6, 1, 0, 0, 0, time.UTC)
	pool := func(value string, teams ...string) *corev1.ConfigMap {
		return withDefault(inst, job.Profile{Name: "pool", NodeSelector: map[string]string{"pool": value}, Teams: teams})
	}
	const lineA, lineB, lineC = "nodeSelector:pool=a", "nodeSelector:pool=b", "nodeSelector:pool=c"
	plan := func(granted, live *corev1.ConfigMap, now time.Time) placementsPlan {
		return planPlacements(granted, live, inst, now, grace)
	}
	// changed is the ConfigMap written once pool moved from a to b at t0.
	changed := plan(pool("b", "team-a"), pool("a", "team-a"), t0).Want
	byHand := func(cm *corev1.ConfigMap, edit func(*corev1.ConfigMap)) *corev1.ConfigMap {
		cm = cm.DeepCopy()
		edit(cm)
		return cm
	}
	tests := []struct {
		name    string
		granted *corev1.ConfigMap
		live    *corev1.ConfigMap
		now     time.Time
		noGrace bool
		action  Action
		data    map[string]string
		retired map[string]time.Time // by "key line"
		expires time.Time
	}{
		{
			name: "a changed placement keeps the old line, retired now", granted: pool("b", "team-a"), live: pool("a", "team-a"), now: t0,
			action: ActionUpdate, data: map[string]string{"team-a": lineA + "\n" + lineB}, retired: map[string]time.Time{"team-a " + lineA: t0}, expires: t0.Add(grace),
		},
		{
			name: "within its grace the old line stays: nothing to write", granted: pool("b", "team-a"), live: changed, now: t0.Add(59 * time.Minute),
			action: ActionUnchanged, data: map[string]string{"team-a": lineA + "\n" + lineB}, retired: map[string]time.Time{"team-a " + lineA: t0}, expires: t0.Add(grace),
		},
		{
			name: "once its grace has passed the old line is dropped", granted: pool("b", "team-a"), live: changed, now: t0.Add(grace),
			action: ActionUpdate, data: map[string]string{"team-a": lineB},
		},
		{
			name: "a line granted again loses its retirement (and the one it replaces starts its own)", granted: pool("a", "team-a"), live: changed, now: t0.Add(10 * time.Minute),
			action: ActionUpdate, data: map[string]string{"team-a": lineA + "\n" + lineB}, retired: map[string]time.Time{"team-a " + lineB: t0.Add(10 * time.Minute)}, expires: t0.Add(10*time.Minute + grace),
		},
		{
			name: "a new leader reading the ConfigMap keeps the clock of the lines it finds retired", granted: pool("c", "team-a"), live: changed, now: t0.Add(30 * time.Minute),
			action: ActionUpdate, data: map[string]string{"team-a": lineA + "\n" + lineB + "\n" + lineC},
			retired: map[string]time.Time{"team-a " + lineA: t0, "team-a " + lineB: t0.Add(30 * time.Minute)}, expires: t0.Add(grace),
		},
		{
			name: "a revoked grant keeps the line under the team it left, the new team has it granted", granted: pool("a", "team-b"), live: pool("a", "team-a"), now: t0,
			action: ActionUpdate, data: map[string]string{"team-a": lineA, "team-b": lineA}, retired: map[string]time.Time{"team-a " + lineA: t0}, expires: t0.Add(grace),
		},
		{
			name: "a line added by hand is reverted at once", granted: pool("a", "team-a"),
			live: byHand(pool("a", "team-a"), func(cm *corev1.ConfigMap) { cm.Data["team-x"] = "nodeSelector:pool=gold" }), now: t0,
			action: ActionUpdate, data: map[string]string{"team-a": lineA},
		},
		{
			name: "a hand edit keeps the lines already retired, not the line it added", granted: pool("b", "team-a"),
			live: byHand(changed, func(cm *corev1.ConfigMap) { cm.Data["team-a"] += "\nnodeSelector:pool=gold" }), now: t0.Add(time.Minute),
			action: ActionUpdate, data: map[string]string{"team-a": lineA + "\n" + lineB}, retired: map[string]time.Time{"team-a " + lineA: t0}, expires: t0.Add(grace),
		},
		{
			name: "a retired line removed by hand ends its grace", granted: pool("b", "team-a"),
			live: byHand(changed, func(cm *corev1.ConfigMap) { cm.Data["team-a"] = lineB }), now: t0.Add(time.Minute),
			action: ActionUpdate, data: map[string]string{"team-a": lineB},
		},
		{
			name: "a retirement time from the future counts from now", granted: pool("b", "team-a"),
			live: byHand(changed, func(cm *corev1.ConfigMap) {
				cm.Annotations[kube.AnnotationRetiredPlacements] = strings.ReplaceAll(cm.Annotations[kube.AnnotationRetiredPlacements], "2026-12-06", "2099-12-06")
			}), now: t0.Add(time.Minute),
			action: ActionUpdate, data: map[string]string{"team-a": lineA + "\n" + lineB}, retired: map[string]time.Time{"team-a " + lineA: t0.Add(time.Minute)}, expires: t0.Add(time.Minute + grace),
		},
		{
			name: "without a grace the ConfigMap is the exact projection", granted: pool("b", "team-a"), live: pool("a", "team-a"), now: t0, noGrace: true,
			action: ActionUpdate, data: map[string]string{"team-a": lineB},
		},
		{
			name: "a new ConfigMap holds the granted lines alone", granted: pool("b", "team-a"), now: t0,
			action: ActionCreate, data: map[string]string{"team-a": lineB},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g := grace
			if tc.noGrace {
				g = -1
			}
			p := planPlacements(tc.granted, tc.live, inst, tc.now, g)
			require.Equal(t, tc.action, p.Action, p.Reason)
			require.Equal(t, tc.data, withoutAccounts(p.Want.Data))
			require.Equal(t, tc.expires, p.expires)
			require.Equal(t, tc.retired, withoutAccounts(retiredOf(t, p.Want)))
			if tc.live != nil {
				again := planPlacements(tc.granted, p.Want, inst, tc.now, g)
				require.Equal(t, ActionUnchanged, again.Action, "what the plan writes is planned as up to date: %s", again.Reason)
			}
		})
	}
}

// withoutAccounts is m without the ServiceAccounts' keys (kube.AccountsKeyPrefix; nil
// when nothing else is left), which TestPlanPlacementsKeepARetiredServiceAccountForItsGrace
// covers.
func withoutAccounts[V any](m map[string]V) map[string]V {
	out := maps.Clone(m)
	maps.DeleteFunc(out, func(k string, _ V) bool { return strings.HasPrefix(k, kube.AccountsKeyPrefix) })
	if len(out) == 0 {
		return nil
	}
	return out
}

// A profile's ServiceAccount that changes, or leaves a team with its grant, stays admitted
// under the team's key for the grace, like a placement (the pods of the Jobs made before
// run as it), and is dropped after.
func TestPlanPlacementsKeepARetiredServiceAccountForItsGrace(t *testing.T) {
	t.Parallel()
	const inst, grace = "inst-1", time.Hour
	t0 := time.Date(2026, 12, 6, 1, 0, 0, 0, time.UTC)
	lake := func(account string, teams ...string) *corev1.ConfigMap {
		return withDefault(inst, job.Profile{Name: "lake", ServiceAccount: account, Teams: teams})
	}
	const keyA, keyB, every = kube.AccountsKeyPrefix + "team-a", kube.AccountsKeyPrefix + "team-b", kube.AccountsKeyPrefix + kube.EveryTeamKey
	p := planPlacements(lake("lake2-{team}", "team-a"), lake("lake-{team}", "team-a"), inst, t0, grace)
	require.Equal(t, ActionUpdate, p.Action)
	require.Equal(t, map[string]string{keyA: "lake-team-a\nlake2-team-a", every: job.DefaultServiceAccountTemplate}, p.Want.Data)
	require.Equal(t, map[string]time.Time{keyA + " lake-team-a": t0}, retiredOf(t, p.Want))
	require.Equal(t, t0.Add(grace), p.expires)

	p = planPlacements(lake("lake2-{team}", "team-b"), p.Want, inst, t0.Add(time.Minute), grace)
	require.Equal(t, map[string]string{keyA: "lake-team-a\nlake2-team-a", keyB: "lake2-team-b", every: job.DefaultServiceAccountTemplate}, p.Want.Data,
		"a grant moved: granted to the new team at once, retired under the old one")
	require.Equal(t, map[string]time.Time{keyA + " lake-team-a": t0, keyA + " lake2-team-a": t0.Add(time.Minute)}, retiredOf(t, p.Want))

	p = planPlacements(lake("lake2-{team}", "team-b"), p.Want, inst, t0.Add(time.Minute+grace), grace)
	require.Equal(t, map[string]string{keyB: "lake2-team-b", every: job.DefaultServiceAccountTemplate}, p.Want.Data, "dropped once the grace has passed")
}

// retiredOf is the retirement times cm records, by "key line" (nil: none).
func retiredOf(t *testing.T, cm *corev1.ConfigMap) map[string]time.Time {
	t.Helper()
	raw, ok := cm.Annotations[kube.AnnotationRetiredPlacements]
	if !ok {
		return nil
	}
	var marks map[string]string
	require.NoError(t, json.Unmarshal([]byte(raw), &marks))
	ids := map[string]string{}
	for key, value := range cm.Data {
		for _, line := range strings.Split(value, "\n") {
			sum := sha256.Sum256([]byte(line))
			ids[key+":"+hex.EncodeToString(sum[:8])] = key + " " + line
		}
	}
	out := map[string]time.Time{}
	for id, at := range marks {
		line, ok := ids[id]
		require.True(t, ok, "a retirement time of a line the data holds: %s", id)
		tm, err := time.Parse(time.RFC3339, at)
		require.NoError(t, err)
		out[line] = tm
	}
	return out
}
