package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/datajobs/datajobs/internal/importer"
)

// importFlags are the flags of `datajobs import`.
type importFlags struct {
	cfg                     importer.Config
	databaseURL, kubeconfig string
	render                  renderFlags
}

func newImportCommand(g *globals) *cobra.Command {
	fl := &importFlags{}
	cmd := &cobra.Command{
		Use:   "import --namespace NS [--selector S] [--team-from-label K] [--default-team T] [--dry-run] [--overwrite]",
		Short: "Import existing CronJobs (VDK's or hand-made) as data jobs that adopt them",
		Long: "import reads the CronJobs of a namespace that the VDK Control Service created (recognised by their\n" +
			"com.vmware.taurus/* job template labels) and those --selector matches, and stores each as a data job\n" +
			"whose deployment adopts the CronJob as it is: the synchronizer's first pass then only adds datajobs'\n" +
			"labels and annotations, never re-creating a CronJob. It prints one line per CronJob (imported, exists,\n" +
			"conflict, skipped with the reason, failed) and exits non-zero if any failed. Running it again changes\n" +
			"nothing. Give it the same --namespace, --image-registry and resource defaults as serve.\n" +
			"docs/migration.md is the runbook.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runImport(cmd.Context(), g, fl) },
	}
	f := cmd.Flags()
	cfg := &fl.cfg
	f.StringVar(&cfg.Selector, "selector", "", "label selector of CronJobs to import besides the VDK ones, e.g. 'team=payments,kind=etl'")
	f.StringVar(&cfg.TeamFromLabel, "team-from-label", "", "label (on the CronJob or its job template) that holds the team; default: the container's VDK_JOB_TEAM")
	f.StringVar(&cfg.DefaultTeam, "default-team", "", "team of CronJobs that name none (default: skip them)")
	f.BoolVar(&cfg.DryRun, "dry-run", false, "check and print everything, write nothing")
	f.BoolVar(&cfg.Overwrite, "overwrite", false, "replace jobs of the same name already in the database (default: report a conflict)")
	addDatabaseURL(f, &fl.databaseURL, required)
	addKubeconfig(f, &fl.kubeconfig)
	fl.render.register(f, " (the one serve manages)", ", as given to serve")
	addPythonFlags(f, &cfg.SupportedPythonVersions, &cfg.DefaultPythonVersion,
		"python versions serve accepts (others are imported with a note)", "python version recorded for CronJobs without a python-version annotation")
	return cmd
}

// runImport imports the CronJobs as the flags say and prints what became of each.
func runImport(ctx context.Context, g *globals, fl *importFlags) error {
	cfg := fl.cfg
	log, err := g.logger()
	if err != nil {
		return err
	}
	if cfg.Render, err = fl.render.render(); err != nil {
		return err
	}
	db, err := openStore(ctx, fl.databaseURL)
	if err != nil {
		return err
	}
	defer db.Close()
	if !cfg.DryRun {
		if _, err := db.Migrate(ctx); err != nil {
			return err
		}
	}
	cluster, err := connectCluster(ctx, fl.kubeconfig, "import")
	if err != nil {
		return err
	}
	cfg.Logger = log
	bar := newProgress(g.stdout, "importing")
	cfg.Progress = bar.update
	im, err := importer.New(cfg, db, cluster.Client)
	if err != nil {
		return err
	}
	rep, err := im.Run(ctx)
	bar.clear()
	if err != nil {
		return err
	}
	printImport(g.stdout, rep)
	if n := rep.Count(importer.ResultFailed); n > 0 {
		return fmt.Errorf("%d of %d CronJobs failed", n, len(rep.Outcomes))
	}
	return nil
}

func printImport(out io.Writer, rep importer.Report) {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "JOB\tSOURCE\tTEAM\tRESULT\tREASON")
	for _, o := range rep.Outcomes {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", o.Name, o.Source, dash(o.Team), o.Result, dash(o.Reason))
	}
	_ = w.Flush()
	counts := make([]string, 0, len(importer.Results))
	for _, r := range importer.Results {
		if n := rep.Count(r); n > 0 {
			counts = append(counts, fmt.Sprintf("%d %s", n, r))
		}
	}
	fmt.Fprintf(out, "\n%d CronJobs", len(rep.Outcomes))
	if len(counts) > 0 {
		fmt.Fprint(out, ": "+strings.Join(counts, ", "))
	}
	if rep.DryRun {
		fmt.Fprint(out, " (dry run: nothing was written)")
	}
	fmt.Fprintln(out)
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// progress is a one-line progress counter, shown only when out is a terminal (a table
// piped into a file or another program gets no control characters).
type progress struct {
	out     io.Writer
	verb    string
	shown   bool
	percent int
}

func newProgress(out io.Writer, verb string) *progress {
	f, ok := out.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return &progress{}
	}
	return &progress{out: f, verb: verb}
}

func (p *progress) update(done, total int) {
	percent := done * 100 / max(total, 1)
	if p.out == nil || (p.shown && percent == p.percent) {
		return // redraw once per percent: a terminal is slower than the import
	}
	p.shown, p.percent = true, percent
	fmt.Fprintf(p.out, "\r%s %d/%d CronJobs (%d%%)", p.verb, done, total, percent)
}

// clear erases the progress line before the table is printed.
func (p *progress) clear() {
	if p.shown {
		fmt.Fprint(p.out, "\r\033[K")
	}
}
