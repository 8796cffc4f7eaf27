package testenv

import (
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
)

// JobPod makes a pod of a Job in namespace ns, with labels and ServiceAccount sa (made
// if missing), as the Job controller makes a data job's pod, and sets it Running: a pod
// that a job token can be bound to. No kubelet runs it: the Job is managed by no
// controller (spec.managedBy) and the pod selects no node, so its status stays what the
// test sets, whether the environment runs controllers or not.
func JobPod(t testing.TB, kube kubernetes.Interface, ns, name, sa string, labels map[string]string) *corev1.Pod {
	t.Helper()
	ctx := t.Context()
	if _, err := kube.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create service account %s/%s: %v", ns, sa, err)
	}
	spec := corev1.PodSpec{
		RestartPolicy: corev1.RestartPolicyNever, ServiceAccountName: sa, AutomountServiceAccountToken: new(false),
		NodeSelector: map[string]string{"datajobs.io/test-node": "none"},
		Containers:   []corev1.Container{{Name: "job", Image: "registry.invalid/none:1"}},
	}
	j, err := kube.BatchV1().Jobs(ns).Create(ctx, &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec: batchv1.JobSpec{
			ManagedBy: new("datajobs.io/test"),
			Template:  corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: spec},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create job %s/%s: %v", ns, name, err)
	}
	p, err := kube.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: name + "-pod", Labels: labels,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: j.Name, UID: j.UID, Controller: new(true)}},
		},
		Spec: spec,
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create pod of job %s/%s: %v", ns, name, err)
	}
	return SetPodPhase(t, kube, p, corev1.PodRunning)
}

// SetPodPhase sets a JobPod's phase, as a kubelet would (again on a conflict: the
// scheduler writes the pod's conditions meanwhile).
func SetPodPhase(t testing.TB, kube kubernetes.Interface, p *corev1.Pod, phase corev1.PodPhase) *corev1.Pod {
	t.Helper()
	pods := kube.CoreV1().Pods(p.Namespace)
	var out *corev1.Pod
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := pods.Get(t.Context(), p.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		cur.Status.Phase = phase
		out, err = pods.UpdateStatus(t.Context(), cur, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("set pod %s/%s %s: %v", p.Namespace, p.Name, phase, err)
	}
	return out
}

// JobToken is a token of the pod's ServiceAccount bound to the pod, for audience, made
// by the apiserver's TokenRequest API: the cluster issuer's own token, as the kubelet
// projects it into the pod.
func JobToken(t testing.TB, kube kubernetes.Interface, p *corev1.Pod, audience string) string {
	t.Helper()
	tr, err := kube.CoreV1().ServiceAccounts(p.Namespace).CreateToken(t.Context(), p.Spec.ServiceAccountName, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{
			Audiences:         []string{audience},
			ExpirationSeconds: new(int64((10 * time.Minute).Seconds())),
			BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: p.Name, UID: p.UID},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("token request for pod %s/%s: %v", p.Namespace, p.Name, err)
	}
	return tr.Status.Token
}
