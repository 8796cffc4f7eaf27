package service

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/datajobs/datajobs/internal/gitops"
	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/secrets"
)

// ApplyRequest is an apply of a team's jobs-as-code file (docs/gitops.md).
type ApplyRequest struct {
	Team string
	// File is the file, YAML or JSON.
	File []byte
	// DryRun answers the plan and writes nothing.
	DryRun bool
	// Prune deletes the objects the file owns and no longer lists; AllowMassPrune lifts
	// the mass-prune guard.
	Prune, AllowMassPrune bool
	// Source is where the file came from, <repo>@<commit> (X-Datajobs-Source; may be
	// empty): the repository owns what the apply writes, the whole is kept on every
	// revision.
	Source string
	// BaseRevision, when given, must be the plan's: the team's state has not moved since
	// the plan the caller reviewed.
	BaseRevision string
	// User is the caller, the deployments' deployed_by.
	User string
}

// UnnamedFile owns what a file applied without a source wrote.
const UnnamedFile = "datajobs.yaml"

// Owner is the owner of what an apply from source writes: its repository.
func Owner(source string) string {
	if i := strings.LastIndexByte(source, '@'); i > 0 {
		source = source[:i]
	}
	if source == "" {
		return UnnamedFile
	}
	return source
}

// Apply plans the file of req against its team's state and, unless a dry run, applies the
// plan in one transaction, under the locks of all the team's objects, through the API's
// own writes: all or nothing. The first invalid object of the file is a 400 naming it;
// an object another file owns, or a state that moved since req.BaseRevision, is a 409.
func (s *Service) Apply(ctx context.Context, req ApplyRequest) (gitops.Plan, error) {
	if req.Source != "" {
		if err := job.ValidateText("X-Datajobs-Source", req.Source, 512); err != nil {
			return gitops.Plan{}, err
		}
	}
	if err := ValidateUser(req.User); err != nil {
		return gitops.Plan{}, err
	}
	f, err := gitops.Parse(req.Team, req.File)
	if err != nil {
		return gitops.Plan{}, err
	}
	target, err := s.target(ctx, req.Team, f, req.User)
	if err != nil {
		return gitops.Plan{}, err
	}
	owner, folders := Owner(req.Source), f.SourceFolders()
	opts := gitops.Options{Owner: owner, Prune: req.Prune, AllowMassPrune: req.AllowMassPrune}
	if req.DryRun {
		st, err := s.store.TeamState(ctx, req.Team)
		if err != nil {
			return gitops.Plan{}, err
		}
		return gitops.NewPlan(req.Team, target, st, opts)
	}
	a := job.ActorFrom(ctx)
	a.File, a.Source = owner, req.Source
	ctx = job.WithActor(ctx, a)
	var plan gitops.Plan
	err = s.store.InTeamTx(ctx, req.Team, s.sealApplySecret, func(w gitops.Writer, st gitops.State) error {
		if plan, err = gitops.NewPlan(req.Team, target, st, opts); err != nil {
			return err
		}
		if req.BaseRevision != "" && req.BaseRevision != plan.BaseRevision {
			return stateMoved(req.Team, req.BaseRevision, plan.BaseRevision)
		}
		if c, ok := plan.Conflict(); ok {
			return job.OwnedByFile(c.Kind, c.Name, c.ManagedBy)
		}
		if !plan.Writes() {
			return nil
		}
		if err := plan.Apply(ctx, w, owner); err != nil {
			return err
		}
		// A version the CLI staged for the file (StageSources) becomes its job's in this
		// transaction: an apply that fails leaves only the staged sources, which expire.
		// A source folder's version no longer staged would deploy a version with nothing
		// to build (taken for a prebuilt image's): refused, as nothing is committed.
		deployed := plan.Deployed()
		missing, err := w.BindSources(ctx, deployed, folders, s.cfg.Sources.KeepVersions)
		if err != nil || len(missing) == 0 {
			return err
		}
		return sourcesNotStaged(f, missing, deployed)
	})
	return plan, err
}

// sourcesNotStaged refuses an apply of file f whose jobs missing (in name order, at least
// one) deploy the version of their source folder, deployed[name], neither staged nor
// their sources already.
func sourcesNotStaged(f gitops.File, missing []string, deployed map[string]string) *job.Error {
	name := missing[0]
	i := slices.IndexFunc(f.Jobs, func(j gitops.Job) bool { return j.JobName == name })
	what := fmt.Sprintf("The sources of the object jobs[%d] (%q) of the file, version %s of its folder %s, are not staged.",
		i, name, deployed[name], f.Jobs[i].Deployment.Source)
	if n := len(missing) - 1; n > 0 {
		what += fmt.Sprintf(" Neither are those of %d other jobs of the file.", n)
	}
	return &job.Error{
		Kind: job.KindConflict,
		What: what,
		Why: "`datajobs apply -f` stages a source folder's sources for the apply that follows; sources no apply took are deleted " +
			"once staged longer than the service keeps them (--staged-sources-max-age), and these expired or were never staged. " +
			"The job has no sources of that version to build.",
		Consequences:    "Nothing was applied.",
		Countermeasures: "Run `datajobs apply -f` again: it stages the folders' sources again, then applies the file.",
	}
}

// target is the file f of team in the domain's values: each job validated and its
// deployment finished as a first deployment would be (config.ini's run policy under the
// file's fields, the installation's defaults), each pipeline parsed as its PUT, each
// trigger as its POST.
func (s *Service) target(ctx context.Context, team string, f gitops.File, user string) (gitops.Target, error) {
	var t gitops.Target
	versions := map[string]string{}
	for _, fj := range f.Jobs {
		if fj.Deployment != nil {
			versions[fj.JobName] = fj.Deployment.JobVersion
		}
	}
	fromConfig, err := s.store.SourcesPolicies(ctx, team, versions)
	if err != nil {
		return t, err
	}
	for i, fj := range f.Jobs {
		j, c, err := fj.Target(team)
		if err != nil {
			return t, gitops.Invalid("jobs", i, fj.JobName, err)
		}
		jt := gitops.JobTarget{Job: j}
		if c != nil {
			c.Policy = c.Policy.Or(fromConfig[j.Name])
			d, err := s.firstDeployment(ctx, j, *c, user)
			if err != nil {
				return t, gitops.Invalid("jobs", i, fj.JobName, err)
			}
			jt.Deployment = &d
		}
		t.Jobs = append(t.Jobs, jt)
	}
	for i, fp := range f.Pipelines {
		spec, err := fp.Spec(team)
		if err != nil {
			return t, gitops.Invalid("pipelines", i, fp.Name, err)
		}
		t.Pipelines = append(t.Pipelines, gitops.PipelineTarget{Name: fp.Name, Spec: spec})
	}
	for i, ft := range f.Triggers {
		spec, err := gitops.TriggerSpec(team, ft)
		if err != nil {
			return t, gitops.Invalid("triggers", i, ft.Name, err)
		}
		t.Triggers = append(t.Triggers, spec)
	}
	for i, fw := range f.Webhooks {
		ch := fw.Create()
		if err := s.validateWebhookChange(&ch); err != nil {
			return t, gitops.Invalid("webhooks", i, fw.Name, err)
		}
		t.Webhooks = append(t.Webhooks, gitops.Webhook{Name: fw.Name, URL: fw.URL, Format: *ch.Format, Events: *ch.Events})
	}
	return t, nil
}

// firstDeployment is the deployment c (its run policy over config.ini's already) makes
// of a job not deployed yet: Deploy's rules.
func (s *Service) firstDeployment(ctx context.Context, j job.Job, c job.DeploymentChange, user string) (job.Deployment, error) {
	c, profile, err := s.checkedChange(ctx, j.Team, c, user)
	if err != nil {
		return job.Deployment{}, err
	}
	return s.finish(j, withProfile(c.ApplyTo(job.Deployment{PythonVersion: s.cfg.DefaultPythonVersion}), profile), user)
}

// Export is team's state as a file that applies with an empty plan.
func (s *Service) Export(ctx context.Context, team string) (gitops.File, error) {
	if err := job.ValidateTeam(team); err != nil {
		return gitops.File{}, err
	}
	st, err := s.store.TeamState(ctx, team)
	if err != nil {
		return gitops.File{}, err
	}
	return gitops.Export(team, st), nil
}

// ReleaseFromFile releases team's objects named, by kind (gitops.KindJob, KindPipeline,
// KindTrigger, KindWebhook), from the files that own them, so that the API changes them
// again, and returns how many it released. No names at all release every object of the
// team; names of some kinds release none of the others.
func (s *Service) ReleaseFromFile(ctx context.Context, team string, names map[string][]string) (int64, error) {
	if len(names) > 0 {
		for _, kind := range []string{gitops.KindJob, gitops.KindPipeline, gitops.KindTrigger, gitops.KindWebhook} {
			if names[kind] == nil {
				names[kind] = []string{}
			}
		}
	}
	return s.store.ReleaseFromFile(ctx, team, names)
}

// sealApplySecret seals the signing secret of the trigger or webhook (kind) id an apply
// creates, as their POSTs do.
func (s *Service) sealApplySecret(kind, id string, secret []byte) (secrets.Envelope, error) {
	if kind == gitops.KindWebhook {
		return s.sealWebhookSecret(id, secret)
	}
	return s.sealTriggerSecret(id, secret)
}

// stateMoved reports an apply whose base revision is no longer the team's state.
func stateMoved(team, base, now string) *job.Error {
	return &job.Error{
		Kind:            job.KindConflict,
		What:            fmt.Sprintf("The state of team %q moved since the plan.", team),
		Why:             fmt.Sprintf("The plan was made on %s; the team is now at %s.", base, now),
		Consequences:    "Nothing was applied.",
		Countermeasures: "Plan again (dry_run=true), review the plan and apply it with its base_revision.",
	}
}
