package kube

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
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

// ExecutionLog returns the log of the pods of the Job named id, every attempt's
// (AttemptsLog; its last tailLines lines when tailLines > 0); found is false when the Job
// has no pod (yet, or any more): a log that is not there is not an empty one.
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
	if len(ptrs) == 0 {
		return "", false, nil
	}
	text, _, err = r.AttemptsLog(ctx, Attempts(ptrs), tailLines, r.cfg.MaxBytes)
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

// Attempts are an execution's pods in the order they ran, oldest first: with restartPolicy
// Never each retry is a new pod, so one pod is one attempt (VDK_ATTEMPT_ID names it).
func Attempts(pods []*corev1.Pod) []*corev1.Pod {
	out := slices.Clone(pods)
	slices.SortFunc(out, func(a, b *corev1.Pod) int {
		return cmp.Or(a.CreationTimestamp.Compare(b.CreationTimestamp.Time), cmp.Compare(a.Name, b.Name))
	})
	return out
}

// AttemptsLog reads the logs of an execution's attempts (Attempts' order) into one text,
// its last keep bytes (and its last tailLines lines when tailLines > 0). A run that was
// retried shows what every attempt printed, each under a header line naming the attempt,
// its pod and exit code; a run of one attempt is its pod's log alone, as before retries
// were kept. The last attempt's pod gone is ErrPodGone; an earlier one's is said in its
// header.
func (r *LogReader) AttemptsLog(ctx context.Context, attempts []*corev1.Pod, tailLines int, keep int64) (text string, truncated bool, err error) {
	if len(attempts) == 1 {
		return r.PodLog(ctx, attempts[0], tailLines, keep)
	}
	all := &tailBuffer{keep: int(keep)}
	for i, p := range attempts {
		text, cut, err := r.PodLog(ctx, p, tailLines, keep)
		gone := errors.Is(err, ErrPodGone)
		if (gone && i == len(attempts)-1) || (err != nil && !gone) {
			return "", false, err
		}
		fmt.Fprintf(all, "=== datajobs: attempt %d of %d, pod %s%s ===\n", i+1, len(attempts), p.Name, attemptEnd(p, gone))
		if text != "" && !strings.HasSuffix(text, "\n") {
			text += "\n"
		}
		_, _ = io.WriteString(all, text)
		truncated = truncated || cut
	}
	text = PodText(string(all.buf), int(keep), KeepTail)
	if tailLines > 0 {
		text = lastLines(text, tailLines)
	}
	return text, truncated || all.dropped, nil
}

// attemptEnd says how an attempt ended, for its header in AttemptsLog.
func attemptEnd(p *corev1.Pod, gone bool) string {
	switch t := mainTerminated(p); {
	case gone:
		return ", its log is gone with its pod"
	case t != nil:
		return fmt.Sprintf(", exit code %d", t.ExitCode)
	}
	return ""
}

// lastLines is the last n lines of text.
func lastLines(text string, n int) string {
	end := len(text)
	if strings.HasSuffix(text, "\n") {
		end--
	}
	for i := end - 1; i >= 0; i-- {
		if text[i] == '\n' {
			if n--; n == 0 {
				return text[i+1:]
			}
		}
	}
	return text
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
