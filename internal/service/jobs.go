package service

import (
	"context"
	"fmt"
	"strconv"

	"github.com/datajobs/datajobs/internal/job"
)

// CreateJob creates the data job j for team. An empty j.Team is the path's team (VDK);
// any other team must equal it. The job gets a new UID, also when its name was used by a
// job deleted before.
func (s *Service) CreateJob(ctx context.Context, team string, j job.Job) (job.Job, error) {
	if err := job.ValidateTeam(team); err != nil {
		return job.Job{}, err
	}
	if j.Team == "" {
		j.Team = team
	}
	if j.Team != team {
		return job.Job{}, job.Invalid("team", "equal to the team in the path ("+team+")", quote(j.Team))
	}
	j.Schedule = job.CleanSchedule(j.Schedule)
	if err := job.ValidateJob(j); err != nil {
		return job.Job{}, err
	}
	j.Schedule, j.HashedSchedule = job.ResolveSchedule(j.Team, j.Name, j.Schedule)
	return s.store.CreateJob(ctx, j)
}

// GetJob reads the data job name of team.
func (s *Service) GetJob(ctx context.Context, team, name string) (job.Job, error) {
	return s.store.GetJob(ctx, team, name)
}

// UpdateJob replaces the configuration of the job name of team with that of j (VDK's
// PUT: absent fields take their defaults). j's name, when given, must be name; j's team,
// when given, must be the job's team: moving a job is ChangeTeam. The deployment is left
// as it is (VDK's PUT cleared its enabled flag). A change that can affect the CronJob
// bumps the generation and notifies the synchronizer; a description alone does not.
// ifMatch, when not empty, must name the job's current JobETag, checked under the row's
// lock, so that two clients editing one job cannot silently overwrite each other.
func (s *Service) UpdateJob(ctx context.Context, team, name string, j job.Job, ifMatch IfMatch) (job.Job, error) {
	if j.Name == "" {
		j.Name = name
	}
	if j.Name != name {
		return job.Job{}, job.Invalid("job_name", "equal to the job name in the path ("+name+")", quote(j.Name))
	}
	if j.Team == "" {
		j.Team = team
	}
	j.Schedule = job.CleanSchedule(j.Schedule)
	if err := job.ValidateJob(j); err != nil {
		return job.Job{}, err
	}
	j.Schedule, j.HashedSchedule = job.ResolveSchedule(j.Team, j.Name, j.Schedule)
	return s.store.UpdateJob(ctx, team, name, func(cur job.Job) (job.Job, bool, error) {
		if err := ifMatch.check(fmt.Sprintf("The data job %q", name), JobETag(cur)); err != nil {
			return job.Job{}, false, err
		}
		if j.Team != cur.Team {
			e := job.Invalid("team", "the job's team ("+cur.Team+")", quote(j.Team))
			e.Countermeasures = "Leave team out or equal to the current team; to move the job use PUT .../jobs/{job_name}/team/{new_team}."
			return job.Job{}, false, e
		}
		return j, !cur.SameConfig(j), nil
	})
}

// ChangeTeam moves the job name from team to newTeam. The CronJob carries the team in a
// label, so a real move bumps the generation; a move to the same team changes nothing.
func (s *Service) ChangeTeam(ctx context.Context, team, name, newTeam string) (job.Job, error) {
	if err := job.ValidateTeam(newTeam); err != nil {
		return job.Job{}, err
	}
	return s.store.UpdateJob(ctx, team, name, func(cur job.Job) (job.Job, bool, error) {
		next := cur
		next.Team = newTeam
		return next, newTeam != cur.Team, nil
	})
}

// DeleteJob deletes the job name of team, its desired deployment and its properties in
// one transaction. The CronJob is deleted asynchronously by the synchronizer.
func (s *Service) DeleteJob(ctx context.Context, team, name string) error {
	return s.store.DeleteJob(ctx, team, name)
}

func quote(s string) string { return strconv.Quote(s) }
