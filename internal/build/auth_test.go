package build_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/build"
)

func TestAuthFileKeychainReadsTheDockerConfigFile(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "config.json")
	// "pusher:s3cret" in base64, as `docker login` writes it.
	require.NoError(t, os.WriteFile(path, []byte(`{"auths":{"registry.example.com":{"auth":"cHVzaGVyOnMzY3JldA=="}}}`), 0o600))
	kc, err := build.AuthFileKeychain(path)
	require.NoError(t, err)

	repo, err := name.NewRepository("registry.example.com/datajobs/my-job")
	require.NoError(t, err)
	auth, err := kc.Resolve(repo)
	require.NoError(t, err)
	cfg, err := auth.Authorization()
	require.NoError(t, err)
	assert.Equal(t, "pusher", cfg.Username)
	assert.Equal(t, "s3cret", cfg.Password)

	other, err := name.NewRepository("elsewhere.example.com/x")
	require.NoError(t, err)
	auth, err = kc.Resolve(other)
	require.NoError(t, err)
	assert.Equal(t, authn.Anonymous, auth)

	_, err = build.AuthFileKeychain(filepath.Join(t.TempDir(), "missing.json"))
	require.Error(t, err)
}
