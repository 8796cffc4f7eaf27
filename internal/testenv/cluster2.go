package testenv

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/datajobs/datajobs/internal/devenv"
)

// secondCluster is the binary's second Kubernetes control plane (etcd and kube-apiserver,
// on loopback), started by the first test that asks for one and stopped after the tests.
var secondCluster struct {
	once sync.Once
	env  *devenv.Env
	dir  string
	err  error
}

// SecondCluster returns a second Kubernetes cluster beside the environment's, for an
// execution target in another cluster (issue 44): its own etcd and kube-apiserver, no
// controllers and no node (the CronJobs a shard keeps there are objects only). Its
// APIServer can be stopped and started again to simulate an outage of that cluster alone.
func SecondCluster(t testing.TB) *devenv.Env {
	t.Helper()
	getKube(t)
	c := &secondCluster
	c.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		root, err := devenv.RepoRoot()
		if err != nil {
			c.err = err
			return
		}
		cfg := devenv.Config{Kubernetes: true, Fast: true, NoPostgres: true}
		if cfg.BinDir, c.err = devenv.EnsureBinaries(ctx, root, os.Stderr); c.err != nil {
			return
		}
		if c.dir, c.err = os.MkdirTemp("", "datajobs-cluster2-"); c.err != nil {
			return
		}
		cfg.StateDir = c.dir
		c.env, c.err = devenv.Start(ctx, cfg)
	})
	if c.err != nil {
		t.Fatalf("testenv: start the second cluster (logs in %s/logs): %v", c.dir, c.err)
	}
	return c.env
}

// stopSecondCluster stops the second cluster, if a test started one.
func stopSecondCluster() error {
	c := &secondCluster
	if c.env == nil {
		return nil
	}
	if err := c.env.Stop(); err != nil {
		return fmt.Errorf("stop the second cluster: %w", err)
	}
	return os.RemoveAll(c.dir)
}
