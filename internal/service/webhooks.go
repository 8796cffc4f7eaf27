package service

import (
	"context"

	"github.com/datajobs/datajobs/internal/gitops"
	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/notify/webhook"
	"github.com/datajobs/datajobs/internal/secrets"
)

// Teams' notification webhooks (issue 25). The secret is made here, never given by a
// caller: it is answered once, by the create or the rotation that made it.

const (
	maxWebhookNameLen = 100
	maxWebhookURLLen  = 2048
)

// TeamWebhooks lists team's webhooks, without their secrets.
func (s *Service) TeamWebhooks(ctx context.Context, team string) ([]job.TeamWebhook, error) {
	if job.ValidateTeam(team) != nil {
		return nil, nil
	}
	ws, err := s.store.TeamWebhooks(ctx, team)
	for i := range ws {
		ws[i].Secret, ws[i].SecretWrappedKey = nil, nil
	}
	return ws, err
}

// TeamWebhook returns one of team's webhooks, without its secret.
func (s *Service) TeamWebhook(ctx context.Context, team, id string) (job.TeamWebhook, error) {
	if err := checkWebhookPath(team, id); err != nil {
		return job.TeamWebhook{}, err
	}
	w, err := s.store.TeamWebhook(ctx, team, id)
	w.Secret, w.SecretWrappedKey = nil, nil
	return w, err
}

// CreateTeamWebhook makes a webhook of team with a new secret, which the result holds.
func (s *Service) CreateTeamWebhook(ctx context.Context, team, by string, ch job.TeamWebhookChange) (job.TeamWebhook, error) {
	if err := job.ValidateTeam(team); err != nil {
		return job.TeamWebhook{}, err
	}
	if ch.Name == nil {
		return job.TeamWebhook{}, job.Invalid("name", "given", "absent")
	}
	if ch.URL == nil {
		return job.TeamWebhook{}, job.Invalid("url", "given", "absent")
	}
	gitops.WebhookDefaults(&ch)
	if err := s.validateWebhookChange(&ch); err != nil {
		return job.TeamWebhook{}, err
	}
	secret, err := webhook.GenerateSecret()
	if err != nil {
		return job.TeamWebhook{}, err
	}
	w, err := s.store.CreateTeamWebhook(ctx, job.TeamWebhook{
		Team: team, Name: *ch.Name, URL: *ch.URL, Format: *ch.Format, Events: *ch.Events, CreatedBy: by,
	}, func(id string) (secrets.Envelope, error) { return s.sealWebhookSecret(id, secret) })
	w.Secret, w.SecretWrappedKey = secret, nil
	return w, err
}

// UpdateTeamWebhook changes what ch gives of one of team's webhooks; with RotateSecret a
// new secret replaces the old at once, and the result holds it (else no secret).
func (s *Service) UpdateTeamWebhook(ctx context.Context, team, id, by string, ch job.TeamWebhookChange) (job.TeamWebhook, error) {
	if err := checkWebhookPath(team, id); err != nil {
		return job.TeamWebhook{}, err
	}
	if err := s.validateWebhookChange(&ch); err != nil {
		return job.TeamWebhook{}, err
	}
	var (
		secret []byte
		env    *secrets.Envelope
	)
	if ch.RotateSecret {
		var err error
		if secret, err = webhook.GenerateSecret(); err != nil {
			return job.TeamWebhook{}, err
		}
		sealed, err := s.sealWebhookSecret(id, secret)
		if err != nil {
			return job.TeamWebhook{}, err
		}
		env = &sealed
	}
	w, err := s.store.UpdateTeamWebhook(ctx, team, id, by, ch, env)
	w.Secret, w.SecretWrappedKey = secret, nil
	return w, err
}

// sealWebhookSecret seals the secret of webhook id with the key ring; with none
// configured, it is stored open (key id "") and `datajobs secrets rotate` seals it once
// a key file is.
func (s *Service) sealWebhookSecret(id string, secret []byte) (secrets.Envelope, error) {
	if s.cfg.Keys == nil {
		return secrets.Envelope{Sealed: secret}, nil
	}
	return s.cfg.Keys.Seal(secrets.WebhookOwner(id), secret)
}

// DeleteTeamWebhook deletes one of team's webhooks.
func (s *Service) DeleteTeamWebhook(ctx context.Context, team, id string) error {
	if err := checkWebhookPath(team, id); err != nil {
		return err
	}
	return s.store.DeleteTeamWebhook(ctx, team, id)
}

// checkWebhookPath answers a team or id that no webhook can have as not found, without
// asking the database.
func checkWebhookPath(team, id string) error {
	if job.ValidateTeam(team) != nil || !job.ValidWebhookID(id) {
		return job.WebhookNotFound(team, id)
	}
	return nil
}

// validateWebhookChange checks the fields ch gives, and sorts its events.
func (s *Service) validateWebhookChange(ch *job.TeamWebhookChange) error {
	if ch.Name != nil {
		if *ch.Name == "" {
			return job.Invalid("name", "non-empty", `""`)
		}
		if err := job.ValidateText("name", *ch.Name, maxWebhookNameLen); err != nil {
			return err
		}
	}
	if ch.URL != nil {
		if err := job.ValidateText("url", *ch.URL, maxWebhookURLLen); err != nil {
			return err
		}
		if _, err := webhook.ParseURL(*ch.URL, s.cfg.WebhookAllowPrivate); err != nil {
			e := job.Invalid("url", "", "")
			e.Why = "It must be an http:// or https:// URL of a receiver outside the installation's network, but " + err.Error() + "."
			e.Countermeasures = "Give the URL of a receiver reachable from the internet. An operator can allow private addresses with --notification-webhook-allow-private."
			return e
		}
	}
	if ch.Format != nil && *ch.Format != webhook.FormatStandard && *ch.Format != webhook.FormatSlack {
		return job.Invalid("format", `"standard" or "slack"`, *ch.Format)
	}
	if ch.Events != nil {
		events, err := job.ValidateWebhookEvents(*ch.Events)
		if err != nil {
			return err
		}
		ch.Events = &events
	}
	return nil
}
