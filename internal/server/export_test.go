package server

import "net/http"

// Patterns are the route patterns of the public and the admin listener, the console and
// profiling on.
func Patterns() (public, admin []string) {
	h, stub := &health{}, http.NotFoundHandler()
	for _, r := range publicRoutes(h, stub, stub) {
		public = append(public, r.pattern)
	}
	for _, r := range adminRoutes(h, stub, stub, true) {
		admin = append(admin, r.pattern)
	}
	return public, admin
}
