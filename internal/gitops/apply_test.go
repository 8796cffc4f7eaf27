package gitops_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/gitops"
	"github.com/datajobs/datajobs/internal/job"
	pl "github.com/datajobs/datajobs/internal/pipeline"
	"github.com/datajobs/datajobs/internal/trigger"
)

// queuingWriter is a writer that queues every write and sends them with the next one
// (as the store's team transaction does): a failed write of the job bad comes back with
// the write after it, as an *gitops.ObjectError naming bad.
type queuingWriter struct {
	bad     string
	pending error
}

func (w *queuingWriter) write(name string) error {
	err := w.pending
	w.pending = nil
	if name == w.bad {
		w.pending = &gitops.ObjectError{Kind: gitops.KindJob, Name: name, Err: job.Invalid("deployment.vdk_version", "text", "a NUL character")}
	}
	return err
}

func (w *queuingWriter) CreateJob(_ context.Context, j job.Job) (job.Job, error) {
	return j, w.write(j.Name)
}

func (w *queuingWriter) UpdateJob(_ context.Context, st job.JobState, next job.Job) (job.Job, error) {
	return next, w.write(st.Job.Name)
}

func (w *queuingWriter) ChangeDeployment(_ context.Context, st job.JobState, d job.Deployment) (job.Deployment, error) {
	return d, w.write(st.Job.Name)
}

func (w *queuingWriter) DeleteDeployment(_ context.Context, st job.JobState) error {
	return w.write(st.Job.Name)
}
func (w *queuingWriter) DeleteJob(_ context.Context, name string) error { return w.write(name) }
func (w *queuingWriter) PutPipeline(context.Context, string, pl.Spec) error {
	return w.write("")
}
func (w *queuingWriter) DeletePipeline(context.Context, string) error { return w.write("") }
func (w *queuingWriter) CreateTrigger(_ context.Context, spec trigger.Spec) (trigger.Trigger, error) {
	return trigger.Trigger{Spec: spec}, w.write(spec.Name)
}

func (w *queuingWriter) UpdateTrigger(_ context.Context, _ string, spec trigger.Spec) error {
	return w.write(spec.Name)
}
func (w *queuingWriter) DeleteTrigger(_ context.Context, name string) error { return w.write(name) }
func (w *queuingWriter) CreateWebhook(_ context.Context, h gitops.Webhook, secret []byte) (job.TeamWebhook, error) {
	return job.TeamWebhook{ID: "id-" + h.Name, Name: h.Name, Secret: secret}, w.write(h.Name)
}

func (w *queuingWriter) UpdateWebhook(_ context.Context, _ string, h gitops.Webhook) error {
	return w.write(h.Name)
}
func (w *queuingWriter) DeleteWebhook(_ context.Context, name string) error { return w.write(name) }
func (w *queuingWriter) Own(context.Context, string, []string, string) error {
	return w.write("")
}
func (w *queuingWriter) Flush(context.Context) error { return w.write("") }
func (w *queuingWriter) BindSources(context.Context, map[string]string, map[string]string, int) ([]string, error) {
	return nil, w.write("")
}

func TestAQueuedWriteThatFailsNamesItsObjectNotTheNextOne(t *testing.T) {
	t.Parallel()
	p, err := gitops.NewPlan("team-a", targetOf(t, base), gitops.State{}, gitops.Options{Owner: "repo"})
	require.NoError(t, err)
	for _, bad := range []string{"extract-job", "old-job"} { // the first and the last job
		err = p.Apply(t.Context(), &queuingWriter{bad: bad}, "repo")
		de, ok := errors.AsType[*job.Error](err)
		require.True(t, ok, "%v", err)
		require.Equal(t, job.KindInvalid, de.Kind)
		i := map[string]string{"extract-job": "jobs[0]", "old-job": "jobs[2]"}[bad]
		require.Contains(t, de.What, "the object "+i+` ("`+bad+`") of the file`, bad)
	}
}
