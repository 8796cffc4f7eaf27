// Package loopback tells whether a host names this machine, for the settings that allow
// plain HTTP only there (an insecure registry, the console's public URL), so that they
// all draw the line in the same place.
package loopback

import "net"

// Host reports whether host (without a port) is "localhost" or a loopback IP address.
func Host(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
