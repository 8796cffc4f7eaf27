package auth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4"
)

// keySet is an issuer's JSON Web Key Set, fetched on first use and again when a token
// names a key it does not hold (a rotation), but at most once per minInterval. go-oidc's
// RemoteKeySet fetches again for every token it cannot verify, so anyone can make the
// service fetch the issuer's key set once per request by sending tokens with a trusted
// iss and a made-up kid (issue 22). Here a kid the key set does not hold is remembered as
// unknown until the next fetch may happen, a token whose kid the set holds but whose
// signature does not verify is refused without a fetch (a forgery, not a rotation), and
// concurrent requests share one fetch.
type keySet struct {
	url string
	// fetch returns the key set document; default: GET url with client.
	fetch       func(ctx context.Context) ([]byte, error)
	client      *http.Client
	now         func() time.Time
	minInterval time.Duration

	mu        sync.Mutex
	keys      []jose.JSONWebKey
	fetchedAt time.Time            // of the last fetch, successful or not
	fetching  chan struct{}        // closed when the fetch in flight ends; nil: none
	unknown   map[string]time.Time // kid → until when it is refused without a fetch
	fetchErr  error                // of the last fetch
}

// maxUnknownKeys bounds the remembered unknown kids; past it they are forgotten at once
// (the fetch interval bounds the fetches all the same).
const maxUnknownKeys = 10_000

func newKeySet(url string, client *http.Client, now func() time.Time, minInterval time.Duration) *keySet {
	s := &keySet{url: url, client: client, now: now, minInterval: minInterval, unknown: map[string]time.Time{}}
	s.fetch = s.get
	return s
}

// VerifySignature implements oidc.KeySet: it returns the payload of a JWS signed by one
// of the issuer's keys.
func (s *keySet) VerifySignature(ctx context.Context, raw string) ([]byte, error) {
	jws, err := jose.ParseSigned(raw, joseAlgorithms())
	if err != nil {
		return nil, fmt.Errorf("malformed jwt: %w", err)
	}
	if len(jws.Signatures) != 1 {
		return nil, errors.New("a token must carry exactly one signature")
	}
	kid := jws.Signatures[0].Header.KeyID
	keys, err := s.cached(ctx)
	if err != nil {
		return nil, err
	}
	payload, held := verifyWith(jws, keys, kid)
	switch {
	case payload != nil:
		return payload, nil
	case held: // a key the set holds does not verify it: a forgery, not a rotation
		return nil, errors.New("the token's signature does not verify with the issuer's key " + kid)
	}
	keys, fetched, err := s.refetch(ctx, kid)
	if err != nil {
		return nil, err
	}
	if !fetched {
		return nil, errors.New("the token names a key the issuer did not publish (" + kid + ")")
	}
	if payload, _ := verifyWith(jws, keys, kid); payload != nil {
		return payload, nil
	}
	return nil, errors.New("the token's signature does not verify with any key of the issuer")
}

// verifyWith returns the payload of jws verified by the key named kid (any key when kid
// is empty), and whether keys hold such a key at all.
func verifyWith(jws *jose.JSONWebSignature, keys []jose.JSONWebKey, kid string) ([]byte, bool) {
	held := false
	for i := range keys {
		if kid != "" && keys[i].KeyID != kid {
			continue
		}
		held = true
		if payload, err := jws.Verify(&keys[i]); err == nil {
			return payload, true
		}
	}
	return nil, held
}

// cached returns the keys fetched last, fetching them on first use.
func (s *keySet) cached(ctx context.Context) ([]jose.JSONWebKey, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fetchedAt.IsZero() {
		if err := s.fetchLocked(ctx); err != nil {
			return nil, err
		}
	}
	return s.keys, nil
}

// refetch fetches the key set again for a token naming kid, a key the cached set does not
// hold, when that is allowed (mayFetch); fetched is false when it is not. A fetch that
// another request made meanwhile counts: its keys are returned when they hold kid.
func (s *keySet) refetch(ctx context.Context, kid string) (keys []jose.JSONWebKey, fetched bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.holds(kid) {
		return s.keys, true, nil
	}
	if !s.mayFetch(kid) {
		return nil, false, nil
	}
	if err := s.fetchLocked(ctx); err != nil {
		return nil, false, err
	}
	if !s.holds(kid) {
		s.remember(kid)
	}
	return s.keys, true, nil
}

// holds reports whether the cached set has a key named kid ("" matches any key).
func (s *keySet) holds(kid string) bool {
	for _, k := range s.keys {
		if kid == "" || k.KeyID == kid {
			return true
		}
	}
	return false
}

// mayFetch reports whether a fetch for kid is allowed now: the last one is minInterval
// old and kid is not remembered as unknown. A refused kid is remembered, so that the
// next tokens naming it are refused without taking this decision again.
func (s *keySet) mayFetch(kid string) bool {
	now := s.now()
	if until, ok := s.unknown[kid]; ok && now.Before(until) {
		return false
	}
	if now.Sub(s.fetchedAt) < s.minInterval {
		s.remember(kid)
		return false
	}
	return true
}

// remember refuses kid without a fetch until the next fetch is allowed.
func (s *keySet) remember(kid string) {
	if len(s.unknown) >= maxUnknownKeys {
		clear(s.unknown)
	}
	s.unknown[kid] = s.fetchedAt.Add(s.minInterval)
}

// fetchLocked fetches the key set, with s.mu held on entry and on return; requests that
// arrive during the fetch wait for its result instead of fetching again.
func (s *keySet) fetchLocked(ctx context.Context) error {
	if s.fetching == nil {
		done := make(chan struct{})
		s.fetching = done
		s.fetchedAt = s.now()
		s.mu.Unlock()
		keys, err := s.download()
		s.mu.Lock()
		if err == nil {
			s.keys = keys
		}
		s.fetchErr, s.fetching = err, nil
		close(done)
		return err
	}
	wait := s.fetching
	s.mu.Unlock()
	select {
	case <-wait:
	case <-ctx.Done():
		s.mu.Lock()
		return ctx.Err()
	}
	s.mu.Lock()
	return s.fetchErr
}

// download gets and decodes the key set. It does not depend on a request's context: a
// caller that gives up leaves it to finish for the others.
func (s *keySet) download() ([]jose.JSONWebKey, error) {
	timeout := 10 * time.Second
	if s.client != nil && s.client.Timeout > 0 {
		timeout = s.client.Timeout
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	body, err := s.fetch(ctx)
	if err != nil {
		return nil, err
	}
	return decodeKeySet(s.url, body)
}

// get is the default fetch: GET url.
func (s *keySet) get(ctx context.Context) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.url, nil)
	if err != nil {
		return nil, fmt.Errorf("fetch key set %s: %w", s.url, err)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("fetch key set %s: %w", s.url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("fetch key set %s: %w", s.url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("fetch key set %s: status %d", s.url, resp.StatusCode)
	}
	return body, nil
}

// decodeKeySet keeps the public signing keys of a JWKS document.
func decodeKeySet(url string, body []byte) ([]jose.JSONWebKey, error) {
	var raw struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(body, &raw); err != nil {
		return nil, fmt.Errorf("decode key set %s: %w", url, err)
	}
	var keys []jose.JSONWebKey
	for _, r := range raw.Keys {
		var k jose.JSONWebKey
		if json.Unmarshal(r, &k) != nil || !k.Valid() || !k.IsPublic() || (k.Use != "" && k.Use != "sig") {
			continue // a key of a type or use not for verifying tokens
		}
		keys = append(keys, k)
	}
	return keys, nil
}

// joseAlgorithms are SigningAlgorithms as go-jose names them.
func joseAlgorithms() []jose.SignatureAlgorithm {
	out := make([]jose.SignatureAlgorithm, len(SigningAlgorithms))
	for i, a := range SigningAlgorithms {
		out[i] = jose.SignatureAlgorithm(a)
	}
	return out
}
