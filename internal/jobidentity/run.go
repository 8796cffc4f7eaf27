package jobidentity

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/datajobs/datajobs/internal/backoff"
	"github.com/datajobs/datajobs/internal/kube"
)

// Run discovers the ServiceAccount issuer, reads the installation id and watches this
// installation's job pods until ctx ends; job tokens are accepted from when both are
// there. Each step is retried with backoff, so the API serves people meanwhile. The pod
// watch is the pod lookup's cache: a token is checked against it on every request, so a
// deleted pod's token is refused as soon as the watch sees the delete, while the pod
// costs no apiserver request per token.
func (v *Verifier) Run(ctx context.Context) {
	tokens, ok := retry(ctx, v, "read the ServiceAccount issuer", v.discover)
	if !ok {
		return
	}
	v.mu.Lock()
	v.tokens = tokens
	v.mu.Unlock()
	installation, ok := retry(ctx, v, "read the installation id", v.cfg.Installation)
	if !ok {
		return
	}
	selector := labels.SelectorFromSet(labels.Set{kube.LabelManagedBy: kube.ManagedByValue, kube.LabelInstallation: installation}).String()
	factory := informers.NewSharedInformerFactoryWithOptions(v.cfg.Client, 0, informers.WithNamespace(v.cfg.Namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = selector }),
		informers.WithTransform(slimPod))
	informer := factory.Core().V1().Pods()
	lister := informer.Lister().Pods(v.cfg.Namespace)
	informer.Informer() // registers it before Start
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	defer v.watchProfileAccounts(ctx, installation)()
	if !cache.WaitForCacheSync(ctx.Done(), informer.Informer().HasSynced) {
		return
	}
	v.mu.Lock()
	v.pods = func(name string) (*corev1.Pod, bool) {
		p, err := lister.Get(name)
		return p, err == nil
	}
	v.mu.Unlock()
	<-ctx.Done()
	v.mu.Lock()
	v.pods = nil
	v.mu.Unlock()
}

// watchProfileAccounts watches this installation's ConfigMap of the execution profiles
// (kube.ProfilesConfigMapName, which the synchronizer keeps) for the ServiceAccounts of the
// profiles granted to each team, and returns its stop. It is not waited for: without it
// (a Role that may not read it, a ConfigMap not written yet) a profile's own ServiceAccount
// is refused, the others are not.
func (v *Verifier) watchProfileAccounts(ctx context.Context, installation string) func() {
	factory := informers.NewSharedInformerFactoryWithOptions(v.cfg.Client, 0, informers.WithNamespace(v.cfg.Namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.FieldSelector = kube.ProfilesConfigMapSelector().String() }))
	lister := factory.Core().V1().ConfigMaps().Lister().ConfigMaps(v.cfg.Namespace)
	factory.Start(ctx.Done())
	v.mu.Lock()
	v.accounts = func(team string) []string {
		cm, err := lister.Get(kube.ProfilesConfigMapName)
		if err != nil || cm.Labels[kube.LabelInstallation] != installation {
			return nil
		}
		return kube.TeamAccounts(cm.Data, team)
	}
	v.mu.Unlock()
	return factory.Shutdown
}

// retry calls f until it succeeds or ctx ends, logging each failure of step.
func retry[T any](ctx context.Context, v *Verifier, step string, f func(context.Context) (T, error)) (T, bool) {
	b := backoff.New(500*time.Millisecond, 30*time.Second)
	for {
		t, err := f(ctx)
		if err == nil {
			return t, true
		}
		if ctx.Err() != nil {
			return t, false
		}
		v.cfg.Logger.WarnContext(ctx, "job_identity_not_ready", "step", step, "error", err, "retry_in", b.Next(),
			"detail", "job tokens are refused until it succeeds")
		if !b.Wait(ctx) {
			return t, false
		}
	}
}

// slimPod keeps of a pod only what jobOfPod reads, so that the cache of every job pod
// stays small.
func slimPod(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: p.Name, Namespace: p.Namespace, UID: p.UID, Labels: p.Labels,
			OwnerReferences: p.OwnerReferences, ResourceVersion: p.ResourceVersion,
			DeletionTimestamp: p.DeletionTimestamp,
		},
		Status: corev1.PodStatus{Phase: p.Status.Phase},
	}, nil
}
