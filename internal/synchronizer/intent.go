package synchronizer

import (
	"context"
	"fmt"
	"slices"

	"github.com/datajobs/datajobs/internal/controller"
	"github.com/datajobs/datajobs/internal/job"
)

// The database knows every CronJob this installation may have created before Kubernetes
// does (DESIGN invariant 10): before a write that gives a CronJob the label of a job
// incarnation the actual table does not hold (a create, a replace, an adoption, an update
// of an imported CronJob), its intent is recorded (Store.RecordIntents, which says why
// this order closes the race with a job's delete). A CronJob whose job is gone and whose
// UID an intent holds is then a delete the database asked for, never an orphan the prune
// guard holds back (plan). A full pass records the intents of all the creates it queues
// in one statement, so that a converge does not pay a round trip per create for them.

// known reports whether the database already knows a CronJob of the plan's job
// incarnation: its actual row or an intent holds the UID. An update, a suspend or a
// resume of a recorded job so writes no intent.
func known(p Plan) bool {
	st, j := p.State, p.State.Job
	return p.Action == ActionRecord || (st.Actual != nil && st.Actual.JobUID == j.UID) || st.Intended(j.UID)
}

// intend records the intent of the plan's write unless the database knows of it already,
// and reports whether the write may go ahead; if not, res and err are the outcome: the
// job was deleted or changed since the plan read it, and the name is planned again.
func (t *term) intend(ctx context.Context, p Plan) (res controller.Result, ok bool, err error) {
	if known(p) {
		return controller.Result{}, true, nil
	}
	j := p.State.Job
	wrote, err := t.s.db.RecordIntents(ctx, t.fence, []job.Intent{{JobName: j.Name, JobUID: j.UID, Generation: j.Generation}})
	switch {
	case err != nil:
		return controller.Result{}, false, fmt.Errorf("record the intent to %s cronjob %s: %w", p.Action, p.Name, err)
	case !wrote[0]:
		t.s.remember(p.Name, nil)
		return t.replan(), false, nil
	}
	return controller.Result{}, true, nil
}

// intendCreates records, in one statement, the intents of the creates a full pass
// planned, and adds each one written to its plan's state, so that the reconcile taking
// that plan (prefetch.go) writes none of its own. A create whose intent was not written
// (the job moved on) or that reads its state afresh finds out for itself; a failure of
// the statement only costs each create its own round trip.
func (t *term) intendCreates(ctx context.Context, plans []Plan) {
	if t.s.cfg.DryRun {
		return
	}
	var (
		intents []job.Intent
		at      []int
	)
	for i, p := range plans {
		if p.Action == ActionCreate && !known(p) {
			j := p.State.Job
			intents = append(intents, job.Intent{JobName: j.Name, JobUID: j.UID, Generation: j.Generation})
			at = append(at, i)
		}
	}
	if len(intents) == 0 {
		return
	}
	wrote, err := t.s.db.RecordIntents(ctx, t.fence, intents)
	if err != nil {
		t.s.log.WarnContext(ctx, "record_intents_failed", "creates", len(intents), "error", err)
		return
	}
	for k, i := range at {
		if wrote[k] {
			st := &plans[i].State
			st.Intents = append(slices.Clip(st.Intents), st.Job.UID)
		}
	}
}
