package gitops

import (
	"context"
	"errors"
	"fmt"
	"net/url"

	"github.com/datajobs/datajobs/internal/job"
	pl "github.com/datajobs/datajobs/internal/pipeline"
	"github.com/datajobs/datajobs/internal/trigger"
)

// Writer is the team's transaction an apply writes through: the API's own writes
// (store.TeamTx implements it).
type Writer interface {
	CreateJob(ctx context.Context, j job.Job) (job.Job, error)
	UpdateJob(ctx context.Context, st job.JobState, next job.Job) (job.Job, error)
	ChangeDeployment(ctx context.Context, st job.JobState, d job.Deployment) (job.Deployment, error)
	DeleteDeployment(ctx context.Context, st job.JobState) error
	DeleteJob(ctx context.Context, name string) error
	PutPipeline(ctx context.Context, name string, spec pl.Spec) error
	DeletePipeline(ctx context.Context, name string) error
	// CreateTrigger creates the trigger spec; a webhook or object trigger's result holds
	// its new signing secret, open (trigger.Trigger.Secret).
	CreateTrigger(ctx context.Context, spec trigger.Spec) (trigger.Trigger, error)
	// UpdateTrigger changes the trigger of id to spec, keeping its id and signing secret.
	UpdateTrigger(ctx context.Context, id string, spec trigger.Spec) error
	DeleteTrigger(ctx context.Context, name string) error
	// CreateWebhook creates the team's notification webhook w with secret (its result
	// holds it, open).
	CreateWebhook(ctx context.Context, w Webhook, secret []byte) (job.TeamWebhook, error)
	// UpdateWebhook changes the webhook of id to w, keeping its id and secret.
	UpdateWebhook(ctx context.Context, id string, w Webhook) error
	DeleteWebhook(ctx context.Context, name string) error
	Own(ctx context.Context, kind string, names []string, owner string) error
	// BindSources makes the sources staged for the team of the versions (by job name) the
	// jobs' own, keeping the keep latest versions of each. It returns the jobs of sourced
	// (File.SourceFolders) whose version is neither staged nor their sources already.
	BindSources(ctx context.Context, versions, sourced map[string]string, keep int) ([]string, error)
	// Flush sends the writes still queued: a writer may queue a write's statements that
	// need no answer and send them with a later one (their failure is then an
	// *ObjectError).
	Flush(ctx context.Context) error
}

// ObjectError is the failure of a write of the object Kind/Name that came back with a
// later statement, maybe another object's (a writer that queues statements): the apply
// names the object that failed, not the one it was writing. It does not unwrap, so that
// the later write does not take Err for its own failure (a unique violation of a queued
// revision is not the next job's name taken).
type ObjectError struct {
	Kind, Name string
	Err        error
}

func (e *ObjectError) Error() string { return fmt.Sprintf("write %s %s: %v", e.Kind, e.Name, e.Err) }

// Apply makes the plan's changes through w, in the plan's order, and records owner as the
// owner of every object it created or updated. ctx carries the apply's actor (job.Actor
// with File and Source), so that every revision names the file's source. The caller
// refuses a plan with a conflict first; an error leaves the rest undone (the transaction
// of w is then rolled back whole). A trigger or a webhook it creates has its signing
// secret in its change (SigningSecret), for the apply's answer alone.
func (p *Plan) Apply(ctx context.Context, w Writer, owner string) error {
	owned := map[string][]string{}
	for i := range p.Changes {
		c := &p.Changes[i]
		if c.Action != ActionCreate && c.Action != ActionUpdate && c.Action != ActionDelete {
			continue
		}
		var err error
		switch c.Kind {
		case KindJob:
			err = applyJob(ctx, w, *c)
		case KindPipeline:
			err = applyPipeline(ctx, w, *c)
		case KindWebhook:
			err = applyWebhook(ctx, w, c)
		default:
			err = applyTrigger(ctx, w, c)
		}
		if err != nil {
			return p.failed(*c, err)
		}
		if c.Action != ActionDelete {
			owned[c.Kind] = append(owned[c.Kind], c.Name)
		}
	}
	for _, kind := range []string{KindJob, KindPipeline, KindTrigger, KindWebhook} {
		if err := w.Own(ctx, kind, owned[kind], owner); err != nil {
			return p.failed(Change{Kind: kind, Name: "owners", index: -1}, err)
		}
	}
	if err := w.Flush(ctx); err != nil {
		return p.failed(Change{Kind: "file", Name: "writes", index: -1}, err)
	}
	return nil
}

// Deployed is the version of every job whose deployment the plan writes, by job name: the
// versions whose staged sources the apply binds to their jobs.
func (p Plan) Deployed() map[string]string {
	out := map[string]string{}
	for _, c := range p.Changes {
		if c.Kind == KindJob && c.depWrite && c.job != nil && c.job.Deployment != nil {
			out[c.Name] = c.job.Deployment.JobVersion
		}
	}
	return out
}

// failed is the failure err of the apply while it wrote c: the failure of the change of
// the object an *ObjectError names, if it is one.
func (p Plan) failed(c Change, err error) error {
	if oe, ok := errors.AsType[*ObjectError](err); ok {
		err = oe.Err
		c = Change{Kind: oe.Kind, Name: oe.Name, index: -1}
		for _, pc := range p.Changes {
			if pc.Kind == oe.Kind && pc.Name == oe.Name {
				c = pc
			}
		}
	}
	return c.failed(err)
}

// applyPipeline puts or deletes one pipeline.
func applyPipeline(ctx context.Context, w Writer, c Change) error {
	if c.Action == ActionDelete {
		return w.DeletePipeline(ctx, c.Name)
	}
	return w.PutPipeline(ctx, c.Name, c.pipeline.Spec)
}

// applyTrigger creates, updates or deletes one trigger; a created signed trigger's id
// and secret go to c. An update that makes a trigger signed, or no longer signed, replaces
// it: an outcome trigger has no secret to keep, and a new one must be shown.
func applyTrigger(ctx context.Context, w Writer, c *Change) error {
	switch {
	case c.Action == ActionDelete:
		return w.DeleteTrigger(ctx, c.Name)
	case c.Action == ActionUpdate && c.curTrig.Trigger.Spec.Signed() == c.trig.Signed():
		return w.UpdateTrigger(ctx, c.curTrig.Trigger.ID, *c.trig)
	case c.Action == ActionUpdate:
		if err := w.DeleteTrigger(ctx, c.Name); err != nil {
			return err
		}
	}
	t, err := w.CreateTrigger(ctx, *c.trig)
	if err != nil || !t.Spec.Signed() {
		return err
	}
	c.TriggerID, c.SigningSecret = t.ID, string(t.Secret)
	c.InvocationPath = "/data-jobs/triggers/" + url.PathEscape(t.ID) + "/events"
	return nil
}

// applyJob creates, updates or deletes one job, then its deployment.
func applyJob(ctx context.Context, w Writer, c Change) error {
	if c.Action == ActionDelete {
		return w.DeleteJob(ctx, c.Name)
	}
	st := job.JobState{}
	if c.cur != nil {
		st = *c.cur
	}
	var err error
	switch {
	case c.cur == nil:
		st.Job, err = w.CreateJob(ctx, c.job.Job)
	case c.jobWrite:
		next := c.job.Job
		next.Team = st.Job.Team
		st.Job, err = w.UpdateJob(ctx, st, next)
	}
	if err != nil || !c.depWrite {
		return err
	}
	if c.job.Deployment == nil {
		return w.DeleteDeployment(ctx, st)
	}
	_, err = w.ChangeDeployment(ctx, st, *c.job.Deployment)
	return err
}

// failed names the change's object in err: a domain error keeps its kind (a name taken by
// another team's job is still 409), any other is the apply's failure.
func (c Change) failed(err error) error {
	de, ok := errors.AsType[*job.Error](err)
	if !ok {
		return fmt.Errorf("apply %s %s: %w", c.Kind, c.Name, err)
	}
	where := fmt.Sprintf("the %s %q", c.Kind, c.Name)
	switch {
	case c.Action == ActionDelete:
		where += " (pruned)"
	case c.index >= 0:
		where = fmt.Sprintf("the object %ss[%d] (%q) of the file", c.Kind, c.index, c.Name)
	}
	out := *de
	out.What = fmt.Sprintf("Applying %s failed: %s", where, de.What)
	out.Consequences = "Nothing was applied."
	out.Err = err
	return &out
}
