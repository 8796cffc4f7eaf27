package devenv_test

import (
	"context"
	"io"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/datajobs/datajobs/internal/devenv"
)

// podLog reads the pod's log through the apiserver's pods/log, as kubectl logs does.
func podLog(ctx context.Context, cs kubernetes.Interface, pod string, tail int64) (string, error) {
	opts := &corev1.PodLogOptions{}
	if tail > 0 {
		opts.TailLines = &tail
	}
	r, err := cs.CoreV1().Pods("default").GetLogs(pod, opts).Stream(ctx)
	if err != nil {
		return "", err
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	return string(b), err
}

func TestKwokServesPodLogsThroughTheAPIServer(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dir := stateDir(t)
	env := start(t, devenv.Config{StateDir: dir, Kubernetes: true, Controllers: true})
	rc, err := env.RestConfig()
	require.NoError(t, err)
	cs := clientset(t, env)

	pod := func(name string) *corev1.Pod {
		p, err := cs.CoreV1().Pods("default").Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{devenv.KwokHandsOffAnnotation: devenv.KwokHandsOffValue}},
			Spec: corev1.PodSpec{
				NodeName: devenv.FakeNodeName, RestartPolicy: corev1.RestartPolicyNever,
				Containers: []corev1.Container{{Name: "main", Image: "registry.example/printer:1"}},
			},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		return p
	}

	// A pod with a Logs object prints its file; more lines written show up on the next read.
	printer := pod("printer")
	file := filepath.Join(t.TempDir(), "printer.log")
	require.NoError(t, devenv.WriteCRILog(file, time.Now(), "first line", "second line"))
	require.NoError(t, devenv.ServePodLog(ctx, rc, printer, file))
	var got string
	require.Eventually(t, func() bool {
		got, err = podLog(ctx, cs, "printer", 0)
		return err == nil && got == "first line\nsecond line\n"
	}, 30*time.Second, 50*time.Millisecond, "last read: %q, %v", got, err)
	require.NoError(t, devenv.WriteCRILog(file, time.Now(), "first line", "second line", "third line"))
	got, err = podLog(ctx, cs, "printer", 2)
	require.NoError(t, err)
	require.Equal(t, "second line\nthird line\n", got, "tailLines is kwok's to honour, as a kubelet's")

	// Any other pod of the fake node prints the default line.
	pod("quiet")
	require.Eventually(t, func() bool {
		got, err = podLog(ctx, cs, "quiet", 0)
		return err == nil
	}, 30*time.Second, 50*time.Millisecond, "last read: %v", err)
	require.Equal(t, devenv.DefaultPodLogLine+"\n", got)

	// Started again on the same state (datajobs dev): new ports, and the kept Node points
	// at the new kwok.
	require.NoError(t, env.Stop())
	again := start(t, devenv.Config{StateDir: dir, Kubernetes: true, Controllers: true})
	cs = clientset(t, again)
	require.Eventually(t, func() bool {
		got, err = podLog(ctx, cs, "printer", 0)
		return err == nil && got == "first line\nsecond line\nthird line\n"
	}, 30*time.Second, 50*time.Millisecond, "last read: %q, %v", got, err)
}
