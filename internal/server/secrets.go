package server

import (
	"errors"

	"github.com/datajobs/datajobs/internal/secrets"
	"github.com/datajobs/datajobs/internal/service"
	"github.com/datajobs/datajobs/internal/store"
)

// SecretsConfig configures job secrets and team OAuth credentials (docs/operations.md).
type SecretsConfig struct {
	// KeyFile is the keyring file whose keys wrap the data keys of secrets
	// (--secrets-key-file). Required in auth mode oidc; without it (auth mode none) the
	// secrets endpoints answer 501.
	KeyFile string
	// MaxBytes caps a job's secrets, serialized (--max-secrets-bytes, default 1 MiB as VDK).
	MaxBytes int
}

// buildSecrets returns the secrets use cases with keys (loadKeyring). A server that checks
// callers (auth mode oidc) refuses to start without a key file: its secrets would have
// nothing to encrypt them.
func buildSecrets(cfg Config, db *store.Store, keys *secrets.Keyring) (*service.Secrets, error) {
	if keys == nil && cfg.Auth.Mode == AuthOIDC {
		return nil, errors.New("the secrets key file is required in auth mode oidc (--secrets-key-file or DATAJOBS_SECRETS_KEY_FILE; create one with `datajobs secrets add-key --secrets-key-file FILE`, docs/operations.md)")
	}
	return service.NewSecrets(db, keys, cfg.Secrets.MaxBytes), nil
}

// loadKeyring loads the secrets key file, nil when none is configured. The service (team
// webhook secrets), the dispatcher and the synchronizer (the teams' OAuth client secrets for
// their job pods) load their own: a keyring reads the file again when it changes, so each
// sees a key added for a rotation.
func loadKeyring(cfg Config) (*secrets.Keyring, error) {
	if cfg.Secrets.KeyFile == "" {
		return nil, nil
	}
	return secrets.LoadKeyring(cfg.Secrets.KeyFile)
}
