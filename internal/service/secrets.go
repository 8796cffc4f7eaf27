package service

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"

	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/secrets"
)

// SecretStore is what the secrets use cases read and write (store.Store implements it).
type SecretStore interface {
	JobSecrets(ctx context.Context, team, name string) (string, *secrets.Envelope, error)
	ReplaceJobSecrets(ctx context.Context, team, name, by string, seal func(uid string, cur *secrets.Envelope) (secrets.Envelope, error)) error
	EnvelopeSamples(ctx context.Context) ([]secrets.Owned, error)
	RewrapEnvelopes(ctx context.Context, newest string, rewrap func(secrets.Owned) (secrets.Envelope, error)) (int, error)
	RetireKeys(ctx context.Context, ids []string, newest string) error
	TeamOAuthStore
}

// DefaultMaxSecretsBytes is VDK's limit of a job's secrets, serialized: 1 MiB.
const DefaultMaxSecretsBytes = 1 << 20

// Secrets runs the use cases of job secrets and team OAuth credentials: it validates,
// seals and opens them with the keyring; the store only ever sees envelopes. A nil
// keyring (no --secrets-key-file, auth mode none) answers 501 saying so.
type Secrets struct {
	store    SecretStore
	keys     *secrets.Keyring
	maxBytes int
}

// NewSecrets returns the secrets use cases on st with keys (nil: not configured);
// maxBytes caps a job's secrets, serialized (0: DefaultMaxSecretsBytes).
func NewSecrets(st SecretStore, keys *secrets.Keyring, maxBytes int) *Secrets {
	return &Secrets{store: st, keys: keys, maxBytes: cmp.Or(max(maxBytes, 0), DefaultMaxSecretsBytes)}
}

// MaxBytes is the largest serialized secrets object a job may have.
func (s *Secrets) MaxBytes() int {
	if s == nil {
		return DefaultMaxSecretsBytes
	}
	return s.maxBytes
}

// JobSecrets returns the secrets of the job name of team, `{}` when none were set. The
// caller is already authorized for the job (a member of team, or the job itself).
func (s *Secrets) JobSecrets(ctx context.Context, team, name string) (map[string]string, error) {
	if err := s.configured(); err != nil {
		return nil, err
	}
	uid, env, err := s.store.JobSecrets(ctx, team, name)
	if err != nil || env == nil {
		return map[string]string{}, err
	}
	plain, err := s.keys.Open(secrets.JobOwner(uid), *env)
	if err != nil {
		return nil, unopened(fmt.Sprintf("the secrets of data job %q", name), err)
	}
	out := map[string]string{}
	if err := json.Unmarshal(plain, &out); err != nil {
		return nil, fmt.Errorf("decode the opened secrets of %s: %w", name, err)
	}
	return out, nil
}

// JobSecretNames returns the names of the secrets of the job name of team, sorted, and
// never their values: what the console shows. The caller is already authorized for the job.
func (s *Secrets) JobSecretNames(ctx context.Context, team, name string) ([]string, error) {
	values, err := s.JobSecrets(ctx, team, name)
	if err != nil {
		return nil, err
	}
	return slices.Sorted(maps.Keys(values)), nil
}

// ReplaceJobSecrets replaces the secrets of the job name of team with body, a JSON object
// of strings (400 otherwise, 413 above MaxBytes serialized), as by. The job keeps its data
// key; values are sealed anew. The caller is already authorized for the job.
func (s *Secrets) ReplaceJobSecrets(ctx context.Context, team, name, by string, body []byte) error {
	if err := s.configured(); err != nil {
		return err
	}
	values, err := DecodeSecrets(body)
	if err != nil {
		return err
	}
	plain, _ := json.Marshal(values)
	if len(plain) > s.maxBytes {
		return secretsTooLarge(len(plain), s.maxBytes)
	}
	return s.store.ReplaceJobSecrets(ctx, team, name, by, func(uid string, cur *secrets.Envelope) (secrets.Envelope, error) {
		owner := secrets.JobOwner(uid)
		if cur == nil {
			return s.keys.Seal(owner, plain)
		}
		env, err := s.keys.Reseal(owner, *cur, plain)
		if err != nil {
			return env, unopened(fmt.Sprintf("the secrets of data job %q", name), err)
		}
		return env, nil
	})
}

// DecodeSecrets parses body as a JSON object of strings. Its errors name keys, never
// values, and never quote the body: a value must not reach a response or a log line.
func DecodeSecrets(body []byte) (map[string]string, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	var raw map[string]json.RawMessage
	if err := dec.Decode(&raw); err != nil || raw == nil || len(bytes.TrimSpace(body[dec.InputOffset():])) > 0 {
		return nil, job.Invalid("secrets", "a JSON object of strings", "a body that is not one (its content is not shown: it may hold secrets)")
	}
	out := make(map[string]string, len(raw))
	var bad []string
	for k, v := range raw {
		var str string
		if len(v) == 0 || v[0] != '"' || json.Unmarshal(v, &str) != nil {
			bad = append(bad, k)
			continue
		}
		out[k] = str
	}
	if len(bad) > 0 {
		sort.Strings(bad)
		return nil, job.Invalid("secrets", "a JSON object of strings", fmt.Sprintf("an object whose value of %q is not a string", bad))
	}
	return out, nil
}

// CheckKeys fails unless the keyring opens a data key of every key id the database uses:
// a database restored without its key file (or with another one) is refused at start-up
// with the ids it needs, instead of answering garbage or 503 later. With no keyring, it
// fails when the database holds any secret at all.
func (s *Secrets) CheckKeys(ctx context.Context) error {
	samples, err := s.store.EnvelopeSamples(ctx)
	if err != nil {
		return err
	}
	var missing []string
	var cause error
	for _, e := range samples {
		if s.keys == nil {
			missing = append(missing, e.KeyID)
			continue
		}
		if err := s.keys.Check(e.Owner, e.Envelope); err != nil {
			missing, cause = append(missing, e.KeyID), err
		}
	}
	if len(missing) == 0 {
		return nil
	}
	sort.Strings(missing)
	if s.keys == nil {
		return fmt.Errorf("the database holds secrets whose data keys are wrapped under the keys %q, and no --secrets-key-file is configured: start with the key file these secrets were written with (docs/operations.md)", missing)
	}
	return fmt.Errorf("the secrets key file %s opens none of the data keys wrapped under the keys %q (%w): this database was written with another key file; start with that key file, or add its keys to this one (docs/operations.md)", s.keys.Path(), missing, cause)
}

// Rotate re-wraps every data key under the keyring's newest key, online: each row in its
// own short transaction; a team webhook's or a trigger's secret stored open (written
// while no keyring was configured) is sealed. It returns how many it re-wrapped; once it returned without an
// error, no data key is wrapped under an older key, nor will be (a replica whose file is
// older fails its secret writes until it reads the new file: it does so by itself on its
// next wrap), and older keys may be removed from the file.
func (s *Secrets) Rotate(ctx context.Context) (int, error) {
	if err := s.configured(); err != nil {
		return 0, err
	}
	newest := s.keys.Newest()
	// The older keys are retired first: a replica whose key file is not updated yet can
	// no longer wrap under one of them once this pass began (issue 41, L7).
	if err := s.store.RetireKeys(ctx, s.keys.IDs(), newest); err != nil {
		return 0, err
	}
	return s.store.RewrapEnvelopes(ctx, newest, func(e secrets.Owned) (secrets.Envelope, error) {
		if e.KeyID == "" { // a webhook or trigger secret written before the key ring: sealed now
			return s.keys.Seal(e.Owner, e.Sealed)
		}
		return s.keys.Rewrap(e.Owner, e.Envelope)
	})
}

func (s *Secrets) configured() error {
	if s == nil || s.keys == nil {
		return job.NewError(job.KindNotImplemented,
			"Secrets are not available on this server.",
			"It was started without a secrets key file (--secrets-key-file), which encrypts them.",
			"The request was not processed and nothing was changed.",
			"Ask the operators to start datajobs with --secrets-key-file (docs/operations.md).",
		)
	}
	return nil
}

// unopened is the answer when the keyring does not open stored secrets: the server's
// key file lacks the key they were written with. It names the key id, never a value.
func unopened(what string, err error) error {
	why := "The secrets key file of this server holds no key that opens them."
	if errors.Is(err, secrets.ErrKeyMissing) {
		why = "They are encrypted under a key that the secrets key file of this server no longer holds."
	}
	return &job.Error{
		Kind:            job.KindUnavailable,
		What:            fmt.Sprintf("Cannot decrypt %s.", what),
		Why:             why,
		Consequences:    "The request was not processed and nothing was changed.",
		Countermeasures: "Ask the operators to restore the key file the secrets were written with (docs/operations.md).",
		Err:             err,
	}
}

func secretsTooLarge(size, limit int) error {
	return job.NewError(job.KindTooLarge,
		"The secrets are too large.",
		fmt.Sprintf("Serialized they take %d bytes, more than the limit of %d bytes (--max-secrets-bytes).", size, limit),
		"The request was not processed and nothing was changed.",
		"Store fewer or smaller secrets, or ask the operators to raise --max-secrets-bytes.",
	)
}
