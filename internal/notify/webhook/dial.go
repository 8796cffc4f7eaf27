package webhook

import (
	"fmt"
	"net/netip"
	"strings"
	"syscall"
)

// refused are ranges that IsPrivate and friends do not name but that reach inside an
// installation or no real receiver: shared address space (carrier NAT, some clouds'
// metadata), "this network", IETF protocol assignments, the 6to4 relay, benchmarking,
// reserved; and in IPv6 those that carry an IPv4 address a gateway or the kernel may turn
// back into IPv4 (IPv4-compatible ::/96, SIIT's ::ffff:0:0/96, NAT64, 6to4, Teredo), the
// deprecated site-local prefix, and the discard and documentation prefixes.
var refused = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("100.64.0.0/10"),
	netip.MustParsePrefix("192.0.0.0/24"),
	netip.MustParsePrefix("192.88.99.0/24"),
	netip.MustParsePrefix("198.18.0.0/15"),
	netip.MustParsePrefix("240.0.0.0/4"),
	netip.MustParsePrefix("::/96"),
	netip.MustParsePrefix("::ffff:0:0:0/96"),
	netip.MustParsePrefix("64:ff9b::/96"),
	netip.MustParsePrefix("64:ff9b:1::/48"),
	netip.MustParsePrefix("100::/64"),
	netip.MustParsePrefix("2001::/32"),
	netip.MustParsePrefix("2001:db8::/32"),
	netip.MustParsePrefix("2002::/16"),
	netip.MustParsePrefix("fec0::/10"),
}

// isPrivateAddr reports whether a is an address a webhook must not reach. The zone is
// dropped first: a prefix contains no zoned address, so a NAT64 address with a zone
// (64:ff9b::a00:1%eth0) passed every prefix (issue 41, L4).
func isPrivateAddr(a netip.Addr) bool {
	a = a.WithZone("").Unmap() // ::ffff:127.0.0.1 is 127.0.0.1
	if a.IsLoopback() || a.IsPrivate() || a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast() ||
		a.IsInterfaceLocalMulticast() || a.IsMulticast() || a.IsUnspecified() {
		return true
	}
	for _, p := range refused {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// isPrivateHost reports whether a URL's host is plainly private: "localhost" (and its
// subdomains) or a literal private address.
func isPrivateHost(host string) bool {
	h := strings.ToLower(strings.TrimSuffix(host, "."))
	if h == "localhost" || strings.HasSuffix(h, ".localhost") {
		return true
	}
	a, err := netip.ParseAddr(h)
	return err == nil && isPrivateAddr(a)
}

// refusePrivate is the dialer's Control hook: it runs after name resolution, with the
// address about to be connected, so it sees what the name resolved to at that moment.
func refusePrivate(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: %s is not an ip address", errRefusedAddress, address)
	}
	if isPrivateAddr(ap.Addr()) {
		return fmt.Errorf("%w %s", errRefusedAddress, ap.Addr())
	}
	return nil
}
