package testenv

import (
	"context"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/datajobs/datajobs/internal/store"
)

// ServiceClientset is a Kubernetes client for the admin user at the service's fallback
// client rate limits (--kube-qps 50, --kube-burst 100 without API Priority and Fairness),
// not client-go's 5/10, which would pace a synchronizer's changes at 200 ms each.
func ServiceClientset(t testing.TB) kubernetes.Interface {
	t.Helper()
	rc := RestConfig(t)
	rc.QPS, rc.Burst = 50, 100
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	return cs
}

// SyncEpoch takes the synchronizer's lease on db for an hour and returns its epoch, the
// term a test's synchronizer runs under.
func SyncEpoch(t testing.TB, db *store.Store) int64 {
	t.Helper()
	epoch, ok, err := db.TryAcquireLease(context.Background(), store.SyncLeaseName, "test", time.Hour)
	if err != nil || !ok {
		t.Fatalf("testenv: acquire the sync lease: held %v, %v", ok, err)
	}
	return epoch
}
