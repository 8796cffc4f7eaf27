package ui

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/datajobs/datajobs/internal/job"
)

// profileFacts says what a deployment's execution profile adds to its pods (issue 43),
// one line a kind, in the profile's own words: a reader of the job page sees why its pods
// run where and as whom they do without the admin-only profile API.
func profileFacts(p *job.Profile) []string {
	if p == nil {
		return nil
	}
	var out []string
	add := func(format string, args ...any) { out = append(out, fmt.Sprintf(format, args...)) }
	if p.ServiceAccount != "" {
		add("ServiceAccount %s", p.ServiceAccount)
	} else {
		add("the team's ServiceAccount")
	}
	if len(p.NodeSelector) > 0 {
		add("node selector %s", pairs(p.NodeSelector))
	}
	for _, t := range p.Tolerations {
		words := slices.DeleteFunc([]string{t.Key, t.Operator, t.Value, t.Effect}, func(w string) bool { return w == "" })
		add("toleration %s", strings.Join(words, " "))
	}
	if p.Affinity != nil && p.Affinity.NodeAffinity != nil {
		add("node affinity")
	}
	if g := p.Resources.GPU; g != nil {
		add("GPU %s up to %d", g.Resource, g.Max)
	}
	if len(p.Env) > 0 {
		names := make([]string, len(p.Env))
		for i, e := range p.Env {
			names[i] = e.Name
		}
		add("environment %s", strings.Join(names, ", "))
	}
	if len(p.Labels) > 0 {
		add("labels %s", pairs(p.Labels))
	}
	if len(p.Annotations) > 0 {
		add("annotations %s", strings.Join(slices.Sorted(maps.Keys(p.Annotations)), ", "))
	}
	return out
}

// pairs writes m as k=v, sorted by key.
func pairs(m map[string]string) string {
	keys := slices.Sorted(maps.Keys(m))
	for i, k := range keys {
		keys[i] = k + "=" + m[k]
	}
	return strings.Join(keys, ", ")
}
