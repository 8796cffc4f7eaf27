package kube_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/kube"
)

// The placements' data is what the chart's admission policy compares a pod's node
// selector and tolerations with (docs/profiles.md, "The admission policy"): one key per
// team, one sorted line per distinct placement, nothing for a profile that places nothing.
func TestProfilePlacementsAreTheTokensThePolicyBuildsFromAPod(t *testing.T) {
	t.Parallel()
	gpu := job.Profile{
		Name: "gpu", NodeSelector: map[string]string{"pool": "gpu", "cloud.example.com/zone": "a"}, Teams: []string{"team-a", "team-b"},
		Tolerations: []job.Toleration{
			{Key: "dedicated", Value: "gpu", Effect: "NoSchedule"}, // no operator: Equal
			{Key: "node.example.com/drain", Operator: "Exists", Effect: "NoExecute", TolerationSeconds: new(int64(30))},
		},
		Resources: job.ProfileResources{GPU: &job.ProfileGPU{Resource: "nvidia.com/gpu", Max: 1}},
	}
	data := kube.ProfilePlacements([]job.Profile{
		{Name: job.DefaultProfile, Teams: []string{job.GrantAllTeams}},
		gpu,
		{Name: "gpu-copy", NodeSelector: gpu.NodeSelector, Tolerations: gpu.Tolerations, Resources: gpu.Resources, Teams: []string{"team-a"}},
		{Name: "spot", Tolerations: []job.Toleration{{Operator: "Exists"}}, Teams: []string{job.GrantAllTeams}},
		{Name: "env-only", Env: []job.ProfileEnvVar{{Name: "A", Value: "b"}}, Teams: []string{"team-c"}},
	})
	line := "nodeSelector:cloud.example.com/zone=a nodeSelector:pool=gpu toleration:dedicated,Equal,gpu,NoSchedule, " +
		"toleration:node.example.com/drain,Exists,,NoExecute,30 toleration:nvidia.com/gpu,Exists,,NoSchedule,"
	require.Equal(t, map[string]string{
		"team-a":          line, // twice granted the same placement: one line
		"team-b":          line,
		kube.EveryTeamKey: "toleration:,Exists,,,",
	}, data)

	cm := kube.ProfilesConfigMap(kube.RenderConfig{Namespace: "jobs", Installation: "inst"}, nil)
	require.Equal(t, kube.ProfilesConfigMapName, cm.Name)
	require.Empty(t, cm.Data, "no profile places anything: every team's pod is admitted only without placement")
	require.Equal(t, "inst", cm.Labels[kube.LabelInstallation])
}

// The ServiceAccounts' data is what the -team-accounts policy admits for a team's pod: the
// names its profiles render, and for the profiles of every team their templates, which
// the policy fills in with the pod's team. Before it, the policy admitted only the
// chart's template, and a profile's own ServiceAccount was refused.
func TestProfileAccountsAreTheServiceAccountsTheProfilesRender(t *testing.T) {
	t.Parallel()
	profiles := []job.Profile{
		{Name: job.DefaultProfile, Teams: []string{job.GrantAllTeams}},
		{Name: "gpu", ServiceAccount: "gpu-{team}", Teams: []string{"team-a", "team-b"}},
		{Name: "gpu-copy", ServiceAccount: "gpu-{team}", Teams: []string{"team-a"}},
		{Name: "warehouse", ServiceAccount: "{team}-warehouse", Teams: []string{job.GrantAllTeams}},
		{Name: "plain", Teams: []string{"team-c"}},
	}
	require.Equal(t, map[string]string{
		"serviceAccounts.team-a":      "gpu-team-a", // twice granted: one line
		"serviceAccounts.team-b":      "gpu-team-b",
		"serviceAccounts.team-c":      "jobs-team-c", // the service's template
		"serviceAccounts._every-team": "jobs-{team}\n{team}-warehouse",
	}, kube.ProfileAccounts(profiles, "jobs-{team}"))

	data := kube.ProfileAccounts(profiles, "jobs-{team}")
	require.ElementsMatch(t, []string{"gpu-team-a", "jobs-team-a", "team-a-warehouse"}, kube.TeamAccounts(data, "team-a"), "as the policy reads them")
	require.ElementsMatch(t, []string{"jobs-team-x", "team-x-warehouse"}, kube.TeamAccounts(data, "team-x"))

	cm := kube.ProfilesConfigMap(kube.RenderConfig{Namespace: "jobs", Installation: "inst"}, profiles[:1])
	require.Equal(t, map[string]string{"serviceAccounts._every-team": job.DefaultServiceAccountTemplate}, cm.Data,
		"the default profile's ServiceAccount, by the default template")
}
