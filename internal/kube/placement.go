package kube

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/datajobs/datajobs/internal/job"
)

// The node placements of execution profiles (issue 43, docs/profiles.md "The admission
// policy"). The chart's ValidatingAdmissionPolicy admits a pod of team T in the jobs
// namespace only with the node selector and tolerations of a profile granted to T, and
// reads which those are from one ConfigMap that the synchronizer keeps as the projection
// of the profiles table, plus the lines that left it less than a grace period ago
// (placement_grace.go; internal/synchronizer/placements.go). CEL has no JSON
// parser, so the data is made of plain tokens the policy can build from a pod and compare
// as strings: one key per team (and EveryTeamKey for the profiles granted "*"), holding one
// line per distinct placement, each line the sorted tokens of one profile:
//
//	nodeSelector:KEY=VALUE
//	toleration:KEY,OPERATOR,VALUE,EFFECT,SECONDS
//
// Label keys and values, taint effects and operators hold no space, comma, '=' or newline,
// so the tokens need no quoting. A profile that adds neither (the default one) has no
// line: a pod without node selector and tolerations is always admitted.
//
// Beside them, the ServiceAccounts the profiles render, which the chart's -team-accounts
// policy admits: under AccountsKeyPrefix+team one line per
// ServiceAccount name of the profiles granted to the team, and under
// AccountsKeyPrefix+EveryTeamKey one line per template ({team} in it) of the profiles
// granted "*", which the policy fills in with the pod's team.
const (
	// ProfilesConfigMapName is the ConfigMap in the jobs namespace that holds the
	// placements; the chart's policy binding names it as its parameter.
	ProfilesConfigMapName = "datajobs-profiles"
	// ProfilesComponent (LabelComponent) marks it among the objects datajobs manages.
	ProfilesComponent = "execution-profiles"
	// EveryTeamKey holds the placements of the profiles granted to every team ("*"). A team
	// is a DNS label, so no team's key can be it.
	EveryTeamKey = "_every-team"
	// AccountsKeyPrefix prefixes the keys of the ServiceAccounts: a key with a '.' is no
	// team's (a DNS label), so the placements' keys never meet them.
	AccountsKeyPrefix = "serviceAccounts."

	selectorToken   = "nodeSelector:"
	tolerationToken = "toleration:"
)

// ProfilePlacement is the line of profile p's placement: its node selector and
// tolerations as sorted tokens, and, with a GPU, the toleration Kubernetes'
// ExtendedResourceToleration admission plugin gives a pod that asks for one (where that
// plugin is on, such a pod has it before the policy sees it). "" when the profile adds
// none of them.
func ProfilePlacement(p job.Profile) string {
	tokens := make([]string, 0, len(p.NodeSelector)+len(p.Tolerations)+1)
	for k, v := range p.NodeSelector {
		tokens = append(tokens, selectorToken+k+"="+v)
	}
	for _, t := range p.Tolerations {
		tokens = append(tokens, TolerationToken(corev1.Toleration{
			Key: t.Key, Operator: corev1.TolerationOperator(t.Operator), Value: t.Value,
			Effect: corev1.TaintEffect(t.Effect), TolerationSeconds: t.TolerationSeconds,
		}))
	}
	if g := p.Resources.GPU; g != nil {
		tokens = append(tokens, TolerationToken(corev1.Toleration{Key: g.Resource, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}))
	}
	slices.Sort(tokens)
	return strings.Join(slices.Compact(tokens), " ")
}

// TolerationToken is t as the policy writes it (an empty operator is Equal, as the
// scheduler reads it).
func TolerationToken(t corev1.Toleration) string {
	op := cmp.Or(string(t.Operator), string(corev1.TolerationOpEqual))
	seconds := ""
	if t.TolerationSeconds != nil {
		seconds = strconv.FormatInt(*t.TolerationSeconds, 10)
	}
	return tolerationToken + strings.Join([]string{t.Key, op, t.Value, string(t.Effect), seconds}, ",")
}

// ProfilePlacements is the ConfigMap's data for profiles: per team (EveryTeamKey for
// "*"), the distinct lines of the profiles granted to it, sorted, joined by newlines.
func ProfilePlacements(profiles []job.Profile) map[string]string {
	lines := map[string][]string{}
	for _, p := range profiles {
		line := ProfilePlacement(p)
		if line == "" {
			continue
		}
		for _, team := range p.Teams {
			key := team
			if team == job.GrantAllTeams {
				key = EveryTeamKey
			}
			lines[key] = append(lines[key], line)
		}
	}
	return joinedLines(lines)
}

// ProfileAccounts is the ConfigMap's data of the ServiceAccounts of profiles: per team
// (AccountsKeyPrefix+team), the distinct names its profiles render, and for the profiles
// granted "*" (AccountsKeyPrefix+EveryTeamKey) their templates. fallback is the template
// of a profile that names none (RenderConfig.JobServiceAccountTemplate).
func ProfileAccounts(profiles []job.Profile, fallback string) map[string]string {
	lines := map[string][]string{}
	for _, p := range profiles {
		for _, team := range p.Teams {
			key, account := AccountsKeyPrefix+team, p.ServiceAccountOf(team, fallback)
			if team == job.GrantAllTeams {
				key, account = AccountsKeyPrefix+EveryTeamKey, p.ServiceAccountTemplate(fallback)
			}
			lines[key] = append(lines[key], account)
		}
	}
	return joinedLines(lines)
}

// TeamAccounts is, of data (the profiles' ConfigMap's), the ServiceAccounts of the
// profiles granted to team, as the chart's -team-accounts policy reads them: the names
// under AccountsKeyPrefix+team, and the templates under AccountsKeyPrefix+EveryTeamKey
// with {team} replaced.
func TeamAccounts(data map[string]string, team string) []string {
	var out []string
	for _, key := range []string{AccountsKeyPrefix + team, AccountsKeyPrefix + EveryTeamKey} {
		for line := range strings.SplitSeq(data[key], "\n") {
			if line != "" {
				out = append(out, strings.ReplaceAll(line, job.TeamPlaceholder, team))
			}
		}
	}
	return out
}

// joinedLines is lines by key, each key's sorted, without repeats, joined by newlines.
func joinedLines(lines map[string][]string) map[string]string {
	data := make(map[string]string, len(lines))
	for key, ls := range lines {
		slices.Sort(ls)
		data[key] = strings.Join(slices.Compact(ls), "\n")
	}
	return data
}

// ProfilesConfigMap is the placements' and ServiceAccounts' ConfigMap of profiles in
// cfg's namespace, labelled as cfg's installation's.
func ProfilesConfigMap(cfg RenderConfig, profiles []job.Profile) *corev1.ConfigMap {
	l := map[string]string{LabelManagedBy: ManagedByValue, LabelComponent: ProfilesComponent}
	if cfg.Installation != "" {
		l[LabelInstallation] = cfg.Installation
	}
	data := ProfilePlacements(profiles)
	maps.Copy(data, ProfileAccounts(profiles, cfg.JobServiceAccountTemplate))
	return &corev1.ConfigMap{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{
			Name: ProfilesConfigMapName, Namespace: cfg.Namespace, Labels: l,
			Annotations: map[string]string{AnnotationPlacementsDigest: placementsDigest(data)},
		},
		Data: data,
	}
}

// ProfilesConfigMapMatches is true when live holds want's data, labels and datajobs'
// annotations (placementAnnotations; other labels and annotations someone added are left
// alone).
func ProfilesConfigMapMatches(live, want *corev1.ConfigMap) bool {
	for k, v := range want.Labels {
		if live.Labels[k] != v {
			return false
		}
	}
	for _, k := range placementAnnotations {
		l, inLive := live.Annotations[k]
		w, inWant := want.Annotations[k]
		if l != w || inLive != inWant {
			return false
		}
	}
	return maps.Equal(live.Data, want.Data) && len(live.BinaryData) == 0
}

// ProfilesConfigMapSelector selects the placements' ConfigMap by name, so that an
// informer sees no other ConfigMap (and a Role may name the one it reads).
func ProfilesConfigMapSelector() fields.Selector {
	return fields.OneTermEqualSelector("metadata.name", ProfilesConfigMapName)
}

// CreateConfigMap creates cm in the Writer's namespace. One of that name already there
// (of any owner) fails it with an error for which apierrors.IsAlreadyExists is true.
func (w *Writer) CreateConfigMap(ctx context.Context, cm *corev1.ConfigMap) error {
	_, err := fenced(ctx, w, func() (*corev1.ConfigMap, error) {
		return w.client.CoreV1().ConfigMaps(w.namespace).Create(ctx, cm, metav1.CreateOptions{FieldManager: FieldManager})
	})
	if err != nil {
		return fmt.Errorf("create configmap %s: %w", cm.Name, err)
	}
	return nil
}

// UpdateConfigMap makes live hold want's data, binary data, labels and datajobs'
// annotations of the placements (with live's other labels and annotations), if the ConfigMap of that name still is live, unchanged since
// (preconditions on its UID and resourceVersion: an error for which apierrors.IsConflict
// is true means it changed).
func (w *Writer) UpdateConfigMap(ctx context.Context, live, want *corev1.ConfigMap) error {
	cm := live.DeepCopy()
	cm.Data, cm.BinaryData = maps.Clone(want.Data), nil
	if cm.Labels == nil {
		cm.Labels = map[string]string{}
	}
	maps.Copy(cm.Labels, want.Labels)
	for _, k := range placementAnnotations {
		if v, ok := want.Annotations[k]; ok {
			setAnnotation(cm, k, v)
		} else {
			delete(cm.Annotations, k)
		}
	}
	_, err := fenced(ctx, w, func() (*corev1.ConfigMap, error) {
		return w.client.CoreV1().ConfigMaps(w.namespace).Update(ctx, cm, metav1.UpdateOptions{FieldManager: FieldManager})
	})
	if err != nil {
		return fmt.Errorf("update configmap %s: %w", live.Name, err)
	}
	return nil
}
