package kube

import (
	"slices"
	"strings"
	"unique"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Trim is the transform of every informer of the leader (the synchronizer's CronJobs, the
// execution tracker's Jobs and pods): it keeps of each object what they read and drops the
// rest before the object enters the cache, the one place that decides it. At 100,000
// CronJobs whole objects kept the leader at several GiB; what is left is a few KiB each.
//   - CronJob: the status (the synchronizer never reads it; the CronJob controller rewrites
//     it on every run) and the managedFields, unless another field manager owns a field
//     (then Drifted's last rule needs them all) — when datajobs still has fields to hand
//     over to its server-side apply manager, one marker entry says so, and the Applier reads
//     the object's managedFields from the apiserver then (ownCreated);
//     the spec of a CronJob managed by datajobs is dropped (dropSpec: the plan compares it
//     only when the CronJob's generation is not the one recorded, and then reads the object),
//     that of any other is kept encoded (encodeSpec, for the adoption of an import); read
//     either with LiveSpec. The labels' and annotations' keys and their repeated values are
//     shared among the cached objects (internMeta);
//   - Job: managedFields and the pod template (ObserveExecution reads the Job's status,
//     completions, success policy and deadline, the tracker its metadata);
//   - Pod: everything ObserveExecution and the log reader do not read (trimPod).
//
// It changes objects in place, as client-go allows for a transform, and is idempotent.
func Trim(obj any) (any, error) {
	switch o := obj.(type) {
	case *batchv1.CronJob:
		o.ManagedFields = trimManagedFields(o.ManagedFields)
		o.Status = batchv1.CronJobStatus{}
		if o.Labels[LabelManagedBy] == ManagedByValue {
			dropSpec(o)
		} else {
			encodeSpec(o)
		}
		internMeta(&o.ObjectMeta)
	case *batchv1.Job:
		o.ManagedFields = nil
		o.Spec.Template = corev1.PodTemplateSpec{}
	case *corev1.Pod:
		return trimPod(o), nil
	}
	return obj, nil
}

// trimManagedFields keeps managedFields whole when a manager other than datajobs owns a
// field of the object itself (not a subresource), and otherwise, when datajobs still has an
// Update entry to hand over, a marker of the list: each entry in its place with its
// manager, operation, subresource and API version, without its fields (the Applier renames
// datajobs' Update entry in place, by its index, without reading the object again:
// ownCreated), or nothing.
func trimManagedFields(mfs []metav1.ManagedFieldsEntry) []metav1.ManagedFieldsEntry {
	handOver := false
	for _, mf := range mfs {
		switch {
		case mf.Subresource != "":
		case mf.Manager != FieldManager:
			return mfs
		case mf.Operation == metav1.ManagedFieldsOperationUpdate:
			handOver = true
		}
	}
	if !handOver {
		return nil
	}
	marker := make([]metav1.ManagedFieldsEntry, len(mfs))
	for i, mf := range mfs {
		marker[i] = metav1.ManagedFieldsEntry{Manager: mf.Manager, Operation: mf.Operation, Subresource: mf.Subresource, APIVersion: mf.APIVersion}
	}
	return marker
}

// managedFieldsTrimmed reports whether Trim replaced the object's managedFields by its
// marker: entries without fields, which the apiserver never returns.
func managedFieldsTrimmed(mfs []metav1.ManagedFieldsEntry) bool {
	for _, mf := range mfs {
		if mf.FieldsV1 == nil {
			return true
		}
	}
	return false
}

// handOverIndex is the index of datajobs' one Update entry of the object itself in a
// marker, when datajobs has no Apply entry to merge it with: then the hand-over is a
// rename of that entry's operation.
func handOverIndex(mfs []metav1.ManagedFieldsEntry) (int, bool) {
	index := -1
	for i, mf := range mfs {
		if mf.Manager != FieldManager || mf.Subresource != "" {
			continue
		}
		if mf.Operation != metav1.ManagedFieldsOperationUpdate || index >= 0 {
			return 0, false
		}
		index = i
	}
	return index, index >= 0
}

// trimPod keeps what ObserveExecution, controlledBy and the log reader read: the metadata
// (without managedFields and annotations), each container's name, image and resources,
// and the phase, reason, message, conditions and container states of the status.
func trimPod(p *corev1.Pod) *corev1.Pod {
	out := &corev1.Pod{ObjectMeta: p.ObjectMeta}
	out.ManagedFields, out.Annotations = nil, nil
	out.Spec.Containers = make([]corev1.Container, len(p.Spec.Containers))
	for i, c := range p.Spec.Containers {
		out.Spec.Containers[i] = corev1.Container{Name: c.Name, Image: c.Image, Resources: c.Resources}
	}
	out.Status = corev1.PodStatus{
		Phase: p.Status.Phase, Reason: p.Status.Reason, Message: p.Status.Message, Conditions: p.Status.Conditions,
		ContainerStatuses: make([]corev1.ContainerStatus, len(p.Status.ContainerStatuses)),
	}
	for i, s := range p.Status.ContainerStatuses {
		out.Status.ContainerStatuses[i] = corev1.ContainerStatus{Name: s.Name, State: s.State, LastTerminationState: s.LastTerminationState}
	}
	return out
}

// annotationCachedSpec carries, on a CronJob not managed by datajobs in a cache of Trim
// only, its spec in the API's protobuf encoding; the spec itself is then empty. Decoded,
// a CronJob's spec (its containers, resource lists and the templates' label maps) is most
// of what a cached CronJob weighs, some 6 KiB; encoded it is a fraction of that, and the
// synchronizer reads it only for the adoption check of an imported CronJob. The key is
// never written to the apiserver: the Applier sends rendered objects and the apiserver's
// own, never a cached one.
const annotationCachedSpec = "datajobs.io/cached-spec"

// annotationSecretRefs marks, on a CronJob in a cache of Trim only, that its spec was
// dropped (dropSpec); its value is the names of the Secrets its pods' containers read
// (env valueFrom, envFrom), space-separated, which is all the synchronizer asks of the
// spec of a CronJob it does not compare (RefersToTeamOAuth). Like annotationCachedSpec it
// is never written to the apiserver.
const annotationSecretRefs = "datajobs.io/cached-secret-refs"

// dropSpec replaces cj's spec by annotationSecretRefs (once: Trim is idempotent). At
// 100,000 CronJobs even the encoded spec was some 110 MiB of the leader's heap, for a
// comparison that a pass makes only for a CronJob whose metadata.generation moved since
// datajobs recorded its write (an edit by hand; a write whose record was lost), which the
// synchronizer then reads from the apiserver (ActionVerify).
func dropSpec(cj *batchv1.CronJob) {
	if _, done := cj.Annotations[annotationSecretRefs]; done {
		return
	}
	if _, encoded := cj.Annotations[annotationCachedSpec]; encoded {
		return // an object Trim encoded before (not managed then) is not decoded again
	}
	if cj.Annotations == nil {
		cj.Annotations = map[string]string{}
	}
	cj.Annotations[annotationSecretRefs] = secretRefs(cj.Spec.JobTemplate.Spec.Template.Spec)
	cj.Spec = batchv1.CronJobSpec{}
}

// secretRefs is the sorted, space-separated names of the Secrets pod's containers read.
func secretRefs(pod corev1.PodSpec) string {
	var names []string
	for _, c := range append(slices.Clip(pod.InitContainers), pod.Containers...) {
		for _, e := range c.Env {
			if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
				names = append(names, e.ValueFrom.SecretKeyRef.Name)
			}
		}
		for _, e := range c.EnvFrom {
			if e.SecretRef != nil {
				names = append(names, e.SecretRef.Name)
			}
		}
	}
	slices.Sort(names)
	return strings.Join(slices.Compact(names), " ")
}

// SpecDropped reports whether cj comes from a cache of Trim that dropped its spec: a
// comparison of the spec needs the object from the apiserver.
func SpecDropped(cj *batchv1.CronJob) bool {
	_, ok := cj.Annotations[annotationSecretRefs]
	return ok
}

// encodeSpec moves cj's spec into annotationCachedSpec (once: Trim is idempotent). A spec
// that does not encode, which a decoded one always does, stays as it is.
func encodeSpec(cj *batchv1.CronJob) {
	if _, done := cj.Annotations[annotationCachedSpec]; done {
		return
	}
	if SpecDropped(cj) {
		return
	}
	b, err := cj.Spec.Marshal()
	if err != nil {
		return
	}
	if cj.Annotations == nil {
		cj.Annotations = map[string]string{}
	}
	cj.Annotations[annotationCachedSpec] = string(b)
	cj.Spec = batchv1.CronJobSpec{}
}

// LiveSpec is the spec of a live CronJob: decoded from annotationCachedSpec when cj comes
// from a cache of Trim that kept it encoded, cj.Spec when it comes from the apiserver, and
// not known (false) when the cache dropped it (SpecDropped). Every reader of a cached
// CronJob's spec goes through it.
func LiveSpec(cj *batchv1.CronJob) (batchv1.CronJobSpec, bool) {
	if SpecDropped(cj) {
		return batchv1.CronJobSpec{}, false
	}
	raw, ok := cj.Annotations[annotationCachedSpec]
	if !ok {
		return cj.Spec, true
	}
	var spec batchv1.CronJobSpec
	if err := spec.Unmarshal([]byte(raw)); err != nil {
		panic("kube: decode a cached cronjob spec: " + err.Error()) // encodeSpec wrote it
	}
	return spec, true
}

// internMeta makes the cached objects share the strings their metadata repeat: the
// namespace, every label and annotation key, and the values that many objects carry
// (managed-by, team, installation, versions, deployer: internedValue). Decoded, each
// object holds its own copy of each; at 100,000 CronJobs of some ten labels and
// annotations those copies were tens of MiB.
func internMeta(m *metav1.ObjectMeta) {
	m.Namespace = unique.Make(m.Namespace).Value()
	m.Labels = internMap(m.Labels)
	m.Annotations = internMap(m.Annotations)
}

func internMap(in map[string]string) map[string]string {
	if in == nil {
		return nil
	}
	out := make(map[string]string, len(in))
	for k, v := range in {
		k = unique.Make(k).Value()
		if internedValue[k] {
			v = unique.Make(v).Value()
		}
		out[k] = v
	}
	return out
}

// internedValue are the label and annotation keys whose values repeat across CronJobs,
// Jobs and pods (not the job's name, its UID or its hash, unique to each).
var internedValue = map[string]bool{
	LabelManagedBy: true, LabelTeam: true, LabelInstallation: true, LabelComponent: true,
	AnnotationPythonVersion: true, AnnotationVDKVersion: true, AnnotationDeployedBy: true, AnnotationJobVersion: true,
	AnnotationUnscheduled: true, annotationSecretRefs: true,
}
