package kube

import (
	"context"

	"k8s.io/client-go/kubernetes"
)

// Writer is the one way datajobs changes objects in Kubernetes: the CronJobs of
// deployments (CronJobs), the Jobs of executions (Jobs), the teams' OAuth Secrets
// (Secrets), the job pods' ServiceAccount (EnsureJobServiceAccount) and the profiles'
// placements the admission policy reads (CreateConfigMap, UpdateConfigMap), all in one
// namespace. Every write is made as field manager FieldManager, and a fenced Writer asks
// its fence right before each request whether it may still write at all: a leader checks
// that its lease is still held, so that a deposed leader changes nothing. Reads go
// straight to the apiserver. The Appliers it hands out share its client and fence.
type Writer struct {
	client    kubernetes.Interface
	namespace string
	fence     func(context.Context) error
}

// NewWriter returns an unfenced Writer for namespace (Fenced adds the fence).
func NewWriter(client kubernetes.Interface, namespace string) *Writer {
	return &Writer{client: client, namespace: namespace}
}

// Fenced returns a copy of the Writer that calls fence right before every write and
// writes nothing when it returns an error (its error is returned, wrapped with the write).
func (w *Writer) Fenced(fence func(context.Context) error) *Writer {
	c := *w
	c.fence = fence
	return &c
}

// CronJobs returns the Writer's Applier of CronJobs.
func (w *Writer) CronJobs() *Applier { return &Applier{w: w} }

// Jobs returns the Writer's applier of the Jobs of executions.
func (w *Writer) Jobs() *JobApplier { return &JobApplier{w: w} }

// Secrets returns the Writer's applier of the teams' OAuth Secrets.
func (w *Writer) Secrets() *SecretApplier { return &SecretApplier{w: w} }

// fenced asks w's fence, then makes the write: every write of the package goes through it.
func fenced[T any](ctx context.Context, w *Writer, write func() (T, error)) (T, error) {
	if w.fence != nil {
		if err := w.fence(ctx); err != nil {
			var zero T
			return zero, err
		}
	}
	return write()
}

// fencedErr is fenced for a write that returns no object.
func fencedErr(ctx context.Context, w *Writer, write func() error) error {
	_, err := fenced(ctx, w, func() (struct{}, error) { return struct{}{}, write() })
	return err
}
