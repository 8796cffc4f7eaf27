package kube

import (
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
//     The spec is kept encoded (encodeSpec): read it with LiveSpec;
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
		encodeSpec(o)
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

// annotationCachedSpec carries, on a CronJob in a cache of Trim only, its spec in the
// API's protobuf encoding; the spec itself is then empty. Decoded, a CronJob's spec (its
// containers, resource lists and the templates' label maps) is most of what a cached
// CronJob weighs, some 6 KiB; encoded it is a fraction of that, and the synchronizer
// reads it only where it compares it (Drifted, the adoption check), for few jobs of a
// pass. The key is never written to the apiserver: the Applier sends rendered objects
// and the apiserver's own, never a cached one.
const annotationCachedSpec = "datajobs.io/cached-spec"

// encodeSpec moves cj's spec into annotationCachedSpec (once: Trim is idempotent). A spec
// that does not encode, which a decoded one always does, stays as it is.
func encodeSpec(cj *batchv1.CronJob) {
	if _, done := cj.Annotations[annotationCachedSpec]; done {
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
// from a cache of Trim, cj.Spec otherwise. Every reader of a cached CronJob's spec goes
// through it.
func LiveSpec(cj *batchv1.CronJob) batchv1.CronJobSpec {
	raw, ok := cj.Annotations[annotationCachedSpec]
	if !ok {
		return cj.Spec
	}
	var spec batchv1.CronJobSpec
	if err := spec.Unmarshal([]byte(raw)); err != nil {
		panic("kube: decode a cached cronjob spec: " + err.Error()) // encodeSpec wrote it
	}
	return spec
}
