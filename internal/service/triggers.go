package service

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/secrets"
	"github.com/datajobs/datajobs/internal/trigger"
)

// Triggers (issue 42; docs/triggers.md): the API stores triggers and records the events of
// signed calls; the leader's firer turns events into runs.

// lastEventsShown is how many events a trigger's GET and list show.
const lastEventsShown = 5

// CreateTrigger creates a trigger of team from the POST body raw. A webhook or object
// trigger gets a new signing secret, which the result holds (shown once, stored sealed).
func (s *Service) CreateTrigger(ctx context.Context, team string, raw []byte, caller string) (trigger.Trigger, error) {
	spec, err := trigger.Parse(team, raw)
	if err != nil {
		return trigger.Trigger{}, err
	}
	var secret []byte
	if spec.Signed() {
		secret = trigger.NewSecret()
	}
	t, err := s.store.CreateTrigger(ctx, team, spec, caller, func(id string) (secrets.Envelope, error) {
		return s.sealTriggerSecret(id, secret)
	})
	t.Secret = secret
	return t, err
}

// sealTriggerSecret seals the signing secret of the trigger id with the key ring, bound to
// the id; without a key ring it is kept as it is (key id "").
func (s *Service) sealTriggerSecret(id string, secret []byte) (secrets.Envelope, error) {
	if s.cfg.Keys == nil {
		return secrets.Envelope{Sealed: secret}, nil
	}
	return s.cfg.Keys.Seal(trigger.SecretOwner(id), secret)
}

// GetTrigger reads the trigger name of team with its last events.
func (s *Service) GetTrigger(ctx context.Context, team, name string) (trigger.Trigger, error) {
	return s.store.GetTrigger(ctx, team, name, lastEventsShown)
}

// ListTriggers lists team's triggers by name, each with its last events; target, when not
// empty, keeps those that start the job (or, with pipeline, the pipeline) of that name.
func (s *Service) ListTriggers(ctx context.Context, team, target string, pipeline bool) ([]trigger.Trigger, error) {
	return s.store.ListTriggers(ctx, team, target, pipeline, lastEventsShown)
}

// DeleteTrigger deletes the trigger name of team and its events.
func (s *Service) DeleteTrigger(ctx context.Context, team, name string) error {
	return s.store.DeleteTrigger(ctx, team, name)
}

// ListTriggerEvents reads a page of the events of the trigger name of team of the last 30
// days, newest first.
func (s *Service) ListTriggerEvents(ctx context.Context, team, name string, page, size int) ([]trigger.Event, int, error) {
	page, size, err := Paging(page, size)
	if err != nil {
		return nil, 0, err
	}
	return s.store.ListTriggerEvents(ctx, team, name, page, size)
}

// Invocation is a signed call of a trigger.
type Invocation struct {
	// TriggerID is the path's trigger id.
	TriggerID string
	// Timestamp, Signature and IdempotencyKey are the headers' values.
	Timestamp, Signature, IdempotencyKey string
	// Body is read up to trigger.MaxBodyBytes (413 past it).
	Body io.Reader
}

// InvokeTrigger records the events of a signed call: the trigger must be a webhook or
// object trigger, the body within bounds, the signature right and its timestamp within
// trigger.SkewAllowed of now, the trigger under its events per minute. Nothing is recorded
// otherwise. A webhook call is one event; an object trigger's call (an S3 event
// notification) one per object that matches its bucket and prefix. The key of an event
// is the Idempotency-Key (else the signature, so a replay inside the window is a duplicate
// too).
func (s *Service) InvokeTrigger(ctx context.Context, in Invocation) ([]trigger.EventResult, error) {
	if !job.ValidWebhookID(in.TriggerID) { // a uuid, as a webhook's id
		return nil, trigger.UnknownInvocation()
	}
	t, err := s.store.SignedTriggerOf(ctx, in.TriggerID)
	if err != nil {
		return nil, err
	}
	kind := t.Spec.On.Kind
	events, err := s.signedEvents(t, in)
	if err != nil {
		if k := job.KindOf(err); k == job.KindUnauthenticated || k == job.KindTooLarge || k == job.KindInvalid {
			s.cfg.TriggerMetrics.Add(kind, trigger.Refused, 1)
		}
		return nil, err
	}
	if len(events) == 0 {
		return nil, nil
	}
	res, err := s.store.AddTriggerEvents(ctx, t.ID, events)
	if rl := (*trigger.RateLimited)(nil); errors.As(err, &rl) {
		s.cfg.TriggerMetrics.Add(kind, trigger.Refused, len(events))
	}
	if err != nil {
		return nil, err
	}
	dup := 0
	for _, r := range res {
		if r.Duplicate {
			dup++
		}
	}
	s.cfg.TriggerMetrics.Add(kind, trigger.Deduplicated, dup)
	s.cfg.TriggerMetrics.Add(kind, trigger.Received, len(res)-dup)
	return res, nil
}

// signedEvents reads and checks the call in of the trigger t and returns its events.
func (s *Service) signedEvents(t trigger.Signed, in Invocation) ([]trigger.NewEvent, error) {
	body, err := io.ReadAll(io.LimitReader(in.Body, trigger.MaxBodyBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read invocation of trigger %s: %w", t.ID, err)
	}
	if len(body) > trigger.MaxBodyBytes {
		return nil, trigger.BodyTooLarge()
	}
	secret, err := s.openTriggerSecret(t)
	if err != nil {
		return nil, err
	}
	if err := trigger.Verify(secret, in.Timestamp, in.Signature, body, s.cfg.Now()); err != nil {
		return nil, err
	}
	if len(in.IdempotencyKey) > trigger.MaxIdempotencyKey {
		return nil, job.Invalid(trigger.IdempotencyHeader, fmt.Sprintf("at most %d bytes", trigger.MaxIdempotencyKey), len(in.IdempotencyKey))
	}
	key := "sig:" + in.Signature
	if in.IdempotencyKey != "" {
		key = "key:" + in.IdempotencyKey
	}
	if t.Spec.On.Kind != trigger.Object {
		return []trigger.NewEvent{{Key: key, Source: "webhook"}}, nil
	}
	objects, ok := trigger.ParseObjects(t.Spec.On, body)
	if !ok {
		return nil, job.Invalid("body", "an S3 event notification (an object with Records)", "not one")
	}
	out := make([]trigger.NewEvent, len(objects))
	for i, o := range objects {
		out[i] = trigger.NewEvent{
			Key: key + ":" + strconv.Itoa(i), Source: "object s3://" + o.Bucket + "/" + o.Key, Arguments: trigger.ObjectArgs(o),
		}
	}
	return out, nil
}

// openTriggerSecret opens the signing secret of t (one stored open, key id "", as it is).
func (s *Service) openTriggerSecret(t trigger.Signed) ([]byte, error) {
	if t.Secret.KeyID == "" {
		return t.Secret.Sealed, nil
	}
	if s.cfg.Keys == nil {
		return nil, fmt.Errorf("trigger %s: its secret is sealed under key %s and no --secrets-key-file is configured", t.ID, t.Secret.KeyID)
	}
	secret, err := s.cfg.Keys.Open(trigger.SecretOwner(t.ID), t.Secret)
	if err != nil {
		return nil, fmt.Errorf("trigger %s: %w", t.ID, err)
	}
	return secret, nil
}
