package auth_test

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/auth"
	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m, testenv.WithOIDC()) }

func newVerifier(t testing.TB, p *testenv.OIDCProvider, mutate ...func(*auth.OIDCConfig)) *auth.OIDC {
	t.Helper()
	cfg := auth.OIDCConfig{IssuerURLs: []string{p.IssuerURL}, Audience: testenv.Audience, UsernameClaim: "username", AdminTeams: []string{"platform"}}
	for _, m := range mutate {
		m(&cfg)
	}
	v, err := auth.NewOIDC(cfg)
	require.NoError(t, err)
	return v
}

func request(token string) *http.Request {
	r := httptest.NewRequest(http.MethodGet, "/data-jobs/for-team/team-a/jobs/x", nil)
	if token != "" {
		r.Header.Set("Authorization", "Bearer "+token)
	}
	return r
}

// requireKind asserts that err is a domain error of kind k: what the API maps to a status.
func requireKind(t *testing.T, k job.Kind, err error, msg string) {
	t.Helper()
	require.Error(t, err, msg)
	require.Equal(t, k, job.KindOf(err), "%s: %v", msg, err)
}

func TestOIDCAcceptsTheProvidersTokensWithTheirTeams(t *testing.T) {
	t.Parallel()
	p := testenv.OIDC(t)
	v := newVerifier(t, p)

	id, err := v.Authenticate(request(p.ClientToken(t, "bot-a", "team-a", "Team-B")))
	require.NoError(t, err)
	require.Equal(t, "bot-a", id.Username, "the configured username claim (sub is the client id)")
	require.Equal(t, []string{"team-a", "team-b"}, id.Teams, "teams compare in lower case")
	require.False(t, id.Admin)

	admin, err := v.Authenticate(request(p.ClientToken(t, "ops", "platform")))
	require.NoError(t, err)
	require.True(t, admin.Admin, "a member of an admin team")

	user := p.UserRefreshToken(t, "alice", "team-c")
	id, err = v.Authenticate(request(user.AccessToken))
	require.NoError(t, err)
	require.Equal(t, "alice", id.Username)
	require.Equal(t, []string{"team-c"}, id.Teams)
}

func TestOIDCUsernameDefaultsToSub(t *testing.T) {
	t.Parallel()
	p := testenv.OIDC(t)
	v := newVerifier(t, p, func(c *auth.OIDCConfig) { c.UsernameClaim = "" })
	c := p.NewClient(t, "bot-a", "team-a")
	id, err := v.Authenticate(request(p.Token(t, c)))
	require.NoError(t, err)
	require.Equal(t, c.ID, id.Username, "sub of a client-credentials token is the client id")
}

func TestOIDCRefusesBadTokens(t *testing.T) {
	t.Parallel()
	p := testenv.OIDC(t)
	v := newVerifier(t, p)
	good := p.ClientToken(t, "bot-a", "team-a")
	_, err := v.Authenticate(request(good))
	require.NoError(t, err)

	header, _, _ := strings.Cut(good, ".")
	var hdr struct {
		Kid string `json:"kid"`
	}
	require.NoError(t, json.Unmarshal(decode(t, header), &hdr))
	claims := map[string]any{
		"iss": p.IssuerURL, "aud": []string{testenv.Audience}, "sub": "mallory", "username": "mallory",
		"groups": []string{"team-a"}, "exp": time.Now().Add(time.Hour).Unix(), "iat": time.Now().Unix(),
	}
	otherKey, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)

	tests := []struct {
		name  string
		token string
	}{
		{"no token", ""},
		{"a token that is not a JWT", "not-a-jwt"},
		{"a JWT whose payload is not JSON", "eyJhbGciOiJSUzI1NiJ9.bm90LWpzb24.c2ln"},
		{"a good token with a byte of its signature changed", flipLastByte(good)},
		{"a token of an issuer not configured", signRS256(t, otherKey, "k1", with(claims, "iss", "http://127.0.0.1:1/"))},
		{"a token signed by a key the issuer does not have, under its kid", signRS256(t, otherKey, hdr.Kid, claims)},
		{"a token signed by a key the issuer does not have, under a new kid", signRS256(t, otherKey, "unknown-kid", claims)},
		{"alg none", unsigned(t, claims)},
		{"HS256 keyed with the issuer's public key", hs256WithPublicKey(t, p, hdr.Kid, claims)},
		{"a token for another audience", signRS256(t, otherKey, hdr.Kid, with(claims, "aud", []string{"other"}))},
	}
	for _, tt := range tests {
		_, err := v.Authenticate(request(tt.token))
		requireKind(t, job.KindUnauthenticated, err, tt.name)
	}

	// Hydra's own tokens, judged by verifiers that expect something else.
	wrongAudience := newVerifier(t, p, func(c *auth.OIDCConfig) { c.Audience = "another-service" })
	_, err = wrongAudience.Authenticate(request(good))
	requireKind(t, job.KindUnauthenticated, err, "a token for another audience")

	later := newVerifier(t, p, func(c *auth.OIDCConfig) { c.Now = func() time.Time { return time.Now().Add(2 * time.Hour) } })
	_, err = later.Authenticate(request(good))
	requireKind(t, job.KindUnauthenticated, err, "an expired token")
	var de *job.Error
	require.ErrorAs(t, err, &de)
	require.Contains(t, de.Why, "expired")

	skew := newVerifier(t, p, func(c *auth.OIDCConfig) {
		c.Now = func() time.Time { return time.Now().Add(time.Hour + 10*time.Second) }
	})
	_, err = skew.Authenticate(request(good))
	require.NoError(t, err, "a token expired by less than the clock skew is still good")

	// A remembered token is still refused once expired.
	clock := time.Now()
	cached := newVerifier(t, p, func(c *auth.OIDCConfig) { c.Now = func() time.Time { return clock } })
	_, err = cached.Authenticate(request(good))
	require.NoError(t, err)
	clock = clock.Add(2 * time.Hour)
	_, err = cached.Authenticate(request(good))
	requireKind(t, job.KindUnauthenticated, err, "an expired token the verifier remembers")

	noTeams := newVerifier(t, p, func(c *auth.OIDCConfig) { c.UsernameClaim = "email" })
	_, err = noTeams.Authenticate(request(good))
	requireKind(t, job.KindUnauthenticated, err, "a token without the username claim")
}

func TestOIDCPicksUpARotatedKeyWithoutRestart(t *testing.T) {
	p := testenv.OIDC(t) // not parallel: the new key signs every later token
	clock := time.Now()
	v := newVerifier(t, p, func(c *auth.OIDCConfig) { c.Now = func() time.Time { return clock } })
	before := p.ClientToken(t, "bot-a", "team-a")
	_, err := v.Authenticate(request(before))
	require.NoError(t, err)

	p.RotateKey(t)
	// The key set is fetched again at most once per KeySetMinInterval (30s): a rotation
	// right after the first fetch is seen once that has passed.
	clock = clock.Add(31 * time.Second)
	after := p.ClientToken(t, "bot-a", "team-a")
	require.NotEqual(t, kid(t, before), kid(t, after), "the provider signs with the new key")
	id, err := v.Authenticate(request(after))
	require.NoError(t, err, "the verifier fetches the key set again for an unknown kid")
	require.Equal(t, "bot-a", id.Username)
}

func TestOIDCSeveralIssuersAndOneDown(t *testing.T) {
	t.Parallel()
	p := testenv.OIDC(t)
	down := "http://127.0.0.1:1"
	v := newVerifier(t, p, func(c *auth.OIDCConfig) { c.IssuerURLs = []string{down, p.IssuerURL} })
	_, err := v.Authenticate(request(p.ClientToken(t, "bot-a", "team-a")))
	require.NoError(t, err, "a token of a reachable issuer passes while another is down")

	key, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	_, err = v.Authenticate(request(signRS256(t, key, "k", map[string]any{"iss": down, "aud": testenv.Audience, "sub": "x", "exp": time.Now().Add(time.Hour).Unix()})))
	requireKind(t, job.KindUnavailable, err, "the issuer of the token cannot be discovered")
}

func TestOIDCRefusesToStartWithoutIssuer(t *testing.T) {
	t.Parallel()
	_, err := auth.NewOIDC(auth.OIDCConfig{})
	require.ErrorContains(t, err, "--oidc-issuer-url")
}

func with(claims map[string]any, k string, v any) map[string]any {
	out := map[string]any{}
	for key, val := range claims {
		out[key] = val
	}
	out[k] = v
	return out
}

func decode(t *testing.T, s string) []byte {
	t.Helper()
	b, err := base64.RawURLEncoding.DecodeString(s)
	require.NoError(t, err)
	return b
}

func kid(t *testing.T, token string) string {
	t.Helper()
	header, _, _ := strings.Cut(token, ".")
	var h struct {
		Kid string `json:"kid"`
	}
	require.NoError(t, json.Unmarshal(decode(t, header), &h))
	return h.Kid
}

func flipLastByte(token string) string {
	b := []byte(token)
	if b[len(b)-2] == 'A' {
		b[len(b)-2] = 'B'
	} else {
		b[len(b)-2] = 'A'
	}
	return string(b)
}

func signRS256(t *testing.T, key *rsa.PrivateKey, kid string, claims map[string]any) string {
	t.Helper()
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: key},
		(&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", kid))
	require.NoError(t, err)
	payload, err := json.Marshal(claims)
	require.NoError(t, err)
	jws, err := signer.Sign(payload)
	require.NoError(t, err)
	s, err := jws.CompactSerialize()
	require.NoError(t, err)
	return s
}

func segment(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return base64.RawURLEncoding.EncodeToString(b)
}

func unsigned(t *testing.T, claims map[string]any) string {
	t.Helper()
	return segment(t, map[string]string{"alg": "none", "typ": "JWT"}) + "." + segment(t, claims) + "."
}

// hs256WithPublicKey is the classic confusion attack: an HMAC keyed with the issuer's
// public key, which anyone can fetch from its JWKS.
func hs256WithPublicKey(t *testing.T, p *testenv.OIDCProvider, kid string, claims map[string]any) string {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, p.IssuerURL+"/.well-known/jwks.json", nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var set jose.JSONWebKeySet
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&set))
	keys := set.Key(kid)
	require.NotEmpty(t, keys)
	der, err := x509.MarshalPKIXPublicKey(keys[0].Key)
	require.NoError(t, err)
	secret := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
	input := segment(t, map[string]string{"alg": "HS256", "typ": "JWT", "kid": kid}) + "." + segment(t, claims)
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte(input))
	return input + "." + base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

// BenchmarkOIDCAuthenticate is the cost authentication adds to a request: a token of the
// real provider (RS256, Hydra's 4096-bit key) verified with the cached key set, and the
// same token remembered from an earlier request.
func BenchmarkOIDCAuthenticate(b *testing.B) {
	p := testenv.OIDC(b)
	r := httptest.NewRequest(http.MethodGet, "/data-jobs/for-team/team-a/jobs/x", nil)
	r.Header.Set("Authorization", "Bearer "+p.ClientToken(b, "bot-a", "team-a"))
	for _, bc := range []struct {
		name string
		ttl  time.Duration
	}{{"signature", -1}, {"remembered", time.Minute}} {
		b.Run(bc.name, func(b *testing.B) {
			v, err := auth.NewOIDC(auth.OIDCConfig{IssuerURLs: []string{p.IssuerURL}, Audience: testenv.Audience, CacheTTL: bc.ttl})
			require.NoError(b, err)
			_, err = v.Authenticate(r)
			require.NoError(b, err)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := v.Authenticate(r); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
