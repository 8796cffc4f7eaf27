package cli

import (
	"context"
	"errors"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/datajobs/datajobs/internal/server"
	"github.com/datajobs/datajobs/internal/stepper"
	"github.com/datajobs/datajobs/internal/synchronizer"
)

// syncFlags are the flags of `datajobs sync --once`: the part of serve's configuration
// that decides what the synchronizer writes.
type syncFlags struct {
	once, dryRun bool
	cfg          server.Config
	render       renderFlags
}

// config is the server configuration of the pass, logging as g says.
func (fl *syncFlags) config(g *globals) (server.Config, error) {
	c := fl.cfg
	c.SyncMode = server.SyncOn
	if fl.dryRun {
		c.SyncMode = server.SyncDryRun
	}
	return serverConfig(g, c, &fl.render)
}

func newSyncCommand(g *globals) *cobra.Command {
	fl := &syncFlags{}
	cmd := &cobra.Command{
		Use:   "sync --once [--dry-run]",
		Short: "Run one synchronizer pass and one pipeline stepper pass and print their plans",
		Long: "sync runs one full pass of the synchronizer against the configured database and cluster and prints,\n" +
			"per job, what it did (or, with --dry-run, what it would do): create, update, suspend, resume, repair,\n" +
			"replace, adopt, record, delete, orphan, keep, wait, hold, conflict or unchanged. Orphans (CronJobs of this\n" +
			"installation no data job knows) are kept, and the command fails, when deleting them would be a mass prune\n" +
			"(see --prune-max-fraction). Then one pass of the pipeline stepper: the scheduled pipelines' runs due,\n" +
			"the backfills' next runs, and one step of every running pipeline run, printing each node it starts\n" +
			"(with --dry-run: would start). Without --dry-run it takes the synchronizer's lease\n" +
			"first and refuses to run while a serving replica holds it.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runSync(cmd.Context(), g, fl) },
	}
	f := cmd.Flags()
	f.BoolVar(&fl.once, "once", false, "run one pass and exit")
	f.BoolVar(&fl.dryRun, "dry-run", false, "compute and print the plan, write nothing")
	addDatabaseURL(f, &fl.cfg.DatabaseURL, required)
	addKubeconfig(f, &fl.cfg.Kubeconfig)
	fl.render.register(f, "", ": <registry>/<job>:<version>")
	addMaxExecutionTimeout(f, &fl.cfg.Executions.MaxTimeout)
	addSecretsKeyFile(f, &fl.cfg.Secrets.KeyFile, "keyring file of serve: the pass also writes the teams' OAuth Secrets; without it they are left as they are")
	addGuardFlags(f, &fl.cfg.Safety, "--dry-run")
	f.StringVar(&fl.cfg.SyncTarget, "target", "default", "the execution target whose shard the pass is (its namespace and cluster, docs/targets.md)")
	return cmd
}

// runSync runs the pass the flags say and prints its report; it fails when a job failed
// or a guard refused.
func runSync(ctx context.Context, g *globals, fl *syncFlags) error {
	if !fl.once {
		return errors.New("only one pass is supported: add --once (the continuous synchronizer runs in serve)")
	}
	c, err := fl.config(g)
	if err != nil {
		return err
	}
	rep, err := server.SyncOnce(ctx, c)
	if err != nil {
		return err
	}
	printReport(g, rep, fl.dryRun)
	steps, stepErr := server.StepOnce(ctx, c)
	printSteps(g, steps, fl.dryRun)
	if stepErr != nil {
		return fmt.Errorf("pipeline stepper pass: %w", stepErr)
	}
	if len(rep.Errors) > 0 {
		return fmt.Errorf("%d of %d jobs failed", len(rep.Errors), len(rep.Plans))
	}
	if r := rep.PruneRefusal; r != nil {
		return fmt.Errorf("refused to prune %d orphaned CronJobs", r.Orphans)
	}
	if r := rep.RestoreRefusal; r != nil && !fl.dryRun {
		return fmt.Errorf("refused to sync: %d CronJobs are newer than the database", r.Newer)
	}
	return nil
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

// printSteps prints what the stepper's pass started, or would start.
func printSteps(g *globals, rep stepper.Report, dryRun bool) {
	verb := "started"
	if dryRun {
		verb = "would start"
	}
	w := tabwriter.NewWriter(g.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "\nPIPELINE\tRUN\tNODE\tEXECUTION\tRESULT")
	for _, sc := range rep.Scheduled {
		fmt.Fprintf(w, "%s/%s\t-\t-\t-\t%s the run of %s\n", sc.Team, sc.Pipeline, verb, sc.LogicalTime.UTC().Format(time.RFC3339))
	}
	for _, n := range rep.Started {
		fmt.Fprintf(w, "%s/%s\t%d\t%s\t%s\t%s\n", n.Team, n.Pipeline, n.Run, n.Node, n.Execution, verb)
	}
	_ = w.Flush()
	fmt.Fprintf(g.stdout, "\n%d pipeline nodes %s, %d scheduled runs %s\n", len(rep.Started), verb, len(rep.Scheduled), verb)
}
