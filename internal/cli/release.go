package cli

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/datajobs/datajobs/internal/importer"
	"github.com/datajobs/datajobs/internal/store"
)

func newReleaseCommand(g *globals) *cobra.Command {
	var (
		cfg                     importer.ReleaseConfig
		databaseURL, kubeconfig string
	)
	cmd := &cobra.Command{
		Use:   "release --namespace NS [--dry-run]",
		Short: "Give up every managed CronJob, leaving its spec as it is (rollback of an import)",
		Long: "release removes datajobs' labels (app.kubernetes.io/managed-by, datajobs.io/*), annotations\n" +
			"(datajobs.io/*) and field-manager entries from every CronJob datajobs manages in the namespace,\n" +
			"with an update guarded by the resourceVersion that leaves the spec byte for byte as it is, so\n" +
			"another tool can own the CronJobs again. The database keeps its rows.\n" +
			"Stop the synchronizer first (serve --sync-mode=off): a running one would adopt the CronJobs again.\n" +
			"With --database-url, release refuses to run while a synchronizer holds its lease.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log, err := g.logger()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			if databaseURL != "" {
				db, err := openStore(ctx, databaseURL)
				if err != nil {
					return err
				}
				holder, _, expires, err := db.LeaseHolder(ctx, store.SyncLeaseName)
				db.Close()
				if err != nil {
					return err
				}
				if holder != "" && time.Until(expires) > 0 {
					return fmt.Errorf("a synchronizer (%s) holds the lease until %s and would adopt the CronJobs again: run serve with --sync-mode=off first", holder, expires.Format(time.RFC3339))
				}
			}
			cluster, err := connectCluster(ctx, kubeconfig, "release")
			if err != nil {
				return err
			}
			cfg.Logger = log
			bar := newProgress(g.stdout, "releasing")
			cfg.Progress = bar.update
			rep, err := importer.Release(ctx, cluster.Client, cfg)
			bar.clear()
			if err != nil {
				return err
			}
			printRelease(g.stdout, rep)
			if n := rep.Failed(); n > 0 {
				return fmt.Errorf("%d of %d CronJobs failed", n, len(rep.CronJobs))
			}
			return nil
		},
	}
	f := cmd.Flags()
	addNamespace(f, &cfg.Namespace, "")
	f.BoolVar(&cfg.DryRun, "dry-run", false, "send every update as a server-side dry run: validate, store nothing")
	addKubeconfig(f, &kubeconfig)
	addDatabaseURL(f, &databaseURL, "; when given, refuse while a synchronizer holds its lease")
	return cmd
}

func printRelease(out io.Writer, rep importer.ReleaseReport) {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "JOB\tRESULT\tREMOVED")
	for _, c := range rep.CronJobs {
		detail := strings.Join(c.Removed, ", ")
		if c.Reason != "" {
			detail = c.Reason
		}
		fmt.Fprintf(w, "%s\t%s\t%s\n", c.Name, c.Result, dash(detail))
	}
	_ = w.Flush()
	fmt.Fprintf(out, "\n%d CronJobs: %d released", len(rep.CronJobs), len(rep.CronJobs)-rep.Failed())
	if n := rep.Failed(); n > 0 {
		fmt.Fprintf(out, ", %d failed", n)
	}
	if rep.DryRun {
		fmt.Fprint(out, " (dry run: nothing was written)")
	}
	fmt.Fprintln(out)
}
