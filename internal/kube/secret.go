package kube

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
)

// SecretApplier writes the teams' OAuth Secrets (TeamOAuthSecret) in its Writer's
// namespace (Writer.Secrets): every write is made as field manager FieldManager, after the
// Writer's fence allowed it, and is conditioned on what the caller saw, as CronJobs are: a
// create takes over nothing, an update or delete carries the UID and resourceVersion of
// the Secret the caller planned from.
type SecretApplier struct {
	w *Writer
}

func (a *SecretApplier) secrets() typedcorev1.SecretInterface {
	return a.w.client.CoreV1().Secrets(a.w.namespace)
}

// Create creates s. A Secret of that name already there (of any owner) fails it with an
// error for which apierrors.IsAlreadyExists is true, and nothing is written.
func (a *SecretApplier) Create(ctx context.Context, s *corev1.Secret) error {
	_, err := fenced(ctx, a.w, func() (*corev1.Secret, error) {
		return a.secrets().Create(ctx, s, metav1.CreateOptions{FieldManager: FieldManager})
	})
	if err != nil {
		return fmt.Errorf("create secret %s: %w", s.Name, err)
	}
	return nil
}

// Update makes live hold want (its data, type and labels), if the Secret of that name
// still is live, unchanged since (preconditions on its UID and resourceVersion: an error
// for which apierrors.IsConflict is true means it changed).
func (a *SecretApplier) Update(ctx context.Context, live, want *corev1.Secret) error {
	s := want.DeepCopy()
	s.UID, s.ResourceVersion = live.UID, live.ResourceVersion
	_, err := fenced(ctx, a.w, func() (*corev1.Secret, error) {
		return a.secrets().Update(ctx, s, metav1.UpdateOptions{FieldManager: FieldManager})
	})
	if err != nil {
		return fmt.Errorf("update secret %s: %w", live.Name, err)
	}
	return nil
}

// Delete deletes live, if the Secret of that name still is that object, unchanged since
// (preconditions on its UID and resourceVersion). A missing Secret counts as deleted.
func (a *SecretApplier) Delete(ctx context.Context, live *corev1.Secret) error {
	err := fencedErr(ctx, a.w, func() error {
		return a.secrets().Delete(ctx, live.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{
			UID: &live.UID, ResourceVersion: &live.ResourceVersion,
		}})
	})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete secret %s: %w", live.Name, err)
	}
	return nil
}
