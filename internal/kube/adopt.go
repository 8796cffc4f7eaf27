package kube

import (
	"encoding/json"
	"maps"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/datajobs/datajobs/internal/job"
)

// renderAdopted renders a deployment imported from a CronJob datajobs did not create: the
// imported spec stays as it was, with only what the deployment controls set on it (the
// schedule, suspend, and the job container's image tag and resources where they differ
// from the imported ones), and our labels and annotations on the CronJob itself. A freshly
// imported job therefore renders to its live spec: adopting it changes only metadata.
func renderAdopted(j job.Job, d job.Deployment, cfg RenderConfig) (*batchv1.CronJob, bool) {
	var spec batchv1.CronJobSpec
	if err := json.Unmarshal(d.Adopted.Spec, &spec); err != nil {
		return nil, false
	}
	annotations := map[string]string{
		AnnotationJobVersion:    d.JobVersion,
		AnnotationPythonVersion: d.PythonVersion,
		AnnotationVDKVersion:    d.VDKVersion,
		AnnotationDeployedBy:    d.DeployedBy,
	}
	spec.Schedule = d.Schedule
	if d.Schedule == "" {
		spec.Schedule = NeverSchedule
		annotations[AnnotationUnscheduled] = "true"
	}
	spec.Suspend = new(!d.Enabled)
	applyPolicy(&spec, d.Policy)
	if c := jobContainer(&spec.JobTemplate.Spec.Template.Spec, j.Name); c != nil {
		c.Image = withTag(c.Image, d.JobVersion)
		setQuantity(&c.Resources.Requests, corev1.ResourceCPU, d.Resources.CPURequestMillis, cpu)
		setQuantity(&c.Resources.Limits, corev1.ResourceCPU, d.Resources.CPULimitMillis, cpu)
		setQuantity(&c.Resources.Requests, corev1.ResourceMemory, d.Resources.MemoryRequestBytes, memory)
		setQuantity(&c.Resources.Limits, corev1.ResourceMemory, d.Resources.MemoryLimitBytes, memory)
	}
	return &batchv1.CronJob{
		TypeMeta: metav1.TypeMeta{APIVersion: "batch/v1", Kind: "CronJob"},
		ObjectMeta: metav1.ObjectMeta{
			Name:        j.Name,
			Namespace:   cfg.Namespace,
			Labels:      labelsOf(j, cfg),
			Annotations: maps.Clone(annotations),
		},
		Spec: spec,
	}, true
}

// jobContainer is the container that runs the job: the one named after it (as VDK names
// it), else the first.
func jobContainer(pod *corev1.PodSpec, name string) *corev1.Container {
	for i := range pod.Containers {
		if pod.Containers[i].Name == name {
			return &pod.Containers[i]
		}
	}
	if len(pod.Containers) > 0 {
		return &pod.Containers[0]
	}
	return nil
}

// withTag returns image with its tag set to tag, unchanged if it already has it.
func withTag(image, tag string) string {
	if tag == "" {
		return image
	}
	repo := image
	if i := strings.LastIndex(image, ":"); i > strings.LastIndex(image, "/") {
		repo = image[:i]
	}
	if at := strings.Index(repo, "@"); at >= 0 {
		repo = repo[:at]
	}
	if repo+":"+tag == image {
		return image
	}
	return repo + ":" + tag
}

// setQuantity sets list[name] to v (in the apiserver's canonical form) when v is given
// and differs from what is there; an equal value is left as written.
func setQuantity(list *corev1.ResourceList, name corev1.ResourceName, v int64, build func(int64) resource.Quantity) {
	if v == 0 {
		return
	}
	if cur, ok := (*list)[name]; ok {
		if (name == corev1.ResourceCPU && cur.MilliValue() == v) || (name != corev1.ResourceCPU && cur.Value() == v) {
			return
		}
	}
	if *list == nil {
		*list = corev1.ResourceList{}
	}
	(*list)[name] = build(v)
}
