package kube_test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/client-go/informers"

	"github.com/datajobs/datajobs/internal/kube"
)

// An informer whose apiserver refuses connections stops as soon as it is told to.
// Before kube.Connect's watch-list wrapper, client-go's watch-list retry slept its backoff
// (up to 30 s, growing with each refusal) without looking at the stop channel, and a
// shard's term started while its target's apiserver was down ended 29 s after it decided
// to step down (e2e outage, 2026-12-06): stopping after 10 s of refusals took 6.6 s here.
func TestAnInformerOfARefusingApiserverStopsAtOnce(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close()) // nothing listens: every connection is refused
	cluster, err := kube.Connect(t.Context(), kube.ClusterConfig{Kubeconfig: kubeconfigOf(t, "https://"+addr), QPS: -1})
	require.NoError(t, err)

	ctx, cancel := context.WithCancel(t.Context())
	factory := informers.NewSharedInformerFactoryWithOptions(cluster.Client, 0, informers.WithNamespace("ns"))
	factory.Batch().V1().CronJobs().Informer()
	factory.Start(ctx.Done())
	time.Sleep(10 * time.Second) // refusals enough for the reflector's backoff to pass several seconds
	stopped := make(chan time.Duration)
	go func() {
		start := time.Now()
		cancel()
		factory.Shutdown()
		stopped <- time.Since(start)
	}()
	select {
	case took := <-stopped:
		t.Logf("the informer stopped in %s", took)
	case <-time.After(3 * time.Second):
		took := <-stopped
		t.Fatalf("the informer stopped %s after it was told to", took)
	}
}
