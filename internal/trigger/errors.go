package trigger

import (
	"fmt"
	"time"

	"github.com/datajobs/datajobs/internal/job"
)

// NotFound reports a trigger that is not one of the team's.
func NotFound(team, name string) *job.Error {
	return job.NotFoundInTeam("trigger", team, name)
}

// UnknownInvocation reports an invocation of a trigger id that no signed trigger has. It
// is a 404 whatever the reason, so the path probes nothing.
func UnknownInvocation() *job.Error {
	return job.NewError(job.KindNotFound,
		"No trigger answers at this address.",
		"The trigger was deleted, or the address is not an invocation URL a trigger was created with.",
		"No event was recorded.",
		"Use the invocation_url the trigger's creation answered.",
	)
}

// Exists reports a trigger name the team has already.
func Exists(team, name string) *job.Error {
	return job.NewError(job.KindConflict,
		fmt.Sprintf("Team %q already has a trigger named %q.", team, name),
		"A trigger's name is unique in its team.",
		"The trigger was not created.",
		"Pick another name, or delete the trigger first.",
	)
}

// TooMany reports a create past the team's bound of triggers.
func TooMany(team string, limit int) *job.Error {
	return job.NewError(job.KindConflict,
		fmt.Sprintf("Team %q has %d triggers, its most.", team, limit),
		"Every trigger costs rows and a check on each final status; a team's triggers are bounded.",
		"The trigger was not created.",
		"Delete a trigger the team no longer needs, or ask the operators for a higher bound.",
	)
}

// UnknownTarget reports a target or upstream that is not a job or pipeline of its team.
func UnknownTarget(field, kind, team, name string) *job.Error {
	return job.Invalid(field, fmt.Sprintf("a %s of team %q", kind, team), fmt.Sprintf("%q, which does not exist", name))
}

// NotGranted reports an outcome trigger on another team's job or pipeline without its grant.
// The same answer whether it exists or not: no probing other teams.
func NotGranted(team, kind, upstreamTeam, name string) *job.Error {
	e := job.JobNotGranted(fmt.Sprintf("A trigger of team %q may not follow the %s %q of team %q.", team, kind, name, upstreamTeam),
		upstreamTeam, name, team, "The trigger was not created.")
	if kind == "pipeline" {
		e.Why = "Pipelines are not granted across teams; only jobs are."
		e.Countermeasures = "Follow the outcome of a job of the other team that it grants, or of a pipeline of your own team."
	}
	return e
}

// RateLimited is an invocation past the trigger's events per minute: 429 with
// Retry-After.
type RateLimited struct {
	Err *job.Error
	// RetryAfter is when the oldest event of the last minute leaves it.
	RetryAfter time.Duration
}

func (e *RateLimited) Error() string { return e.Err.Error() }

// Unwrap lets job.KindOf see the 429.
func (e *RateLimited) Unwrap() error { return e.Err }

// NewRateLimited reports an invocation of the trigger name past limit events a minute.
func NewRateLimited(name string, limit int, after time.Duration) *RateLimited {
	return &RateLimited{Err: job.NewError(job.KindBusy,
		fmt.Sprintf("The trigger %q received %d events in the last minute, its most.", name, limit),
		"A trigger's events are bounded per minute (its max_events_per_minute).",
		"No event was recorded and nothing was started.",
		"Retry after the time Retry-After gives, or coalesce the calls on the sender's side.",
	), RetryAfter: after}
}

// MaxBodyBytes bounds an invocation's body.
const MaxBodyBytes = 256 << 10

// BodyTooLarge reports an invocation's body over MaxBodyBytes.
func BodyTooLarge() *job.Error {
	return job.NewError(job.KindTooLarge,
		"The trigger invocation's body is too large.",
		fmt.Sprintf("An invocation's body is limited to %d bytes.", MaxBodyBytes),
		"No event was recorded and nothing was started.",
		"Send a smaller body: the event needs only what tells the run what happened.",
	)
}
