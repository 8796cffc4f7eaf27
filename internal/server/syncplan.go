package server

import (
	"net/http"

	"github.com/datajobs/datajobs/internal/synchronizer"
)

// syncPlan is the body of GET /data-jobs/debug/sync-plan.
type syncPlan struct {
	// Mode is the synchronizer mode of this replica.
	Mode SyncMode `json:"mode"`
	// Changes counts the jobs whose CronJob would change (or, when on, last changed):
	// adoption only adds labels and annotations and is not counted. An operator switching
	// from dry-run to on waits for 0.
	Changes int                       `json:"changes"`
	Summary map[string]int            `json:"summary"`
	Jobs    []synchronizer.PlannedJob `json:"jobs"`
}

// syncPlanHandler serves the synchronizer's latest plan per job, so that an operator can
// check a dry run before turning the synchronizer on. Only the leader (or a dry-run
// replica) has a plan; others answer with an empty one.
func syncPlanHandler(mode SyncMode, syncer *synchronizer.Synchronizer) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		body := syncPlan{Mode: mode, Summary: map[string]int{}, Jobs: []synchronizer.PlannedJob{}}
		if syncer != nil {
			body.Jobs = syncer.LatestPlans()
		}
		for _, j := range body.Jobs {
			body.Summary[string(j.Action)]++
			if j.Action.IsChange() {
				body.Changes++
			}
		}
		writeJSON(w, http.StatusOK, body)
	})
}
