package kube

import (
	"maps"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/datajobs/datajobs/internal/job"
)

// AnnotationProfile names the execution profile a CronJob's pods run with
// (docs/profiles.md), on the CronJob and its pod template.
const AnnotationProfile = "datajobs.io/execution-profile"

// serviceAccountOf is the ServiceAccount of job j's pods: its team's, named by the
// profile's template or the configured one (RenderConfig.JobServiceAccountTemplate).
func serviceAccountOf(j job.Job, d job.Deployment, cfg RenderConfig) string {
	var p job.Profile
	if d.Profile != nil {
		p = *d.Profile
	}
	return p.ServiceAccountOf(j.Team, cfg.JobServiceAccountTemplate)
}

// withProfile adds what the deployment's execution profile adds to the pod of its runs:
// node selector, tolerations, node affinity, environment, a GPU limit, and labels and
// annotations on the pod template. All of it is part of the rendering and of its hash, so
// a profile change re-renders every CronJob that uses it, and a hand edit of any of it
// is drift.
func withProfile(tmpl *corev1.PodTemplateSpec, d job.Deployment) {
	p := d.Profile
	if p == nil {
		return
	}
	spec := &tmpl.Spec
	if len(p.NodeSelector) > 0 {
		spec.NodeSelector = maps.Clone(p.NodeSelector)
	}
	for _, t := range p.Tolerations {
		spec.Tolerations = append(spec.Tolerations, corev1.Toleration{
			Key: t.Key, Operator: corev1.TolerationOperator(t.Operator), Value: t.Value,
			Effect: corev1.TaintEffect(t.Effect), TolerationSeconds: t.TolerationSeconds,
		})
	}
	if p.Affinity != nil && p.Affinity.NodeAffinity != nil {
		spec.Affinity = &corev1.Affinity{NodeAffinity: nodeAffinity(*p.Affinity.NodeAffinity)}
	}
	c := &spec.Containers[0]
	for _, e := range p.Env {
		v := corev1.EnvVar{Name: e.Name, Value: e.Value}
		switch {
		case e.ConfigMapKeyRef != nil:
			v.ValueFrom = &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: e.ConfigMapKeyRef.Name}, Key: e.ConfigMapKeyRef.Key,
			}}
		case e.SecretKeyRef != nil:
			v.ValueFrom = &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: e.SecretKeyRef.Name}, Key: e.SecretKeyRef.Key,
			}}
		}
		c.Env = append(c.Env, v)
	}
	sortEnv(c.Env)
	if g := p.Resources.GPU; g != nil {
		c.Resources.Limits[corev1.ResourceName(g.Resource)] = canonical(resource.NewQuantity(g.Max, resource.DecimalSI))
	}
	if len(p.Labels) > 0 {
		labels := maps.Clone(p.Labels)
		maps.Copy(labels, tmpl.Labels) // datajobs' own labels win (the API refuses them anyway)
		tmpl.Labels = labels
	}
	annotations := maps.Clone(p.Annotations)
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[AnnotationProfile] = p.Name
	tmpl.Annotations = annotations
}

func nodeAffinity(a job.NodeAffinity) *corev1.NodeAffinity {
	out := &corev1.NodeAffinity{}
	if a.Required != nil {
		out.RequiredDuringSchedulingIgnoredDuringExecution = &corev1.NodeSelector{}
		for _, t := range a.Required.NodeSelectorTerms {
			out.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms = append(
				out.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms, nodeSelectorTerm(t))
		}
	}
	for _, p := range a.Preferred {
		out.PreferredDuringSchedulingIgnoredDuringExecution = append(out.PreferredDuringSchedulingIgnoredDuringExecution,
			corev1.PreferredSchedulingTerm{Weight: p.Weight, Preference: nodeSelectorTerm(p.Preference)})
	}
	return out
}

func nodeSelectorTerm(t job.NodeSelectorTerm) corev1.NodeSelectorTerm {
	conv := func(rs []job.NodeSelectorRequirement) []corev1.NodeSelectorRequirement {
		var out []corev1.NodeSelectorRequirement
		for _, r := range rs {
			out = append(out, corev1.NodeSelectorRequirement{Key: r.Key, Operator: corev1.NodeSelectorOperator(r.Operator), Values: r.Values})
		}
		return out
	}
	return corev1.NodeSelectorTerm{MatchExpressions: conv(t.MatchExpressions), MatchFields: conv(t.MatchFields)}
}
