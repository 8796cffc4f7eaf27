package server_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/auth"
	"github.com/datajobs/datajobs/internal/server"
	"github.com/datajobs/datajobs/internal/testenv"
)

// TestOIDCWithoutSecretsKeyFileRefusesToStart: a server that checks callers must be able
// to encrypt their secrets; it says which flag is missing instead of starting.
func TestOIDCWithoutSecretsKeyFileRefusesToStart(t *testing.T) {
	t.Parallel()
	p := testenv.OIDC(t)
	err := server.Run(t.Context(), server.Config{
		DatabaseURL: testenv.DatabaseURL(t), Listen: "127.0.0.1:0", AdminListen: "127.0.0.1:0", Kubeconfig: testenv.Kubeconfig(t),
		Auth: server.AuthConfig{Mode: server.AuthOIDC, OIDC: auth.OIDCConfig{IssuerURLs: []string{p.IssuerURL}, Audience: testenv.Audience}},
	}, nil)
	require.ErrorContains(t, err, "--secrets-key-file")
}

// TestStartWithADatabaseOfAnotherKeyFileIsRefused: a database restored without its key
// file (another file, or none) is a start-up error naming the key ids it needs, not a
// server that answers garbage or 503 on every secret.
func TestStartWithADatabaseOfAnotherKeyFileIsRefused(t *testing.T) {
	t.Parallel()
	db, ns := testenv.DatabaseURL(t), testenv.Namespace(t)
	keyFile := testenv.SecretsKeyFile(t)
	base, stop, _ := serve(t, server.Config{DatabaseURL: db, Namespace: ns, SyncMode: server.SyncOff, Secrets: server.SecretsConfig{KeyFile: keyFile}})
	c := &caller{t: t, base: base}
	require.Eventually(t, func() bool { code, _ := get(t, base+"/readyz"); return code == http.StatusOK }, 30*time.Second, 50*time.Millisecond)
	c.must("", "POST", "/data-jobs/for-team/team-a/jobs", `{"job_name":"job-of-a","description":"d"}`, http.StatusCreated)
	c.must("", "PUT", "/data-jobs/for-team/team-a/jobs/job-of-a/deployments/release/secrets", `{"k":"v"}`, http.StatusAccepted)
	stop()

	for name, file := range map[string]string{"another key file": testenv.SecretsKeyFile(t), "no key file": ""} {
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		err := server.Run(ctx, server.Config{
			DatabaseURL: db, Namespace: ns, SyncMode: server.SyncOff, Listen: "127.0.0.1:0", AdminListen: "127.0.0.1:0",
			Kubeconfig: testenv.Kubeconfig(t), Auth: server.AuthConfig{Mode: server.AuthNone}, Secrets: server.SecretsConfig{KeyFile: file},
		}, nil)
		cancel()
		require.Error(t, err, name)
		require.NotErrorIs(t, err, context.DeadlineExceeded, "%s: the server must stop by itself", name)
		require.True(t, strings.Contains(err.Error(), "another key file") || strings.Contains(err.Error(), "no --secrets-key-file"), "%s: %v", name, err)
	}
}
