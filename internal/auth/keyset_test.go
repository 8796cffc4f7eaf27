package auth_test

import (
	"crypto/rand"
	"crypto/rsa"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/auth"
	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/testenv"
)

// countingTransport counts the requests for the issuer's key set (Hydra's
// /.well-known/jwks.json) that pass through it to the real provider.
type countingTransport struct{ keySetFetches atomic.Int32 }

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if strings.HasSuffix(r.URL.Path, "/jwks.json") {
		c.keySetFetches.Add(1)
	}
	return http.DefaultTransport.RoundTrip(r)
}

// Attack (issue 22, item 7): tokens with the trusted iss and a made-up kid, which anyone
// can mint. go-oidc fetched the issuer's key set once for each (200 requests, 200 fetches
// of Hydra's JWKS). Now a fetch happens at most once per KeySetMinInterval per issuer,
// and a kid the set lacks is remembered.
func TestOIDCForgedKidsDoNotFetchTheKeySetOnceEach(t *testing.T) {
	t.Parallel()
	p := testenv.OIDC(t)
	counter := &countingTransport{}
	var mu sync.Mutex
	clock := time.Now()
	now := func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
	v := newVerifier(t, p, func(c *auth.OIDCConfig) {
		c.HTTPClient = &http.Client{Timeout: 10 * time.Second, Transport: counter}
		c.Now = now
		c.CacheTTL = -1
	})
	good := p.ClientToken(t, "bot-a", "team-a")
	_, err := v.Authenticate(request(good))
	require.NoError(t, err)
	require.Equal(t, int32(1), counter.keySetFetches.Load(), "the key set is fetched on first use")

	key, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	claims := map[string]any{
		"iss": p.IssuerURL, "aud": []string{testenv.Audience}, "sub": "mallory", "username": "mallory",
		"groups": []string{"team-a"}, "exp": time.Now().Add(time.Hour).Unix(),
	}
	forged := make([]string, 200)
	for i := range forged {
		forged[i] = signRS256(t, key, "forged-"+rand.Text(), claims)
	}
	mu.Lock()
	clock = clock.Add(31 * time.Second) // past the interval: one fetch is allowed again
	mu.Unlock()
	// Half one after the other (go-oidc fetched once for each), half at once (it shared
	// fetches in flight, but still fetched again and again).
	kinds := make([]job.Kind, len(forged))
	for i, tok := range forged[:100] {
		_, err := v.Authenticate(request(tok))
		kinds[i] = job.KindOf(err)
	}
	var wg sync.WaitGroup
	for i, tok := range forged[100:] {
		wg.Go(func() {
			_, err := v.Authenticate(request(tok))
			kinds[100+i] = job.KindOf(err)
		})
	}
	wg.Wait()
	for _, k := range kinds {
		require.Equal(t, job.KindUnauthenticated, k, "a forged token is refused")
	}
	require.LessOrEqual(t, counter.keySetFetches.Load(), int32(2), "200 forged kids, at most one more fetch")

	// A token signed by a key the set holds under its kid, but forged, makes no fetch.
	mu.Lock()
	clock = clock.Add(time.Minute)
	mu.Unlock()
	before := counter.keySetFetches.Load()
	_, err = v.Authenticate(request(signRS256(t, key, kid(t, good), claims)))
	requireKind(t, job.KindUnauthenticated, err, "a forged token under the issuer's kid")
	require.Equal(t, before, counter.keySetFetches.Load(), "a held kid that does not verify is a forgery, not a rotation")

	_, err = v.Authenticate(request(good))
	require.NoError(t, err, "the issuer's real tokens still pass")
}
