package job

import (
	"fmt"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
)

// maxProfileAnnotationsBytes is the apiserver's bound on an object's annotations
// (apimachinery's TotalAnnotationSizeLimitB).
const maxProfileAnnotationsBytes = 256 << 10

// reservedEnvPrefixes are the variables datajobs sets itself (kube.env, the job identity): a
// profile cannot replace them.
var reservedEnvPrefixes = []string{"DATA_JOB_", "VDK_", "DATAJOBS_"}

// Validate checks a profile by Kubernetes' own rules (apimachinery's validators), so that
// nothing it accepts fails in the apiserver; the error names the field.
func (p Profile) Validate() error {
	if errs := validation.IsDNS1123Label(p.Name); len(errs) > 0 {
		return kubeInvalid("name", "a DNS label (lowercase letters, digits and '-', at most 63 characters)", p.Name, errs)
	}
	if len(p.Description) > 1000 {
		return Invalid("description", "at most 1000 bytes", len(p.Description))
	}
	if p.ServiceAccount != "" {
		if !strings.Contains(p.ServiceAccount, TeamPlaceholder) {
			return Invalid("service_account", "a template naming the team's ServiceAccount, with {team} in it", quote(p.ServiceAccount))
		}
		if errs := validation.IsDNS1123Subdomain(strings.ReplaceAll(p.ServiceAccount, TeamPlaceholder, "team")); len(errs) > 0 {
			return kubeInvalid("service_account", "a ServiceAccount name (a DNS subdomain) once {team} is replaced", p.ServiceAccount, errs)
		}
	}
	if err := validateLabels("node_selector", p.NodeSelector); err != nil {
		return err
	}
	for i, t := range p.Tolerations {
		if err := t.validate(fmt.Sprintf("tolerations[%d]", i)); err != nil {
			return err
		}
	}
	if p.Affinity != nil && p.Affinity.NodeAffinity != nil {
		if err := p.Affinity.NodeAffinity.validate("affinity.nodeAffinity"); err != nil {
			return err
		}
	}
	if err := p.Resources.validate(); err != nil {
		return err
	}
	if err := validateEnv(p.Env); err != nil {
		return err
	}
	if err := validateAnnotations("annotations", p.Annotations); err != nil {
		return err
	}
	if err := validateLabels("labels", p.Labels); err != nil {
		return err
	}
	for k := range p.Labels {
		if reservedKey(k) {
			return Invalid("labels."+k, "a label datajobs does not set itself (not under datajobs.io/ or app.kubernetes.io/)", quote(k))
		}
	}
	for k := range p.Annotations {
		if reservedKey(k) {
			return Invalid("annotations."+k, "an annotation datajobs does not set itself (not under datajobs.io/ or app.kubernetes.io/)", quote(k))
		}
	}
	return validateGrants(p.Teams)
}

func reservedKey(k string) bool {
	return strings.HasPrefix(k, "datajobs.io/") || strings.HasPrefix(k, "app.kubernetes.io/")
}

func validateGrants(teams []string) error {
	for i, t := range teams {
		if t == GrantAllTeams {
			continue
		}
		if err := ValidateTeam(t); err != nil {
			return WithParam(err, fmt.Sprintf("teams[%d]", i))
		}
	}
	return nil
}

// kubeInvalid is Invalid with Kubernetes' own messages.
func kubeInvalid(field, want, value string, errs []string) *Error {
	e := Invalid(field, want, quote(value))
	e.Why += " Kubernetes says: " + strings.Join(errs, "; ") + "."
	return e
}

// validateLabels checks keys and values as metav1validation.ValidateLabels does.
func validateLabels(field string, m map[string]string) error {
	for k, v := range m {
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			return kubeInvalid(field, "label keys that are qualified names", k, errs)
		}
		if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
			return kubeInvalid(field+"."+k, "a label value", v, errs)
		}
	}
	return nil
}

// validateAnnotations checks keys and size as apimachinery's ValidateAnnotations does.
func validateAnnotations(field string, m map[string]string) error {
	size := 0
	for k, v := range m {
		if errs := validation.IsQualifiedName(strings.ToLower(k)); len(errs) > 0 {
			return kubeInvalid(field, "annotation keys that are qualified names", k, errs)
		}
		size += len(k) + len(v)
	}
	if size > maxProfileAnnotationsBytes {
		return Invalid(field, fmt.Sprintf("at most %d bytes in all", maxProfileAnnotationsBytes), size)
	}
	return nil
}

// validate checks a toleration as Kubernetes' validateTolerations does.
func (t Toleration) validate(field string) error {
	if t.Key != "" {
		if errs := validation.IsQualifiedName(t.Key); len(errs) > 0 {
			return kubeInvalid(field+".key", "a qualified name", t.Key, errs)
		}
	}
	switch t.Operator {
	case "", "Equal":
		if t.Key == "" {
			return Invalid(field+".operator", "Exists when the key is empty", quote(t.Operator))
		}
		if errs := validation.IsValidLabelValue(t.Value); len(errs) > 0 {
			return kubeInvalid(field+".value", "a label value", t.Value, errs)
		}
	case "Exists":
		if t.Value != "" {
			return Invalid(field+".value", "empty with operator Exists", quote(t.Value))
		}
	default:
		return Invalid(field+".operator", "Equal or Exists", quote(t.Operator))
	}
	switch t.Effect {
	case "", "NoSchedule", "PreferNoSchedule", "NoExecute":
	default:
		return Invalid(field+".effect", "NoSchedule, PreferNoSchedule, NoExecute or empty (all)", quote(t.Effect))
	}
	if t.TolerationSeconds != nil && t.Effect != "NoExecute" {
		return Invalid(field+".toleration_seconds", "given only with effect NoExecute", *t.TolerationSeconds)
	}
	return nil
}

// validate checks a node affinity as Kubernetes' ValidateNodeAffinity does.
func (a NodeAffinity) validate(field string) error {
	if r := a.Required; r != nil {
		f := field + ".requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms"
		if len(r.NodeSelectorTerms) == 0 {
			return Invalid(f, "at least one term", 0)
		}
		for i, term := range r.NodeSelectorTerms {
			if err := term.validate(fmt.Sprintf("%s[%d]", f, i)); err != nil {
				return err
			}
		}
	}
	for i, p := range a.Preferred {
		f := fmt.Sprintf("%s.preferredDuringSchedulingIgnoredDuringExecution[%d]", field, i)
		if p.Weight < 1 || p.Weight > 100 {
			return Invalid(f+".weight", "from 1 to 100", p.Weight)
		}
		if err := p.Preference.validate(f + ".preference"); err != nil {
			return err
		}
	}
	return nil
}

func (t NodeSelectorTerm) validate(field string) error {
	for i, r := range t.MatchExpressions {
		if err := r.validate(fmt.Sprintf("%s.matchExpressions[%d]", field, i)); err != nil {
			return err
		}
	}
	for i, r := range t.MatchFields {
		f := fmt.Sprintf("%s.matchFields[%d]", field, i)
		if r.Key != "metadata.name" {
			return Invalid(f+".key", "metadata.name (the one field Kubernetes supports)", quote(r.Key))
		}
		if (r.Operator != "In" && r.Operator != "NotIn") || len(r.Values) != 1 {
			return Invalid(f, "operator In or NotIn with exactly one value", quote(r.Operator))
		}
	}
	return nil
}

func (r NodeSelectorRequirement) validate(field string) error {
	if errs := validation.IsQualifiedName(r.Key); len(errs) > 0 {
		return kubeInvalid(field+".key", "a label key (a qualified name)", r.Key, errs)
	}
	switch r.Operator {
	case "In", "NotIn":
		if len(r.Values) == 0 {
			return Invalid(field+".values", "at least one value with operator "+r.Operator, 0)
		}
	case "Exists", "DoesNotExist":
		if len(r.Values) > 0 {
			return Invalid(field+".values", "empty with operator "+r.Operator, len(r.Values))
		}
	case "Gt", "Lt":
		if len(r.Values) != 1 {
			return Invalid(field+".values", "exactly one integer with operator "+r.Operator, len(r.Values))
		}
		if _, err := strconv.ParseInt(r.Values[0], 10, 64); err != nil {
			return Invalid(field+".values[0]", "an integer with operator "+r.Operator, quote(r.Values[0]))
		}
	default:
		return Invalid(field+".operator", "In, NotIn, Exists, DoesNotExist, Gt or Lt", quote(r.Operator))
	}
	for i, v := range r.Values {
		if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
			return kubeInvalid(fmt.Sprintf("%s.values[%d]", field, i), "a label value", v, errs)
		}
	}
	return nil
}

func (r ProfileResources) validate() error {
	for _, q := range []struct{ field, v string }{{"resources.max_cpu", r.MaxCPU}, {"resources.max_memory", r.MaxMemory}} {
		if q.v == "" {
			continue
		}
		if v, err := resource.ParseQuantity(q.v); err != nil || v.Sign() <= 0 {
			return Invalid(q.field, `a positive Kubernetes quantity, such as "4" or "16Gi"`, quote(q.v))
		}
	}
	if g := r.GPU; g != nil {
		// An extended resource: a qualified name with a domain, outside kubernetes.io.
		errs := validation.IsQualifiedName(g.Resource)
		if len(errs) == 0 && (!strings.Contains(g.Resource, "/") || strings.Contains(strings.SplitN(g.Resource, "/", 2)[0], "kubernetes.io")) {
			errs = []string{"an extended resource has a domain prefix outside kubernetes.io"}
		}
		if len(errs) > 0 {
			return kubeInvalid("resources.gpu.resource", `an extended resource name, such as "nvidia.com/gpu"`, g.Resource, errs)
		}
		if g.Max < 1 || g.Max > 64 {
			return Invalid("resources.gpu.max", "from 1 to 64", g.Max)
		}
	}
	return nil
}

// CapResources returns the first of the deployment's resources above the profile's
// maxima, as an Invalid error naming the field; nil when none is.
func (r ProfileResources) CapResources(res Resources) error {
	caps := []struct {
		max, key string
		cpu      bool
		names    [2]string
		values   [2]int64
	}{
		{r.MaxCPU, "max_cpu", true, [2]string{"resources.cpu_request", "resources.cpu_limit"}, [2]int64{res.CPURequestMillis, res.CPULimitMillis}},
		{r.MaxMemory, "max_memory", false, [2]string{"resources.memory_request", "resources.memory_limit"}, [2]int64{res.MemoryRequestBytes, res.MemoryLimitBytes}},
	}
	for _, c := range caps {
		if c.max == "" {
			continue
		}
		q := resource.MustParse(c.max)
		limit := q.Value()
		if c.cpu {
			limit = q.MilliValue()
		}
		for i, v := range c.values {
			if v > limit {
				return Invalid(c.names[i], "at most "+c.max+" (the execution profile's "+c.key+")", formatQuantity(v, c.cpu))
			}
		}
	}
	return nil
}

// validateEnv checks names (Kubernetes' IsEnvVarName), one source each and the names of
// the ConfigMaps, Secrets and keys they read.
func validateEnv(env []ProfileEnvVar) error {
	seen := map[string]bool{}
	for i, e := range env {
		f := fmt.Sprintf("env[%d]", i)
		if errs := validation.IsEnvVarName(e.Name); len(errs) > 0 {
			return kubeInvalid(f+".name", "an environment variable name", e.Name, errs)
		}
		if seen[e.Name] {
			return Invalid(f+".name", "given once", quote(e.Name))
		}
		seen[e.Name] = true
		if e.Name == "PYTHONUNBUFFERED" || hasAnyPrefix(e.Name, reservedEnvPrefixes) {
			return Invalid(f+".name", "a variable datajobs does not set itself (not DATA_JOB_*, VDK_*, DATAJOBS_* or PYTHONUNBUFFERED)", quote(e.Name))
		}
		sources := 0
		for _, r := range []struct {
			field string
			ref   *KeyRef
		}{{".config_map_key_ref", e.ConfigMapKeyRef}, {".secret_key_ref", e.SecretKeyRef}} {
			if r.ref == nil {
				continue
			}
			sources++
			if errs := validation.IsDNS1123Subdomain(r.ref.Name); len(errs) > 0 {
				return kubeInvalid(f+r.field+".name", "a ConfigMap or Secret name", r.ref.Name, errs)
			}
			if errs := validation.IsConfigMapKey(r.ref.Key); len(errs) > 0 {
				return kubeInvalid(f+r.field+".key", "a key", r.ref.Key, errs)
			}
		}
		if sources > 1 || (sources == 1 && e.Value != "") {
			return Invalid(f, "one of value, config_map_key_ref and secret_key_ref", "several")
		}
	}
	return nil
}

func hasAnyPrefix(s string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}
