package kube

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
)

// Drifted reports whether a live CronJob no longer matches what Render produced, and why.
// The live object carries apiserver defaults and other people's metadata, so it is not
// compared whole. It has drifted when
//   - it carries another job UID (an older incarnation of the name: Replace it);
//   - its hash annotation is missing or differs (our desired state changed);
//   - a field Render sets differs (kubectl edit): every label, annotation and spec field
//     of rendered must be equal in live; lists must have the same length and be equal
//     element by element; fields rendered does not set (defaults) are not compared;
//   - another field manager owns a field under spec that datajobs does not own (someone
//     added a field datajobs never renders, such as a time zone or an extra env var).
//
// The deployed-by annotation is not compared: it changes without changing the hash.
// The last rule needs live's managedFields; without them it finds nothing. A live CronJob
// whose spec the cache dropped (SpecDropped) cannot be compared: the caller reads it from
// the apiserver first (the synchronizer's ActionVerify).
func Drifted(live, rendered *batchv1.CronJob) (bool, string) {
	if live == nil {
		return true, "cronjob is missing"
	}
	if got, want := live.Labels[LabelJobUID], rendered.Labels[LabelJobUID]; got != want {
		return true, fmt.Sprintf("label %s is %q, want %q", LabelJobUID, got, want)
	}
	if got, want := live.Annotations[AnnotationHash], rendered.Annotations[AnnotationHash]; got != want {
		return true, fmt.Sprintf("annotation %s is %q, want %q", AnnotationHash, got, want)
	}
	if path, ok := subset("", renderedFields(rendered), renderedFields(live)); !ok {
		return true, path + " differs"
	}
	if manager, path, ok := foreignSpecField(live); ok {
		return true, fmt.Sprintf("%s is set by field manager %q", path, manager)
	}
	return false, ""
}

// renderedFields is the part of a CronJob that Render decides, as generic JSON.
func renderedFields(cj *batchv1.CronJob) any {
	annotations := maps.Clone(cj.Annotations)
	delete(annotations, AnnotationDeployedBy)
	v := struct {
		Metadata struct {
			Labels      map[string]string `json:"labels,omitempty"`
			Annotations map[string]string `json:"annotations,omitempty"`
		} `json:"metadata"`
		Spec batchv1.CronJobSpec `json:"spec"`
	}{}
	spec, ok := LiveSpec(cj)
	if !ok {
		panic("kube: Drifted of a cached cronjob without its spec: read it from the apiserver first")
	}
	v.Spec = spec
	v.Metadata.Labels = cj.Labels
	v.Metadata.Annotations = annotations
	b, err := json.Marshal(v)
	if err != nil {
		panic("kube: marshal cronjob: " + err.Error()) // typed API objects always marshal
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		panic("kube: unmarshal cronjob: " + err.Error())
	}
	return out
}

// subset reports whether every value set in want is equal in got, and if not, the path
// of the first difference. Maps may have extra keys in got; lists must match in length.
func subset(path string, want, got any) (string, bool) {
	switch w := want.(type) {
	case nil:
		return "", true
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return path, false
		}
		for _, k := range slices.Sorted(maps.Keys(w)) {
			if p, ok := subset(join(path, k), w[k], g[k]); !ok {
				return p, false
			}
		}
		return "", true
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return path, false
		}
		for i := range w {
			if p, ok := subset(path+"["+elementKey(w[i], i)+"]", w[i], g[i]); !ok {
				return p, false
			}
		}
		return "", true
	default:
		return path, want == got
	}
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// elementKey names a list element in a path by its name when it has one (containers, env).
func elementKey(v any, i int) string {
	if m, ok := v.(map[string]any); ok {
		if name, ok := m["name"].(string); ok {
			return name
		}
	}
	return strconv.Itoa(i)
}

// foreignSpecField finds a field under spec that a manager other than datajobs owns and
// datajobs does not. Fields datajobs renders and someone changed are taken back by a forced
// apply; these are fields only a full update can remove. It compares the leaves of the
// managers' field sets (structured-merge-diff's fieldpath): a path that is only there
// because it has children (a "." entry: the map of labels, say, which a plain create or
// update records and server-side apply never owns) is not a field anyone set.
func foreignSpecField(live *batchv1.CronJob) (manager, path string, found bool) {
	ours := fieldpath.NewSet()
	for _, mf := range live.ManagedFields {
		if mf.Manager == FieldManager && mf.Subresource == "" {
			ours = ours.Union(fieldSet(mf))
		}
	}
	ours = ours.Leaves()
	for _, mf := range live.ManagedFields {
		if mf.Manager == FieldManager || mf.Subresource != "" {
			continue
		}
		// Iterate, not All: fieldpath's iterator does not stop when the loop breaks.
		fieldSet(mf).Leaves().Difference(ours).Iterate(func(p fieldpath.Path) {
			if !found && len(p) > 0 && p[0].FieldName != nil && *p[0].FieldName == "spec" {
				manager, path, found = mf.Manager, fieldsV1Path(p), true
			}
		})
		if found {
			return manager, path, true
		}
	}
	return "", "", false
}

// fieldSet is the set of fields a managedFields entry owns (empty when unreadable).
func fieldSet(mf metav1.ManagedFieldsEntry) *fieldpath.Set {
	s := fieldpath.NewSet()
	if mf.FieldsV1 != nil {
		if err := s.FromJSON(bytes.NewReader(mf.FieldsV1.GetRawBytes())); err != nil {
			return fieldpath.NewSet()
		}
	}
	return s
}

// fieldsV1Path writes a path as managedFields do (f:spec/f:jobTemplate/k:{"name":"x"}/...),
// the form a user finds with kubectl get --show-managed-fields.
func fieldsV1Path(p fieldpath.Path) string {
	parts := make([]string, len(p))
	for i, pe := range p {
		s, err := fieldpath.SerializePathElement(pe)
		if err != nil {
			s = pe.String()
		}
		parts[i] = s
	}
	return strings.Join(parts, "/")
}
