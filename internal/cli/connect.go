package cli

import (
	"context"
	"errors"

	"github.com/spf13/cobra"

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

// onStore is the RunE of a one-shot command on the database: run gets the store at
// *databaseURL (read when the command runs, after its flags), closed after it.
func onStore(databaseURL *string, run func(cmd *cobra.Command, args []string, db *store.Store) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		return withStore(cmd.Context(), *databaseURL, func(db *store.Store) error { return run(cmd, args, db) })
	}
}

// connectCluster builds the Kubernetes client of a one-shot command, named after it in
// the apiserver's logs, with the automatic throttle (none under API Priority and Fairness).
func connectCluster(ctx context.Context, kubeconfig, command string) (*kube.Cluster, error) {
	return kube.Connect(ctx, kube.ClusterConfig{Kubeconfig: kubeconfig, UserAgent: "datajobs-" + command + "/" + Version})
}
