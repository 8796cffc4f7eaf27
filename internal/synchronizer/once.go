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
	// RestoreRefusal is set when the database looks restored from an older backup (restore.go).
	RestoreRefusal *RestoreRefusal
	// TeamSecrets is what the pass did with each team's OAuth Secret (teamsecret.go).
	TeamSecrets []TeamSecretPlan
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
// the synchronizer is in dry-run mode, carries each plan out. Plans are sorted by name; a
// verify (a CronJob the cache could not compare) is the plan of the CronJob as read.
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
	rep := Report{Plans: plans, Errors: map[string]error{}, PruneRefusal: s.PruneRefusal(), RestoreRefusal: s.restoreRefusal()}
	v := t.verdicts()
	v.pass = true
	for i, p := range plans {
		// A verify is reported as what the CronJob read from the apiserver made of it,
		// decided by the pass's verdicts (deciding a decided plan again changes nothing).
		p, err := t.resolve(ctx, p)
		if err == nil {
			p = decide(p, v)
			plans[i] = p
			_, err = t.execute(ctx, p)
		}
		if err != nil {
			rep.Errors[p.Name] = err
		}
	}
	if rep.TeamSecrets, err = t.teamSecretsOnce(ctx); err != nil {
		rep.Errors[teamSecretsKey] = err
	}
	if err := t.placementsOnce(ctx); err != nil {
		rep.Errors[placementsKey] = err
	}
	return rep, nil
}
