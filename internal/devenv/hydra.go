package devenv

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// HydraDatabaseName is the database Hydra keeps its state in, on the environment's
// PostgreSQL.
const HydraDatabaseName = "hydra"

// HydraBinary returns the hydra binary that hack/hydra/build.sh built into the checkout,
// or "" when there is none.
func HydraBinary() string {
	root, err := RepoRoot()
	if err != nil {
		return ""
	}
	bin := filepath.Join(root, ".cache", "hydra-bin", "hydra")
	if !isFile(bin) {
		return ""
	}
	return bin
}

// HydraConfig configures an Ory Hydra OAuth2/OIDC server for dev mode and the tests.
type HydraConfig struct {
	// Bin is the hydra binary (hack/hydra/build.sh builds it). Required.
	Bin string
	// PostgresURL is a superuser URL of the PostgreSQL server; Hydra gets its own
	// database there. Required.
	PostgresURL string
	// Dir holds Hydra's system secret and its log. Required.
	Dir string
	// Logger receives the component's own logs (default: discarded).
	Logger *slog.Logger
}

// Hydra is a running Hydra (`hydra serve all --dev`, plain HTTP on 127.0.0.1) that issues
// JWT access tokens, plus the token hook that puts a client's teams and username into its
// tokens: a client created with metadata {"teams": [...], "username": "..."} gets
// top-level "groups" and "username" claims. Users' claims come from the session their
// consent was accepted with.
type Hydra struct {
	*Process
	// IssuerURL is the public URL: discovery, JWKS, /oauth2/token, /oauth2/auth.
	IssuerURL string
	// AdminURL is the admin API: clients, keys, login and consent requests.
	AdminURL string

	hook     *http.Server
	hookDone chan struct{}
	stopOnce sync.Once
	stopErr  error
}

// StartHydra migrates Hydra's database and starts it with its token hook, on free ports.
func StartHydra(ctx context.Context, cfg HydraConfig) (*Hydra, error) {
	if cfg.Bin == "" || cfg.PostgresURL == "" || cfg.Dir == "" {
		return nil, errors.New("start hydra: Bin, PostgresURL and Dir are required")
	}
	logger := cmp.Or(cfg.Logger, slog.New(slog.DiscardHandler))
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("start hydra: %w", err)
	}
	if err := ensureDatabase(ctx, cfg.PostgresURL, HydraDatabaseName); err != nil {
		return nil, fmt.Errorf("start hydra: create its database: %w", err)
	}
	secret, err := hydraSecret(filepath.Join(cfg.Dir, "system-secret"))
	if err != nil {
		return nil, err
	}
	u, err := url.Parse(cfg.PostgresURL)
	if err != nil {
		return nil, fmt.Errorf("start hydra: postgres url: %w", err)
	}
	u.Path = "/" + HydraDatabaseName
	dsn := u.String()
	logPath := filepath.Join(cfg.Dir, "hydra.log")

	migrate := exec.CommandContext(ctx, cfg.Bin, "migrate", "sql", "up", "-e", "--yes")
	migrate.Env = append(os.Environ(), "DSN="+dsn)
	if out, err := migrate.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("hydra migrate sql up: %w: %s", err, tailString(string(out), 2000))
	}

	publicPort, err := freePort()
	if err != nil {
		return nil, err
	}
	adminPort, err := freePort()
	if err != nil {
		return nil, err
	}
	hookLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("start hydra token hook: %w", err)
	}
	h := &Hydra{hookDone: make(chan struct{})}
	h.hook = &http.Server{Handler: http.HandlerFunc(h.tokenHook), ReadHeaderTimeout: 10 * time.Second}
	go func() { // owned by h: Stop shuts the server down and waits for hookDone
		defer close(h.hookDone)
		_ = h.hook.Serve(hookLn)
	}()

	hydraEnv := func() []string {
		h.IssuerURL = "http://127.0.0.1:" + strconv.Itoa(publicPort)
		h.AdminURL = "http://127.0.0.1:" + strconv.Itoa(adminPort)
		return append(os.Environ(),
			"DSN="+dsn,
			"SECRETS_SYSTEM="+secret,
			"URLS_SELF_ISSUER="+h.IssuerURL,
			// Hydra redirects browsers there; the tests read the challenge from the redirect
			// and accept it through the admin API instead.
			"URLS_LOGIN=http://127.0.0.1:1/login", "URLS_CONSENT=http://127.0.0.1:1/consent",
			"SERVE_PUBLIC_HOST=127.0.0.1", "SERVE_PUBLIC_PORT="+strconv.Itoa(publicPort),
			"SERVE_ADMIN_HOST=127.0.0.1", "SERVE_ADMIN_PORT="+strconv.Itoa(adminPort),
			"STRATEGIES_ACCESS_TOKEN=jwt",
			"OAUTH2_TOKEN_HOOK_URL=http://"+hookLn.Addr().String()+"/token-hook",
			"OAUTH2_ALLOWED_TOP_LEVEL_CLAIMS=groups,username",
			"OAUTH2_MIRROR_TOP_LEVEL_CLAIMS=false",
			"LOG_LEAK_SENSITIVE_VALUES=false",
		)
	}
	h.Process = newProcess("hydra", logPath, processSpec{
		path: cfg.Bin,
		args: []string{"serve", "all", "--dev"},
		dir:  cfg.Dir,
		ready: func(ctx context.Context) error {
			return httpOK(ctx, h.AdminURL+"/health/ready")
		},
		picked:    []*int{&publicPort, &adminPort},
		configure: func(s *processSpec) error { s.env = hydraEnv(); return nil },
	}, logger)
	if err := h.Start(ctx); err != nil {
		return nil, errors.Join(err, h.stopHook())
	}
	if err := h.makeKeys(ctx); err != nil {
		return nil, errors.Join(err, h.Stop())
	}
	return h, nil
}

// makeKeys has Hydra make its signing keys now: it makes them on first use, which takes
// many seconds of RSA key generation on a busy machine, longer than a verifier's discovery
// or a test's token request should wait.
func (h *Hydra) makeKeys(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	// Hydra drops a request that outlives its write timeout (10s) but goes on making the
	// key: ask again until it answers.
	retry := func(what string, f func() error) error {
		for {
			err := f()
			if err == nil {
				return nil
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("hydra: make the %s keys: %w", what, err)
			case <-time.After(time.Second):
			}
		}
	}
	if err := retry("id-token", func() error { return httpOK(ctx, h.IssuerURL+"/.well-known/openid-configuration") }); err != nil {
		return err
	}
	return retry("access-token", func() error {
		if httpOK(ctx, h.AdminURL+"/admin/keys/hydra.jwt.access-token") == nil {
			return nil // made by an earlier attempt or run
		}
		return httpPost(ctx, h.AdminURL+"/admin/keys/hydra.jwt.access-token", `{"alg":"RS256","use":"sig"}`)
	})
}

// Stop stops Hydra and its token hook.
func (h *Hydra) Stop() error {
	h.stopOnce.Do(func() { h.stopErr = errors.Join(h.Process.Stop(), h.stopHook()) })
	return h.stopErr
}

func (h *Hydra) stopHook() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := h.hook.Shutdown(ctx)
	<-h.hookDone
	return err
}

// tokenHook answers Hydra's token hook: a client's metadata teams and username become
// the token's groups and username claims. Other tokens (users') are left as they are.
func (h *Hydra) tokenHook(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Request struct {
			ClientID string `json:"client_id"`
		} `json:"request"`
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&req); err != nil || req.Request.ClientID == "" {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	hr, err := http.NewRequestWithContext(ctx, http.MethodGet, h.AdminURL+"/admin/clients/"+url.PathEscape(req.Request.ClientID), nil)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	resp, err := http.DefaultClient.Do(hr)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	var client struct {
		Metadata struct {
			Teams    []string `json:"teams"`
			Username string   `json:"username"`
		} `json:"metadata"`
	}
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&client) != nil || client.Metadata.Teams == nil {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	claims := map[string]any{"groups": client.Metadata.Teams}
	if client.Metadata.Username != "" {
		claims["username"] = client.Metadata.Username
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"session": map[string]any{"access_token": claims}})
}

// hydraSecret returns the system secret kept in path, making one on first use: keys and
// tokens survive a restart of the same state folder.
func hydraSecret(path string) (string, error) {
	if b, err := os.ReadFile(path); err == nil && len(strings.TrimSpace(string(b))) >= 32 {
		return strings.TrimSpace(string(b)), nil
	}
	secret := rand.Text() + rand.Text()
	if err := os.WriteFile(path, []byte(secret+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("hydra system secret: %w", err)
	}
	return secret, nil
}

// httpOK returns nil when GET url answers 200.
func httpOK(ctx context.Context, u string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", u, resp.Status)
	}
	return nil
}

// httpPost returns nil when POST url with a JSON body answers 2xx.
func httpPost(ctx context.Context, u, body string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, strings.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("POST %s: %s", u, resp.Status)
	}
	return nil
}

func tailString(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
