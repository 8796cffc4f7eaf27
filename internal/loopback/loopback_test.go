package loopback_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/loopback"
)

func TestOnlyLocalhostAndLoopbackAddressesNameThisMachine(t *testing.T) {
	t.Parallel()
	for host, want := range map[string]bool{
		"localhost": true, "127.0.0.1": true, "127.10.0.3": true, "::1": true,
		"": false, "10.0.0.1": false, "0.0.0.0": false, "localhost.example.com": false,
		"127.0.0.1.example.com": false, "example.com": false,
	} {
		require.Equal(t, want, loopback.Host(host), "host %q", host)
	}
}
