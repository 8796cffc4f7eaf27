package server_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/server"
)

// Attack (issue 22, item 7): auth mode none makes every caller an admin of every team; a
// service started with it on a public address (":8092", what the chart listens on) gave
// that to anyone who can reach it. It is refused unless --listen is a loopback address.
func TestAuthModeNoneIsRefusedOffLoopback(t *testing.T) {
	t.Parallel()
	for _, listen := range []string{":8092", "0.0.0.0:8092", "[::]:8092", "10.1.2.3:8092", "example.com:8092"} {
		cfg := server.Config{Listen: listen, DatabaseURL: "postgres://127.0.0.1:1/none", Auth: server.AuthConfig{Mode: server.AuthNone}}
		err := server.Run(t.Context(), cfg, nil)
		require.ErrorContains(t, err, "not a loopback address", "--listen %s", listen)
	}
}
