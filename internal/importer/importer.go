// Package importer moves an installation whose CronJobs were made by someone else (the
// VDK Control Service, or people by hand) under datajobs, and back. Import reads the
// CronJobs of a namespace and stores each as a data job whose deployment adopts the
// CronJob as it is, so that the synchronizer's first pass only adds datajobs' labels and
// annotations: no CronJob is re-created, no run is missed or doubled. Release undoes the
// adoption in the cluster, for a rollback. docs/migration.md is the runbook.
package importer

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"

	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/kube"
)

// Store is what the importer writes to.
type Store interface {
	ImportDeployment(ctx context.Context, in job.ImportedDeployment, opts job.ImportOptions) (job.ImportResult, error)
}

// Config configures an import.
type Config struct {
	// Render must be the render configuration of `serve` (namespace, image registry,
	// default resources): the hash recorded for each imported job is the one the
	// synchronizer computes. Render.Namespace is the namespace read (default "datajobs").
	Render kube.RenderConfig
	// Selector is a label selector of CronJobs to import besides the VDK ones (which are
	// recognised by their job template labels). Default: none, only VDK CronJobs.
	Selector string
	// TeamFromLabel names a label (on the CronJob or its job template) that holds the
	// team. Default: none; the team is then the container's VDK_JOB_TEAM, else DefaultTeam.
	TeamFromLabel string
	// DefaultTeam is the team of CronJobs that name none. Default: none (they are skipped).
	DefaultTeam string
	// SupportedPythonVersions are the versions `serve` accepts; a CronJob with another one
	// is imported anyway, with a note (default 3.9, 3.10, 3.11, 3.12, as serve).
	SupportedPythonVersions []string
	// DefaultPythonVersion is recorded for CronJobs without a python version annotation
	// (default "3.11", as serve).
	DefaultPythonVersion string
	// DryRun makes every check and write and rolls each back: nothing changes.
	DryRun bool
	// Overwrite replaces jobs of the same name already in the database (see
	// store.ImportDeployment). Default: they are reported as conflicts and left alone.
	Overwrite bool
	// Logger receives one line per CronJob (default slog.Default()).
	Logger *slog.Logger
	// Progress, if set, is called after each CronJob with the number done and the total.
	Progress func(done, total int)
}

// Result is what happened to one CronJob.
type Result string

// The results of an import, as the table prints them.
const (
	ResultImported Result = "imported" // stored (or, in a dry run, would be)
	ResultExists   Result = "exists"   // already imported from this CronJob; nothing written
	ResultConflict Result = "conflict" // another job of that name is in the database; left alone
	ResultSkipped  Result = "skipped"  // the CronJob cannot be imported as it is; Reason says why
	ResultFailed   Result = "failed"   // an error; Reason has it
)

// Results lists every result in the order of summaries.
var Results = []Result{ResultImported, ResultExists, ResultConflict, ResultSkipped, ResultFailed}

// Outcome is the result of one CronJob.
type Outcome struct {
	// Name is the CronJob's (and the job's) name.
	Name string
	// Source is "vdk" (recognised by VDK's labels) or "selected" (matched Selector).
	Source string
	Result Result
	// Team is the job's team, when it was read.
	Team string
	// JobUID is the UID of the stored job (imported, exists, conflict).
	JobUID string
	// Reason says why, for every result but a plain import; notes of an import too.
	Reason string
}

// Report is the outcome of an import, one entry per CronJob considered, sorted by name.
type Report struct {
	Outcomes []Outcome
	DryRun   bool
}

// Count is the number of outcomes with result r.
func (r Report) Count(res Result) int {
	n := 0
	for _, o := range r.Outcomes {
		if o.Result == res {
			n++
		}
	}
	return n
}

// Importer imports the CronJobs of one namespace.
type Importer struct {
	cfg      Config
	selector labels.Selector
	mapping  mapping
	db       Store
	client   kubernetes.Interface
	log      *slog.Logger
}

// New checks the configuration and returns an importer.
func New(cfg Config, db Store, client kubernetes.Interface) (*Importer, error) {
	cfg.Render = cfg.Render.WithDefaults()
	if len(cfg.SupportedPythonVersions) == 0 {
		cfg.SupportedPythonVersions = job.DefaultSupportedPythonVersions()
	}
	cfg.DefaultPythonVersion = cmp.Or(cfg.DefaultPythonVersion, job.DefaultPythonVersion)
	cfg.Logger = cmp.Or(cfg.Logger, slog.Default())
	sel := labels.Nothing()
	if strings.TrimSpace(cfg.Selector) != "" {
		var err error
		if sel, err = labels.Parse(cfg.Selector); err != nil {
			return nil, fmt.Errorf("selector %q: %w", cfg.Selector, err)
		}
	}
	if cfg.DefaultTeam != "" {
		if err := job.ValidateTeam(cfg.DefaultTeam); err != nil {
			return nil, fmt.Errorf("default team %q: not a DNS label", cfg.DefaultTeam)
		}
	}
	return &Importer{
		cfg: cfg, selector: sel, db: db, client: client, log: cfg.Logger,
		mapping: mapping{
			teamFromLabel: cfg.TeamFromLabel, defaultTeam: cfg.DefaultTeam,
			defaultPythonVersion: cfg.DefaultPythonVersion, supportedPython: cfg.SupportedPythonVersions,
			bounds: cfg.Render.Resources,
		},
	}, nil
}

// Run imports every VDK CronJob of the namespace and every one Selector matches. A
// CronJob that fails does not stop the others; Run returns an error only when it cannot
// list the CronJobs.
func (im *Importer) Run(ctx context.Context) (Report, error) {
	cjs, err := im.list(ctx)
	if err != nil {
		return Report{}, err
	}
	rep := Report{DryRun: im.cfg.DryRun, Outcomes: make([]Outcome, 0, len(cjs))}
	for i, cj := range cjs {
		o := im.importOne(ctx, cj)
		rep.Outcomes = append(rep.Outcomes, o)
		im.log.DebugContext(ctx, "cronjob_import", "job", o.Name, "source", o.Source, "result", string(o.Result),
			"reason", o.Reason, "dry_run", im.cfg.DryRun)
		if im.cfg.Progress != nil {
			im.cfg.Progress(i+1, len(cjs))
		}
	}
	return rep, nil
}

// list returns the CronJobs to consider, sorted by name: the VDK ones and the selected ones.
func (im *Importer) list(ctx context.Context) ([]*batchv1.CronJob, error) {
	var out []*batchv1.CronJob
	opts := metav1.ListOptions{Limit: 500}
	for {
		page, err := im.client.BatchV1().CronJobs(im.cfg.Render.Namespace).List(ctx, opts)
		if err != nil {
			return nil, fmt.Errorf("list cronjobs in %s: %w", im.cfg.Render.Namespace, err)
		}
		for i := range page.Items {
			cj := &page.Items[i]
			if isVDK(cj) || im.selector.Matches(labels.Set(cj.Labels)) {
				out = append(out, cj)
			}
		}
		if page.Continue == "" {
			break
		}
		opts.Continue = page.Continue
	}
	slices.SortFunc(out, func(a, b *batchv1.CronJob) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

func (im *Importer) importOne(ctx context.Context, cj *batchv1.CronJob) Outcome {
	o := Outcome{Name: cj.Name, Source: string(sourceSelected)}
	if isVDK(cj) {
		o.Source = string(sourceVDK)
	}
	c, err := im.mapping.read(cj)
	if err != nil {
		o.Result, o.Reason = ResultSkipped, err.Error()
		var sk *skip
		if !errors.As(err, &sk) {
			o.Result = ResultFailed
		}
		return o
	}
	o.Team = c.job.Team
	render := im.cfg.Render
	res, err := im.db.ImportDeployment(ctx, job.ImportedDeployment{
		Job:        c.job,
		Deployment: c.deployment,
		Actual: func(j job.Job) job.ActualDeployment {
			d := c.deployment
			_, hash := kube.Render(j, d, render)
			return job.ActualDeployment{
				JobName: j.Name, JobUID: j.UID, Generation: j.Generation, Team: j.Team,
				DeploymentVersionSHA: hash, JobVersion: d.JobVersion, VDKVersion: d.VDKVersion,
				PythonVersion: d.PythonVersion, Schedule: d.Schedule,
				Resources: render.Resources.Effective(d.Resources), Enabled: d.Enabled,
				DeployedBy: d.DeployedBy, DeployedDate: d.DeployedDate,
			}
		},
	}, job.ImportOptions{Overwrite: im.cfg.Overwrite, DryRun: im.cfg.DryRun})
	if err != nil {
		o.Result, o.Reason = ResultFailed, err.Error()
		return o
	}
	o.JobUID = res.Job.UID
	notes := c.notes
	switch res.Outcome {
	case job.ImportCreated:
		o.Result = ResultImported
	case job.ImportReplaced:
		o.Result = ResultImported
		notes = append([]string{res.Reason}, notes...)
	case job.ImportExists:
		o.Result, notes = ResultExists, []string{res.Reason}
	default:
		o.Result, notes = ResultConflict, []string{res.Reason + " (--overwrite replaces it)"}
	}
	if im.cfg.DryRun && o.Result == ResultImported {
		o.JobUID = "" // rolled back: that UID never existed
	}
	o.Reason = strings.Join(notes, "; ")
	return o
}
