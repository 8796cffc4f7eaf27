package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/datajobs/datajobs/internal/leader"
	"github.com/datajobs/datajobs/internal/secrets"
	"github.com/datajobs/datajobs/internal/server"
	"github.com/datajobs/datajobs/internal/store"
	"github.com/datajobs/datajobs/internal/synchronizer"
)

func newSyncCommand(g *globals) *cobra.Command {
	var (
		once, dryRun            bool
		databaseURL, kubeconfig string
		keyFile                 string
		render                  renderFlags
		safety                  server.SafetyConfig
	)
	cmd := &cobra.Command{
		Use:   "sync --once [--dry-run]",
		Short: "Run one synchronizer pass and print its plan",
		Long: "sync runs one full pass of the synchronizer against the configured database and cluster and prints,\n" +
			"per job, what it did (or, with --dry-run, what it would do): create, update, suspend, resume, repair,\n" +
			"replace, adopt, record, delete, orphan, keep, wait, hold, conflict or unchanged. Orphans (CronJobs of this\n" +
			"installation no data job knows) are kept, and the command fails, when deleting them would be a mass prune\n" +
			"(see --prune-max-fraction). Without --dry-run it takes the synchronizer's lease\n" +
			"first and refuses to run while a serving replica holds it.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !once {
				return errors.New("only one pass is supported: add --once (the continuous synchronizer runs in serve)")
			}
			log, err := g.logger()
			if err != nil {
				return err
			}
			rc, err := render.render()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			db, err := openStore(ctx, databaseURL)
			if err != nil {
				return err
			}
			defer db.Close()
			cluster, err := connectCluster(ctx, kubeconfig, "sync")
			if err != nil {
				return err
			}
			var keys *secrets.Keyring
			if keyFile != "" {
				if keys, err = secrets.LoadKeyring(keyFile); err != nil {
					return err
				}
			}
			syncer := synchronizer.New(synchronizer.Config{
				Render: rc, DryRun: dryRun, Logger: log,
				PruneMaxFraction: safety.PruneMaxFraction, AllowMassPrune: safety.AllowMassPrune, AcceptConfigChange: safety.AcceptConfigChange,
				AcceptRestore: safety.AcceptRestore, TeamOAuthKeys: keys,
			}, db, cluster.Client, nil)
			rep, err := runOnce(ctx, db, syncer, dryRun)
			if err != nil {
				return err
			}
			printReport(g, rep, dryRun)
			if len(rep.Errors) > 0 {
				return fmt.Errorf("%d of %d jobs failed", len(rep.Errors), len(rep.Plans))
			}
			if r := rep.PruneRefusal; r != nil {
				return fmt.Errorf("refused to prune %d orphaned CronJobs", r.Orphans)
			}
			if r := rep.RestoreRefusal; r != nil && !dryRun {
				return fmt.Errorf("refused to sync: %d CronJobs are newer than the database", r.Newer)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.BoolVar(&once, "once", false, "run one pass and exit")
	f.BoolVar(&dryRun, "dry-run", false, "compute and print the plan, write nothing")
	addDatabaseURL(f, &databaseURL, required)
	addKubeconfig(f, &kubeconfig)
	render.register(f, "", ": <registry>/<job>:<version>")
	addSecretsKeyFile(f, &keyFile, "keyring file of serve: the pass also writes the teams' OAuth Secrets; without it they are left as they are")
	addGuardFlags(f, &safety, "--dry-run")
	return cmd
}

// runOnce runs the pass; a pass that writes does so under the synchronizer's lease, so it
// never races a serving leader.
func runOnce(ctx context.Context, db *store.Store, syncer *synchronizer.Synchronizer, dryRun bool) (synchronizer.Report, error) {
	if dryRun {
		return syncer.RunOnce(ctx, 0)
	}
	host, _ := os.Hostname()
	identity := fmt.Sprintf("sync-once-%s-%d", host, os.Getpid())
	elector, err := leader.New(leader.Config{Name: store.SyncLeaseName, Identity: identity, LeaseDuration: leader.DefaultLeaseDuration}, db)
	if err != nil {
		return synchronizer.Report{}, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var rep synchronizer.Report
	var passErr error
	led := false
	timer := time.AfterFunc(3*time.Second, cancel)
	runErr := elector.Run(ctx, func(ctx context.Context, epoch int64) {
		timer.Stop()
		led = true
		rep, passErr = syncer.RunOnce(ctx, epoch)
		cancel()
	})
	if !led {
		holder, _, expires, err := db.LeaseHolder(context.WithoutCancel(ctx), store.SyncLeaseName)
		if err != nil {
			return rep, fmt.Errorf("could not take the synchronizer lease: %w", err)
		}
		return rep, fmt.Errorf("the synchronizer lease is held by %s until %s: stop that replica or use --dry-run", holder, expires.Format(time.RFC3339))
	}
	return rep, errors.Join(passErr, runErr)
}

func printReport(g *globals, rep synchronizer.Report, dryRun bool) {
	w := tabwriter.NewWriter(g.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "JOB\tACTION\tREASON\tRESULT")
	outcome := func(err error) string {
		switch {
		case err != nil:
			return "failed: " + err.Error()
		case dryRun:
			return "planned"
		}
		return "done"
	}
	for _, p := range rep.Plans {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", p.Name, p.Action, p.Reason, outcome(rep.Errors[p.Name]))
	}
	// The team OAuth Secrets the pass wrote (or would write), never their values.
	for _, p := range rep.TeamSecrets {
		fmt.Fprintf(w, "secret/%s\t%s\t%s\t%s\n", p.Secret, p.Action, p.Reason, outcome(p.Err))
	}
	_ = w.Flush()
	summary := rep.Summary()
	fmt.Fprintf(g.stdout, "\n%d jobs:", len(rep.Plans))
	for _, a := range synchronizer.Actions {
		if summary[a] > 0 {
			fmt.Fprintf(g.stdout, " %d %s", summary[a], a)
		}
	}
	if len(rep.Errors) > 0 {
		fmt.Fprintf(g.stdout, "; %d failed", len(rep.Errors))
	}
	if dryRun {
		fmt.Fprint(g.stdout, " (dry run: nothing was written)")
	}
	fmt.Fprintln(g.stdout)
	if r := rep.PruneRefusal; r != nil {
		fmt.Fprintf(g.stdout, "prune refused: %s\n", r.Reason)
	}
	if r := rep.RestoreRefusal; r != nil {
		fmt.Fprintf(g.stdout, "%s\n", r.Reason)
	}
}
