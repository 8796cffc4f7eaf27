package synchronizer

import (
	"context"
	"sort"
)

// Report is the outcome of one pass of `datajobs sync --once`.
type Report struct {
	Plans  []Plan
	Errors map[string]error
	// PruneRefusal is set when the pass kept orphans rather than mass-prune them.
	PruneRefusal *PruneRefusal
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
	defer t.builds.stop() // a single pass builds nothing: it plans a hold for jobs to build
	plans, err := t.pass(ctx)
	if err != nil {
		return Report{}, err
	}
	sort.Slice(plans, func(i, j int) bool { return plans[i].Name < plans[j].Name })
	rep := Report{Plans: plans, Errors: map[string]error{}, PruneRefusal: s.PruneRefusal()}
	for _, p := range plans {
		if _, err := t.execute(ctx, p); err != nil {
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

// PlannedJob is the latest plan of one job, as the debug endpoint shows it.
type PlannedJob struct {
	Job        string `json:"job"`
	Action     Action `json:"action"`
	Reason     string `json:"reason"`
	Generation int64  `json:"generation,omitempty"`
}

// LatestPlans returns the latest plan of every job the synchronizer has seen, sorted by
// name. In dry-run mode it is what would be done; otherwise what was last done.
func (s *Synchronizer) LatestPlans() []PlannedJob {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]PlannedJob, 0, len(s.lastPlan))
	for _, p := range s.lastPlan {
		pj := PlannedJob{Job: p.Name, Action: p.Action, Reason: p.Reason}
		if p.State.Job != nil {
			pj.Generation = p.State.Job.Generation
		}
		out = append(out, pj)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Job < out[j].Job })
	return out
}

// IsChange reports whether an action changes what the CronJob does. Adopting only adds
// labels and annotations, and recording touches only the database.
func (a Action) IsChange() bool {
	return a.writesKubernetes() && a != ActionAdopt
}
