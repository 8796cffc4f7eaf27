package synchronizer

import "sort"

// The latest plan of every job, kept for the dry-run plan endpoint and the console.

// recordPlan keeps the latest plan of every job, for the dry-run plan endpoint.
func (s *Synchronizer) recordPlan(p Plan) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lastPlan == nil {
		s.lastPlan = map[string]PlannedJob{}
	}
	if p.Action == ActionUnchanged && p.Live == nil && p.State.Job == nil {
		delete(s.lastPlan, p.Name)
		return
	}
	// Only what LatestPlans shows is kept: a whole Plan holds its rendered CronJob, the
	// state read and the cached live object, some KiB per job held for every job.
	pj := PlannedJob{Job: p.Name, Action: p.Action, Reason: p.Reason}
	if p.State.Job != nil {
		pj.Generation = p.State.Job.Generation
	}
	s.lastPlan[p.Name] = pj
}

// endTerm forgets the term's plans and what it verified: a replica shows plans only while
// it leads (or runs dry). A replica kept them after its term, and a shard's terms move
// between replicas: one that led a shard once (both shards, for the seconds before two
// replicas split them) held a plan of every job of it for as long as it ran.
func (s *Synchronizer) endTerm() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lastPlan, s.verified = nil, nil
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
	for _, pj := range s.lastPlan {
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
