package devenv

import (
	"context"
	"errors"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// ErrPodFinished is SetPodStatus's answer for a pod that already succeeded or failed: a
// kubelet never moves a finished pod (kwok's stages may have finished it first).
var ErrPodFinished = errors.New("the pod has finished")

// SetPodStatus writes the phase, reason and main container state of pod p as its kubelet
// would: tests and benchmarks play the kubelet for pods that kwok leaves alone. It reads
// the pod first; a concurrent writer makes it fail with a conflict, to be retried.
func SetPodStatus(ctx context.Context, client kubernetes.Interface, p *corev1.Pod, phase corev1.PodPhase, reason string, state corev1.ContainerState) error {
	cur, err := client.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if cur.Status.Phase == corev1.PodSucceeded || cur.Status.Phase == corev1.PodFailed {
		return ErrPodFinished
	}
	now := metav1.Now()
	cur.Status.Phase, cur.Status.Reason = phase, reason
	if cur.Status.StartTime == nil {
		cur.Status.StartTime = &now
	}
	c := cur.Spec.Containers[0]
	started := state.Running != nil
	cur.Status.ContainerStatuses = []corev1.ContainerStatus{{
		Name: c.Name, Image: c.Image, State: state, Ready: started, Started: &started,
	}}
	_, err = client.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, cur, metav1.UpdateOptions{})
	return err
}
