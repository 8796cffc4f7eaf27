package ui

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/datajobs/datajobs/internal/auth"
	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/store"
)

// The console's cookies. In auth mode oidc the session cookie holds only a random id: the
// session itself (who signed in, as the REST API's token verifier saw them, and the CSRF
// token) is a row of the database (Config.Sessions), so sign-out ends it on every replica
// at once. In auth mode none, where everyone is an admin, the session (its CSRF token) is
// sealed into the cookie. The login cookie holds the state and PKCE verifier of a sign-in
// under way, sealed with AES-GCM: the browser can neither read nor change it. No token of
// the identity provider is kept at all. Over TLS the names carry the __Host- prefix: the
// browser then accepts them only with Secure, path / and no Domain, so no other host of
// the domain (a sibling subdomain, a plain-HTTP origin) can set or overwrite them.
const (
	sessionCookie = "datajobs_console"
	loginCookie   = "datajobs_console_login"
	// hostPrefix is the cookie name prefix browsers bind to one secure origin.
	hostPrefix = "__Host-"
	// noAuthUser is who changes things in auth mode none (recorded as deployed_by).
	noAuthUser = "console"
	// csrfHeader carries the CSRF token of htmx requests; forms send the csrf field.
	csrfHeader = "X-CSRF-Token"
)

// session is a signed-in browser.
type session struct {
	User     string   `json:"u"`
	Teams    []string `json:"t,omitempty"`
	Admin    bool     `json:"a,omitempty"`
	Verified bool     `json:"v,omitempty"`
	// Expires is when the session ends (epoch seconds): its token's expiry or the
	// configured maximum age, whichever comes first.
	Expires int64 `json:"e"`
	// CSRF must come back with every action.
	CSRF string `json:"c"`
}

func (s session) identity() auth.Identity {
	return auth.Identity{Username: s.User, Teams: s.Teams, Admin: s.Admin, Verified: s.Verified}
}

// checkCSRF reports whether r carries the session's CSRF token (header or form field).
func (s session) checkCSRF(r *http.Request) bool {
	got := r.Header.Get(csrfHeader)
	if got == "" {
		got = r.PostFormValue("csrf")
	}
	return s.CSRF != "" && subtle.ConstantTimeCompare([]byte(got), []byte(s.CSRF)) == 1
}

// loginState is a sign-in under way.
type loginState struct {
	State    string `json:"s"`
	Verifier string `json:"v"`
	Return   string `json:"r"`
	Expires  int64  `json:"e"`
}

// cookieCodec seals cookie values with AES-256-GCM; the cookie's name is authenticated
// too, so one cookie's value cannot be replayed as another's.
type cookieCodec struct{ aead cipher.AEAD }

func newCookieCodec(key []byte) *cookieCodec {
	k := sha256.Sum256(key)
	block, err := aes.NewCipher(k[:])
	if err != nil {
		panic(err) // a 32-byte key never fails
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		panic(err)
	}
	return &cookieCodec{aead: aead}
}

func (c *cookieCodec) seal(name string, v any) (string, error) {
	plain, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	nonce := make([]byte, c.aead.NonceSize())
	_, _ = rand.Read(nonce)
	return base64.RawURLEncoding.EncodeToString(c.aead.Seal(nonce, nonce, plain, []byte(name))), nil
}

func (c *cookieCodec) open(name, value string, v any) error {
	b, err := base64.RawURLEncoding.DecodeString(value)
	if err != nil || len(b) < c.aead.NonceSize() {
		return errors.New("malformed cookie")
	}
	plain, err := c.aead.Open(nil, b[:c.aead.NonceSize()], b[c.aead.NonceSize():], []byte(name))
	if err != nil {
		return errors.New("cookie does not authenticate")
	}
	return json.Unmarshal(plain, v)
}

// secure reports whether cookies get the Secure attribute and the __Host- prefix: when
// the console is reached over TLS.
func (c *Console) secure(r *http.Request) bool {
	return strings.HasPrefix(c.cfg.PublicURL, "https://") || r.TLS != nil
}

// cookie is the name and path a console cookie has on the wire: __Host- names at path /
// over TLS, plain names at the console's path otherwise.
func (c *Console) cookie(r *http.Request, name string) (wire, path string) {
	if c.secure(r) {
		return hostPrefix + name, "/"
	}
	return name, Prefix
}

// readCookie is the value of the console cookie name, "" without one.
func (c *Console) readCookie(r *http.Request, name string) string {
	wire, _ := c.cookie(r, name)
	ck, err := r.Cookie(wire)
	if err != nil {
		return ""
	}
	return ck.Value
}

func (c *Console) writeCookie(w http.ResponseWriter, r *http.Request, name, value string, expires time.Time) {
	wire, path := c.cookie(r, name)
	http.SetCookie(w, &http.Cookie{
		Name: wire, Value: value, Path: path, Expires: expires, MaxAge: int(time.Until(expires).Seconds()),
		Secure: c.secure(r), HttpOnly: true, SameSite: http.SameSiteLaxMode,
	})
}

func (c *Console) setCookie(w http.ResponseWriter, r *http.Request, name string, v any, expires time.Time) error {
	value, err := c.cookies.seal(name, v)
	if err != nil {
		return err
	}
	c.writeCookie(w, r, name, value, expires)
	return nil
}

func (c *Console) clearCookie(w http.ResponseWriter, r *http.Request, name string) {
	wire, path := c.cookie(r, name)
	http.SetCookie(w, &http.Cookie{Name: wire, Path: path, MaxAge: -1, Secure: c.secure(r), HttpOnly: true, SameSite: http.SameSiteLaxMode})
}

// idHash is what the database keeps of a session id.
func idHash(id string) []byte {
	h := sha256.Sum256([]byte(id))
	return h[:]
}

// current is the request's session, if any: in auth mode oidc the database row its
// cookie names (none when the row is gone: signed out, expired); in auth mode none the
// sealed cookie.
func (c *Console) current(r *http.Request) (session, bool) {
	v := c.readCookie(r, sessionCookie)
	if v == "" {
		return session{}, false
	}
	if c.cfg.Login == nil {
		var s session
		ok := c.cookies.open(sessionCookie, v, &s) == nil && c.cfg.Now().Unix() < s.Expires
		return s, ok
	}
	row, err := c.cfg.Sessions.ConsoleSessionByID(r.Context(), idHash(v))
	if err != nil {
		if !errors.Is(err, store.ErrNoConsoleSession) {
			c.cfg.Logger.ErrorContext(r.Context(), "ui_session_read_failed", "error", err)
		}
		return session{}, false
	}
	return session{
		User: row.Username, Teams: row.Teams, Admin: row.Admin, Verified: row.Verified,
		Expires: row.ExpiresAt.Unix(), CSRF: row.CSRF,
	}, true
}

// session returns the request's session. In auth mode none a browser without one gets
// one at once: an admin, as every REST caller is in that mode.
func (c *Console) session(w http.ResponseWriter, r *http.Request) (session, bool) {
	if s, ok := c.current(r); ok || c.cfg.Login != nil {
		return s, ok
	}
	exp := c.cfg.Now().Add(c.cfg.SessionMaxAge)
	s := session{User: noAuthUser, Admin: true, Expires: exp.Unix(), CSRF: rand.Text()}
	if err := c.setCookie(w, r, sessionCookie, s, exp); err != nil {
		return session{}, false
	}
	return s, true
}

// signIn answers a request without a session: a page is sent to sign in and comes back;
// a fragment makes htmx load the sign-in page instead; an action is refused.
func (c *Console) signIn(w http.ResponseWriter, r *http.Request) {
	back := r.URL.RequestURI()
	if isFragment(r) {
		back = r.Header.Get("HX-Current-URL")
		if u, err := url.Parse(back); err == nil {
			back = u.RequestURI()
		}
	}
	to := Prefix + "login?" + url.Values{"return": {back}}.Encode()
	switch {
	case isFragment(r):
		w.Header().Set("HX-Redirect", to)
		w.WriteHeader(http.StatusUnauthorized)
	case r.Method == http.MethodGet:
		http.Redirect(w, r, to, http.StatusSeeOther)
	default:
		c.fail(w, r, job.Unauthenticated("The console session has ended; sign in again."))
	}
}

// redirectURL is where the identity provider sends the browser back: always under
// --ui-public-url (New requires it with a Login), never a URL made from the request's Host
// header, which the client chooses: a sign-in started through a forged Host would send
// the authorization code to that host.
func (c *Console) redirectURL() string {
	return c.cfg.PublicURL + Prefix + "callback"
}

// safeReturn keeps a return path on the console: never another site.
func safeReturn(p string) string {
	if !strings.HasPrefix(p, Prefix) || strings.HasPrefix(p, "//") || strings.ContainsAny(p, "\\\r\n") {
		return Prefix
	}
	return p
}

// login starts the authorization-code flow with PKCE.
func (c *Console) login(w http.ResponseWriter, r *http.Request, _ session) error {
	if c.cfg.Login == nil {
		http.Redirect(w, r, Prefix, http.StatusSeeOther)
		return nil
	}
	st := loginState{
		State: rand.Text(), Verifier: rand.Text() + rand.Text(), Return: safeReturn(r.URL.Query().Get("return")),
		Expires: c.cfg.Now().Add(10 * time.Minute).Unix(),
	}
	to, err := c.cfg.Login.AuthCodeURL(r.Context(), c.redirectURL(), st.State, st.Verifier)
	if err != nil {
		return err
	}
	if err := c.setCookie(w, r, loginCookie, st, time.Unix(st.Expires, 0)); err != nil {
		return err
	}
	http.Redirect(w, r, to, http.StatusSeeOther)
	return nil
}

// callback ends the flow: the state must be the one this browser started with; the
// code is exchanged (with the PKCE verifier) for a token that is verified as the REST
// API verifies tokens, and the session is made from what it proves.
func (c *Console) callback(w http.ResponseWriter, r *http.Request, _ session) error {
	if c.cfg.Login == nil {
		http.Redirect(w, r, Prefix, http.StatusSeeOther)
		return nil
	}
	now := c.cfg.Now()
	var st loginState
	ck := c.readCookie(r, loginCookie)
	q := r.URL.Query()
	if ck == "" || c.cookies.open(loginCookie, ck, &st) != nil || now.Unix() >= st.Expires ||
		subtle.ConstantTimeCompare([]byte(q.Get("state")), []byte(st.State)) != 1 {
		return job.Unauthenticated("The sign-in did not start in this browser, or took longer than 10 minutes; sign in again.")
	}
	c.clearCookie(w, r, loginCookie)
	if e := q.Get("error"); e != "" {
		return job.Unauthenticated("The identity provider did not sign you in: " + e + ": " + q.Get("error_description"))
	}
	id, expiry, err := c.cfg.Login.Exchange(r.Context(), c.redirectURL(), q.Get("code"), st.Verifier)
	if err != nil {
		return err
	}
	exp := now.Add(c.cfg.SessionMaxAge)
	if !expiry.IsZero() && expiry.Before(exp) {
		exp = expiry
	}
	sid := rand.Text() + rand.Text() // 260 random bits
	err = c.cfg.Sessions.CreateConsoleSession(r.Context(), store.ConsoleSession{
		IDHash: idHash(sid), Username: id.Username, Teams: id.Teams, Admin: id.Admin, Verified: id.Verified,
		CSRF: rand.Text(), ExpiresAt: exp,
	})
	if err != nil {
		return err
	}
	c.writeCookie(w, r, sessionCookie, sid, exp)
	http.Redirect(w, r, st.Return, http.StatusSeeOther)
	return nil
}

// logout ends the session (the identity provider's own session is left alone): in auth
// mode oidc its row is deleted, so the cookie, and any copy of it, signs nobody in on any
// replica from now on.
func (c *Console) logout(w http.ResponseWriter, r *http.Request, _ session) error {
	if s, ok := c.current(r); ok && !s.checkCSRF(r) {
		return job.Forbidden(s.User, "", "The sign-out form's security token is missing or stale.")
	}
	if id := c.readCookie(r, sessionCookie); id != "" && c.cfg.Login != nil {
		if err := c.cfg.Sessions.DeleteConsoleSession(r.Context(), idHash(id)); err != nil {
			return err
		}
	}
	c.clearCookie(w, r, sessionCookie)
	c.renderPage(w, r, http.StatusOK, "signedout", page{Title: "Signed out"})
	return nil
}
