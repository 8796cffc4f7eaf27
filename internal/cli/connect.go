package cli

import (
	"context"
	"errors"

	"github.com/datajobs/datajobs/internal/kube"
	"github.com/datajobs/datajobs/internal/store"
)

// openStore opens the database of a one-shot command; the caller closes it.
func openStore(ctx context.Context, databaseURL string) (*store.Store, error) {
	if databaseURL == "" {
		return nil, errors.New("the database url is required (--database-url or DATAJOBS_DATABASE_URL)")
	}
	return store.Open(ctx, store.Config{URL: databaseURL})
}

// withStore runs fn on the database of a one-shot command, then closes it.
func withStore(ctx context.Context, databaseURL string, fn func(*store.Store) error) error {
	db, err := openStore(ctx, databaseURL)
	if err != nil {
		return err
	}
	defer db.Close()
	return fn(db)
}

// connectCluster builds the Kubernetes client of a one-shot command, named after it in
// the apiserver's logs, with the automatic throttle (none under API Priority and Fairness).
func connectCluster(ctx context.Context, kubeconfig, command string) (*kube.Cluster, error) {
	return kube.Connect(ctx, kube.ClusterConfig{Kubeconfig: kubeconfig, UserAgent: "datajobs-" + command + "/" + Version})
}
