package build

import (
	"fmt"
	"os"

	"github.com/docker/cli/cli/config"
	"github.com/docker/cli/cli/config/configfile"
	"github.com/docker/cli/cli/config/types"
	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
)

// AuthFileKeychain reads registry credentials from a Docker config file (the
// --registry-auth-file, e.g. a mounted kubernetes.io/dockerconfigjson secret), the way
// go-containerregistry's default keychain reads ~/.docker/config.json, without looking at
// the process's home or environment. The file is read once, at start.
func AuthFileKeychain(path string) (authn.Keychain, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("registry auth file: %w", err)
	}
	defer f.Close()
	cf, err := config.LoadFromReader(f)
	if err != nil {
		return nil, fmt.Errorf("registry auth file %s: %w", path, err)
	}
	return fileKeychain{cf: cf}, nil
}

type fileKeychain struct {
	cf *configfile.ConfigFile
}

// Resolve implements authn.Keychain: the entry of the repository, then of its registry.
func (k fileKeychain) Resolve(target authn.Resource) (authn.Authenticator, error) {
	var empty types.AuthConfig
	for _, key := range []string{target.String(), target.RegistryStr()} {
		if key == name.DefaultRegistry {
			key = authn.DefaultAuthKey
		}
		cfg, err := k.cf.GetAuthConfig(key)
		if err != nil {
			return nil, err
		}
		cfg.ServerAddress = ""
		if cfg != empty {
			return authn.FromConfig(authn.AuthConfig{
				Username: cfg.Username, Password: cfg.Password, Auth: cfg.Auth,
				IdentityToken: cfg.IdentityToken, RegistryToken: cfg.RegistryToken,
			}), nil
		}
	}
	return authn.Anonymous, nil
}
