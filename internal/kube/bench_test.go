package kube

import (
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/client-go/kubernetes"

	"github.com/datajobs/datajobs/internal/testenv"
)

// go test -run '^$' -bench . -benchmem ./internal/kube/
func BenchmarkRender(b *testing.B) {
	j, d, cfg := testJob(), testDeployment(), testConfig()
	for b.Loop() {
		Render(j, d, cfg)
	}
}

func BenchmarkDrifted(b *testing.B) {
	rendered, _ := Render(testJob(), testDeployment(), testConfig())
	live := asStored(rendered)
	for b.Loop() {
		if drift, reason := Drifted(live, rendered); drift {
			b.Fatal(reason)
		}
	}
}

// BenchmarkApplyUnchanged is the cost of a server-side apply that changes nothing
// (one round trip to a local apiserver, no write to etcd).
func BenchmarkApplyUnchanged(b *testing.B) {
	ns := testenv.Namespace(b)
	rc := testenv.RestConfig(b)
	rc.QPS, rc.Burst = 1000, 1000 // client-go's default 5 QPS would be measured instead
	cs, err := kubernetes.NewForConfig(rc)
	require.NoError(b, err)
	cfg := testConfig()
	cfg.Namespace = ns
	a := NewWriter(cs, ns).CronJobs()
	rendered, _ := Render(testJob(), testDeployment(), cfg)
	live, err := a.Apply(b.Context(), nil, rendered)
	require.NoError(b, err)
	for b.Loop() {
		_, err := a.Apply(b.Context(), live, rendered)
		require.NoError(b, err)
	}
}
