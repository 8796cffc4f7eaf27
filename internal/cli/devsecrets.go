package cli

import (
	"context"
	"errors"
	"os"
	"path/filepath"

	"github.com/datajobs/datajobs/internal/secrets"
)

type devSecretsKey struct{}

// withDevSecrets makes sure the dev state folder has a secrets keyring file (made once,
// kept with the database it encrypts) and passes its path to the dev server.
func withDevSecrets(ctx context.Context, stateDir string) (context.Context, error) {
	path := filepath.Join(stateDir, "secrets-keys.json")
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		if _, err := secrets.AddKey(path); err != nil {
			return ctx, err
		}
	} else if err != nil {
		return ctx, err
	}
	return context.WithValue(ctx, devSecretsKey{}, path), nil
}

// devSecretsKeyFile is the keyring file withDevSecrets made, or "".
func devSecretsKeyFile(ctx context.Context) string {
	path, _ := ctx.Value(devSecretsKey{}).(string)
	return path
}
