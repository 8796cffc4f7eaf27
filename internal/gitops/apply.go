package gitops

import (
	"context"
	"errors"
	"fmt"

	"github.com/datajobs/datajobs/internal/job"
	pl "github.com/datajobs/datajobs/internal/pipeline"
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
	Own(ctx context.Context, kind string, names []string, owner string) error
}

// Apply makes the plan's changes through w, in the plan's order, and records owner as the
// owner of every object it created or updated. ctx carries the apply's actor (job.Actor
// with File and Source), so that every revision names the file's source. The caller
// refuses a plan with a conflict first; an error leaves the rest undone (the transaction
// of w is then rolled back whole).
func (p Plan) Apply(ctx context.Context, w Writer, owner string) error {
	owned := map[string][]string{}
	for _, c := range p.Changes {
		var err error
		switch {
		case c.Action == ActionDelete && c.Kind == KindJob:
			err = w.DeleteJob(ctx, c.Name)
		case c.Action == ActionDelete:
			err = w.DeletePipeline(ctx, c.Name)
		case c.Action != ActionCreate && c.Action != ActionUpdate:
			continue
		case c.Kind == KindJob:
			err = applyJob(ctx, w, c)
		default:
			err = w.PutPipeline(ctx, c.Name, c.pipeline.Spec)
		}
		if err != nil {
			return c.failed(err)
		}
		if c.Action != ActionDelete {
			owned[c.Kind] = append(owned[c.Kind], c.Name)
		}
	}
	for _, kind := range []string{KindJob, KindPipeline} {
		if err := w.Own(ctx, kind, owned[kind], owner); err != nil {
			return err
		}
	}
	return nil
}

// applyJob creates or updates one job, then its deployment.
func applyJob(ctx context.Context, w Writer, c Change) error {
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
	where := fmt.Sprintf("the %s %q (pruned)", c.Kind, c.Name)
	if c.index >= 0 {
		where = fmt.Sprintf("the object %ss[%d] (%q) of the file", c.Kind, c.index, c.Name)
	}
	out := *de
	out.What = fmt.Sprintf("Applying %s failed: %s", where, de.What)
	out.Consequences = "Nothing was applied."
	out.Err = err
	return &out
}
