package service

import (
	"context"

	"github.com/datajobs/datajobs/internal/job"
)

// Execution profiles (issue 43, docs/profiles.md). Who may manage them (the admin teams)
// is the API's rule; the service validates them and checks a deployment's grant.

// PutProfile validates p by Kubernetes' rules and stores it; a change of what it renders
// re-renders every deployment that selects it (store.PutProfile).
func (s *Service) PutProfile(ctx context.Context, p job.Profile) (job.ProfileChange, error) {
	if err := p.Validate(); err != nil {
		return job.ProfileChange{}, err
	}
	if p.Name == job.DefaultProfile && !p.Grants("*") {
		return job.ProfileChange{}, job.Invalid("teams", `["*"] on the default profile, which every deployment that names none selects`, p.Teams)
	}
	ch, err := s.store.PutProfile(ctx, p)
	if err != nil {
		return job.ProfileChange{}, err
	}
	rec, err := s.store.GetProfile(ctx, p.Name)
	if err != nil {
		return job.ProfileChange{}, err
	}
	ch.Record = rec
	return ch, nil
}

// GetProfile reads the profile name.
func (s *Service) GetProfile(ctx context.Context, name string) (job.ProfileRecord, error) {
	return s.store.GetProfile(ctx, name)
}

// ListProfiles reads every profile.
func (s *Service) ListProfiles(ctx context.Context) ([]job.ProfileRecord, error) {
	return s.store.ListProfiles(ctx)
}

// DeleteProfile deletes the profile name (409 while a deployment selects it).
func (s *Service) DeleteProfile(ctx context.Context, name string) error {
	return s.store.DeleteProfile(ctx, name)
}

// ProfileRevisions reads the revisions of the profile name, newest first.
func (s *Service) ProfileRevisions(ctx context.Context, name string) ([]job.ProfileRevision, error) {
	return s.store.ProfileRevisions(ctx, name)
}

// grantedProfile reads the profile name and checks that team may select it (403 naming
// it otherwise; 404 when there is none).
func (s *Service) grantedProfile(ctx context.Context, user, team, name string) (*job.Profile, error) {
	rec, err := s.store.GetProfile(ctx, name)
	if err != nil {
		return nil, err
	}
	if !rec.Profile.Grants(team) {
		return nil, job.ProfileNotGranted(user, team, name)
	}
	return &rec.Profile, nil
}
