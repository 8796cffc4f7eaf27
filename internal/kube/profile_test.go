package kube

import (
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/datajobs/datajobs/internal/job"
)

func testProfile() *job.Profile {
	return &job.Profile{
		Name:           "gpu",
		ServiceAccount: "cloud-{team}",
		NodeSelector:   map[string]string{"pool": "gpu"},
		Tolerations:    []job.Toleration{{Key: "nvidia.com/gpu", Operator: "Exists", Effect: "NoSchedule"}},
		Affinity: &job.Affinity{NodeAffinity: &job.NodeAffinity{Required: &job.NodeSelector{NodeSelectorTerms: []job.NodeSelectorTerm{{
			MatchExpressions: []job.NodeSelectorRequirement{{Key: "zone", Operator: "In", Values: []string{"a"}}},
		}}}}},
		Resources: job.ProfileResources{GPU: &job.ProfileGPU{Resource: "nvidia.com/gpu", Max: 2}},
		Env: []job.ProfileEnvVar{
			{Name: "STAGE", Value: "prod"},
			{Name: "A_CONF", ConfigMapKeyRef: &job.KeyRef{Name: "conf", Key: "k"}},
		},
		Annotations: map[string]string{"example.com/cost": "42"},
		Labels:      map[string]string{"tier": "batch"},
		Teams:       []string{"*"},
	}
}

// TestAProfileAddsItsFieldsToThePodAndToTheHash guards issue 43's rendering: everything a
// profile sets reaches the pod template, datajobs' own labels and variables stay, and the
// hash moves with any of it, so a profile change re-renders the CronJob.
func TestAProfileAddsItsFieldsToThePodAndToTheHash(t *testing.T) {
	t.Parallel()
	j, d := testJob(), testDeployment()
	_, plain := Render(j, d, testConfig())
	d.ExecutionProfile, d.Profile = "gpu", testProfile()
	cj, withProfile := Render(j, d, testConfig())
	require.NotEqual(t, plain, withProfile)

	pt := cj.Spec.JobTemplate.Spec.Template
	require.Equal(t, "cloud-finance", pt.Spec.ServiceAccountName, "the profile's template, with the team")
	require.Equal(t, map[string]string{"pool": "gpu"}, pt.Spec.NodeSelector)
	require.Equal(t, []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}, pt.Spec.Tolerations)
	require.Equal(t, "zone", pt.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchExpressions[0].Key)
	c := pt.Spec.Containers[0]
	require.Equal(t, resource.MustParse("2"), c.Resources.Limits["nvidia.com/gpu"])
	env := map[string]corev1.EnvVar{}
	for i, e := range c.Env {
		env[e.Name] = e
		if i > 0 {
			require.Less(t, c.Env[i-1].Name, e.Name, "the env stays sorted")
		}
	}
	require.Equal(t, "prod", env["STAGE"].Value)
	require.Equal(t, "conf", env["A_CONF"].ValueFrom.ConfigMapKeyRef.Name)
	require.Equal(t, "finance", env[EnvJobTeam].Value, "datajobs' own variables stay")
	require.Equal(t, "batch", pt.Labels["tier"])
	require.Equal(t, "finance", pt.Labels[LabelTeam], "datajobs' own labels stay")
	require.Equal(t, map[string]string{"example.com/cost": "42", AnnotationProfile: "gpu"}, pt.Annotations)

	changed := testProfile()
	changed.NodeSelector["pool"] = "gpu-2"
	d.Profile = changed
	_, moved := Render(j, d, testConfig())
	require.NotEqual(t, withProfile, moved, "a profile change is a new rendering")
	changed.Description, changed.Teams = "other words", []string{"finance"}
	_, same := Render(j, d, testConfig())
	require.Equal(t, moved, same, "its description and grants are not rendered")
}

// TestAHandEditOfAProfileFieldIsDrift guards drift repair of profile fields: a node
// selector or toleration removed or changed by hand differs from the rendering.
func TestAHandEditOfAProfileFieldIsDrift(t *testing.T) {
	t.Parallel()
	j, d := testJob(), testDeployment()
	d.ExecutionProfile, d.Profile = "gpu", testProfile()
	rendered, _ := Render(j, d, testConfig())
	for name, edit := range map[string]func(*corev1.PodSpec){
		"node selector changed": func(s *corev1.PodSpec) { s.NodeSelector["pool"] = "cpu" },
		"tolerations removed":   func(s *corev1.PodSpec) { s.Tolerations = nil },
		"service account":       func(s *corev1.PodSpec) { s.ServiceAccountName = "datajobs-job-other" },
	} {
		live := rendered.DeepCopy()
		edit(&live.Spec.JobTemplate.Spec.Template.Spec)
		drifted, why := Drifted(live, rendered)
		require.True(t, drifted, name)
		require.NotEmpty(t, why, name)
	}
}
