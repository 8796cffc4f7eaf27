package kube

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// LogReader reads the logs of executions' pods through the apiserver (pods/log), never
// following a running pod: a read returns what the container has printed so far, within
// a time limit, keeping at most the last MaxBytes.
type LogReader struct {
	client    kubernetes.Interface
	namespace string
	cfg       LogConfig
}

// LogConfig bounds a log read.
type LogConfig struct {
	// MaxBytes is how much of the end of a log a read keeps (default 1 MiB).
	MaxBytes int64
	// ReadLimitBytes stops reading a log after that many bytes from its start, whatever
	// is kept (default 64 MiB): a read never streams without end.
	ReadLimitBytes int64
	// Timeout bounds one read (default 10s).
	Timeout time.Duration
}

// NewLogReader returns a reader of the pods of namespace.
func NewLogReader(client kubernetes.Interface, namespace string, cfg LogConfig) *LogReader {
	cfg.MaxBytes = cmp.Or(cfg.MaxBytes, 1<<20)
	cfg.ReadLimitBytes = cmp.Or(cfg.ReadLimitBytes, 64<<20)
	cfg.Timeout = cmp.Or(cfg.Timeout, 10*time.Second)
	return &LogReader{client: client, namespace: namespace, cfg: cfg}
}

// ErrPodGone is PodLog's answer for a pod that is gone: its log went with it.
var ErrPodGone = errors.New("the pod is gone")

// ExecutionLog returns the log of the latest pod of the Job named id (its last tailLines
// lines when tailLines > 0); found is false when the Job has no pod (yet, or any more):
// a log that is not there is not an empty one.
func (r *LogReader) ExecutionLog(ctx context.Context, id string, tailLines int) (text string, found bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, r.cfg.Timeout)
	defer cancel()
	pods, err := r.client.CoreV1().Pods(r.namespace).List(ctx, metav1.ListOptions{LabelSelector: LabelJobName + "=" + id})
	if err != nil {
		return "", false, fmt.Errorf("list pods of execution %s: %w", id, err)
	}
	ptrs := make([]*corev1.Pod, 0, len(pods.Items))
	for i := range pods.Items {
		ptrs = append(ptrs, &pods.Items[i])
	}
	p := LatestPod(ptrs)
	if p == nil {
		return "", false, nil
	}
	text, _, err = r.PodLog(ctx, p, tailLines, r.cfg.MaxBytes)
	if errors.Is(err, ErrPodGone) {
		return "", false, nil
	}
	return text, err == nil, err
}

// PodLog reads the log of the pod's main container: the last keep bytes of it (the last
// tailLines lines when tailLines > 0), read through PodText. truncated tells that the log
// was longer. A pod whose container never started has an empty log; one that is gone,
// ErrPodGone.
func (r *LogReader) PodLog(ctx context.Context, p *corev1.Pod, tailLines int, keep int64) (text string, truncated bool, err error) {
	c := mainContainer(p)
	if c == nil {
		return "", false, nil
	}
	ctx, cancel := context.WithTimeout(ctx, r.cfg.Timeout)
	defer cancel()
	opts := &corev1.PodLogOptions{Container: c.Name, LimitBytes: &r.cfg.ReadLimitBytes}
	if tailLines > 0 {
		n := int64(tailLines)
		opts.TailLines = &n
	}
	stream, err := r.client.CoreV1().Pods(p.Namespace).GetLogs(p.Name, opts).Stream(ctx)
	if apierrors.IsNotFound(err) {
		return "", false, ErrPodGone
	}
	if apierrors.IsBadRequest(err) && !ran(p) {
		return "", false, nil // not started yet (no node, waiting container): nothing printed
	}
	if err != nil {
		return "", false, fmt.Errorf("read log of pod %s: %w", p.Name, err)
	}
	defer stream.Close()
	ring := &tailBuffer{keep: int(keep)}
	if _, err := io.Copy(ring, stream); err != nil && !errors.Is(err, io.EOF) {
		return "", false, fmt.Errorf("read log of pod %s: %w", p.Name, err)
	}
	return PodText(string(ring.buf), int(keep), KeepTail), ring.dropped, nil
}

// tailBuffer keeps the last keep bytes written to it.
type tailBuffer struct {
	keep    int
	buf     []byte
	dropped bool
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	n := len(p)
	b.buf = append(b.buf, p...)
	if over := len(b.buf) - b.keep; over > 0 {
		b.buf = append(b.buf[:0], b.buf[over:]...)
		b.dropped = true
	}
	return n, nil
}
