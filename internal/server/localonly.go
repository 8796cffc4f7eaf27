package server

import (
	"net"
	"net/http"
	"net/url"
	"strings"
)

// localOnly guards the public handler of auth mode none, which trusts every caller as an
// admin (issue 41, M3), and an admin listener on loopback, which has no authentication. That trust is for the programs of this machine (vdkcli, curl, the
// console in its own tab), but every web page the developer's browser opens can send
// requests to loopback too. So it refuses, with 403:
//   - a Host that is no loopback name or address: a page whose name its owner re-pointed
//     at 127.0.0.1 (DNS rebinding) could otherwise read the answers, secrets included, as
//     its own origin;
//   - a request whose Origin is another origin, and a cross-origin request that changes
//     something (net/http's CrossOriginProtection, by Sec-Fetch-Site or Origin): a form of
//     another site, posted with a body or without, or from a sandboxed frame (Origin null).
//
// Programs send a loopback Host and no Origin; the console's own requests are same-origin.
// The real node's pods come through dev's forward, which sends the API's own Host.
func localOnly(next http.Handler) http.Handler {
	crossOrigin := http.NewCrossOriginProtection()
	crossOrigin.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "cross-origin request refused: auth mode none serves only the programs of this machine and pages of its own origin", http.StatusForbidden)
	}))
	guarded := crossOrigin.Handler(next)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !loopbackHost(r.Host) {
			http.Error(w, "host "+r.Host+" refused: auth mode none answers only to a loopback name or address (localhost, 127.0.0.1, [::1])", http.StatusForbidden)
			return
		}
		if !sameOrigin(r) {
			http.Error(w, "origin "+r.Header.Get("Origin")+" refused: auth mode none serves only pages of its own origin", http.StatusForbidden)
			return
		}
		guarded.ServeHTTP(w, r)
	})
}

// loopbackHost reports whether a Host header names this machine whatever DNS says:
// localhost and its subdomains (browsers resolve them to loopback themselves, RFC 6761),
// or a loopback address. A name an outsider controls is never one of them.
func loopbackHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.ToLower(strings.Trim(host, "[]")), ".")
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// sameOrigin reports whether r has no Origin (programs, and a browser's own navigations
// and same-origin reads) or an Origin of r's own host.
func sameOrigin(r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return true
	}
	u, err := url.Parse(origin)
	return err == nil && u.Host == r.Host
}
