package job

import (
	"encoding/json"
	"fmt"
	"maps"
	"time"
)

// Backfills (issue 27): one run per schedule time of a deployment in a range, each with
// its logical time, at most MaxParallel at once, started by the leader as earlier ones end.

// The bounds of a backfill request.
const (
	// MaxBackfillRuns bounds the schedule times of one backfill: a range of years of a
	// per-minute schedule is a mistake to refuse, not a queue of a million runs.
	MaxBackfillRuns = 1000
	// MaxBackfillParallel bounds a backfill's runs at once (its max_parallel).
	MaxBackfillParallel = 10
	// MaxOpenBackfills bounds the backfills of a job not finished yet: each is a step of
	// the leader after every run that ends.
	MaxOpenBackfills = 10
)

// Backfill is a backfill as the API shows it.
type Backfill struct {
	ID          int64
	JobName     string
	From, To    time.Time
	MaxParallel int
	// Args are the arguments every run gets besides logical_time (nil: none).
	Args      []byte
	CreatedBy string
	CreatedAt time.Time
	// CancelledBy and CancelledAt are set once a cancel was asked (by a user, or by the
	// platform when the job or its deployment went: then Message says why).
	CancelledBy string
	CancelledAt *time.Time
	Message     string
	// FinishedAt is set once no run of it is pending or under way.
	FinishedAt *time.Time
	Progress   BackfillProgress
}

// BackfillProgress counts a backfill's runs: Total schedule times, Pending ones not
// started yet, Running ones submitted or running, and the final ones by outcome (Failed:
// user and platform errors). The schedule times a cancel left unstarted count as
// Cancelled, so the counts always add up to Total.
type BackfillProgress struct {
	Total, Pending, Running, Succeeded, Failed, Cancelled int
}

// NewBackfill is a backfill to record, as the service built it from the deployment.
type NewBackfill struct {
	From, To    time.Time
	MaxParallel int
	// Times are the schedule times in [From, To], in order.
	Times     []time.Time
	Args      []byte
	CreatedBy string
}

// BackfillStart builds the backfill to insert from the locked job and its deployments;
// returning an error rolls the request back.
type BackfillStart func(st JobState) (NewBackfill, error)

// RunArgs are the arguments of a run that stands for the schedule time at (a backfill's
// run, a pipeline node's execution): the JSON objects parts merged, a later one's keys over
// an earlier one's, and logical_time (RFC 3339, UTC) over them all, as a catch-up run has
// it. what names the parts in an error.
func RunArgs(what string, at time.Time, parts ...[]byte) ([]byte, error) {
	m := map[string]any{}
	for _, raw := range parts {
		if len(raw) == 0 {
			continue
		}
		var part map[string]any
		if err := json.Unmarshal(raw, &part); err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		maps.Copy(m, part)
	}
	m["logical_time"] = at.UTC().Format(time.RFC3339)
	return json.Marshal(m)
}

// Snapshot is the deployment a run started from the CronJob of a (the applied
// deployment) runs.
func (a ActualDeployment) Snapshot() Deployment {
	return Deployment{
		JobVersion: a.JobVersion, VDKVersion: a.VDKVersion, PythonVersion: a.PythonVersion,
		Schedule: a.Schedule, Resources: a.Resources, Enabled: a.Enabled, DeployedBy: a.DeployedBy, DeployedDate: a.DeployedDate,
	}
}

// BackfillNotFound reports a backfill that is not one of the job's.
func BackfillNotFound(team, name string, id int64) *Error {
	return NewError(KindNotFound, fmt.Sprintf("The backfill %d of data job %q was not found for team %q.", id, name, team),
		"No backfill with that id belongs to that job and team.",
		notProcessed, "List the job's backfills (GET …/deployments/{id}/backfills) to find the right id.")
}

// TooManyBackfills reports a backfill asked for while MaxOpenBackfills of the job run.
func TooManyBackfills(name string) *Error {
	return NewError(KindConflict, fmt.Sprintf("The data job %q cannot be backfilled now.", name),
		fmt.Sprintf("It has %d backfills not finished yet, the most a job may have.", MaxOpenBackfills),
		"No backfill was recorded and no run started.", "Wait for a backfill to finish, or cancel one (DELETE …/backfills/{id}), and ask again.")
}

// BackfillFinished reports a cancel of a backfill that already ended.
func BackfillFinished(id int64) *Error {
	return NewError(KindInvalid, fmt.Sprintf("The backfill %d cannot be cancelled.", id),
		"All of its runs have already finished.",
		"Nothing was changed.", "Only a backfill with runs pending or under way can be cancelled.")
}
