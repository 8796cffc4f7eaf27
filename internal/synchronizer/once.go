package synchronizer

import (
	"context"
	"fmt"
	"sort"
)

// Report is the outcome of one pass of `datajobs sync --once`.
type Report struct {
	Plans  []Plan
	Errors map[string]error
}

// Summary counts the plans by action.
func (r Report) Summary() map[Action]int {
	counts := map[Action]int{}
	for _, p := range r.Plans {
		counts[p.Action]++
	}
	return counts
}

// RunOnce runs one full pass as the leader of term epoch: it plans every job and, unless
// the synchronizer is in dry-run mode, carries each plan out. Plans are sorted by name.
func (s *Synchronizer) RunOnce(ctx context.Context, epoch int64) (Report, error) {
	t, stop, err := s.startTerm(ctx, epoch)
	if err != nil {
		return Report{}, err
	}
	defer stop()
	defer t.queue.ShutDown()
	plans, err := t.pass(ctx)
	if err != nil {
		return Report{}, err
	}
	sort.Slice(plans, func(i, j int) bool { return plans[i].Name < plans[j].Name })
	rep := Report{Plans: plans, Errors: map[string]error{}}
	for _, p := range plans {
		if err := t.execute(ctx, p); err != nil {
			rep.Errors[p.Name] = err
		}
	}
	return rep, nil
}

// recordPlan keeps the latest plan of every job, for the dry-run plan endpoint.
func (s *Synchronizer) recordPlan(p Plan) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lastPlan == nil {
		s.lastPlan = map[string]Plan{}
	}
	if p.Action == ActionUnchanged && p.Live == nil && p.State.Job == nil {
		delete(s.lastPlan, p.Name)
		return
	}
	s.lastPlan[p.Name] = p
}

// String is a one-line rendering of a plan, for logs and the CLI.
func (p Plan) String() string {
	return fmt.Sprintf("%-10s %-50s %s", p.Action, p.Name, p.Reason)
}
