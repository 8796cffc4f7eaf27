package service

import (
	"context"
	"fmt"

	"github.com/datajobs/datajobs/internal/job"
)

// Execution targets (issue 44, docs/targets.md). Who may manage them (the admin teams) is
// the API's rule; the service validates them and keeps the default target where serve
// put it.

// PutTarget validates t and stores it whole (store.PutTarget: a team that joins or leaves
// its default_for moves, and its runs in the target it left are cancelled), and answers
// the target as stored; created tells whether it is new.
func (s *Service) PutTarget(ctx context.Context, t job.Target) (stored job.Target, created bool, err error) {
	if err := t.Validate(); err != nil {
		return job.Target{}, false, err
	}
	if t.Name == job.DefaultTargetName {
		if err := s.samePlaceAsDefault(ctx, t); err != nil {
			return job.Target{}, false, err
		}
	}
	if created, err = s.store.PutTarget(ctx, t); err != nil {
		return job.Target{}, false, err
	}
	stored, err = s.store.GetTarget(ctx, t.Name)
	return stored, created, err
}

// samePlaceAsDefault refuses a PUT of the default target that names another namespace or
// cluster than the stored one: that is serve's --namespace, where every CronJob written
// before targets is, and the synchronizer writes the row itself at its first start.
func (s *Service) samePlaceAsDefault(ctx context.Context, t job.Target) error {
	cur, err := s.store.GetTarget(ctx, job.DefaultTargetName)
	switch {
	case job.KindOf(err) == job.KindNotFound:
		return job.NewError(job.KindConflict, "The default execution target cannot be written yet.",
			"It is serve's --namespace, written by the synchronizer at its first start, which has not happened on this database.",
			"The target was not changed.", "Start serve (with the synchronizer) once, then change the default target's teams.")
	case err != nil:
		return err
	case !cur.SamePlace(t):
		return job.NewError(job.KindConflict, "The default execution target cannot move to another namespace or cluster.",
			fmt.Sprintf("Its namespace is serve's --namespace (%q, the cluster serve runs against), where the jobs of every team without another target run.", cur.Namespace),
			"The target was not changed.", fmt.Sprintf(`Send "namespace": %q and "cluster": "local" to change its teams; to drive another namespace, create another target and move teams to it.`, cur.Namespace))
	}
	return nil
}

// GetTarget reads the target name.
func (s *Service) GetTarget(ctx context.Context, name string) (job.Target, error) {
	return s.store.GetTarget(ctx, name)
}

// ListTargets reads every target, by name.
func (s *Service) ListTargets(ctx context.Context) ([]job.Target, error) {
	return s.store.ListTargets(ctx)
}

// DeleteTarget deletes the target name (409 for the default target, and for one that
// teams default to or that still holds CronJobs or runs).
func (s *Service) DeleteTarget(ctx context.Context, name string) error {
	return s.store.DeleteTarget(ctx, name)
}

// TargetOutages returns the execution targets whose shard a replica reported unable to
// run, recently enough to be shown (store.TargetOutages): the console's banner.
func (s *Service) TargetOutages(ctx context.Context) ([]job.TargetOutage, error) {
	return s.store.TargetOutages(ctx)
}
