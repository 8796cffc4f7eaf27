package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/datajobs/datajobs/internal/store"
	"github.com/spf13/pflag"

	"github.com/datajobs/datajobs/internal/secrets"
	"github.com/datajobs/datajobs/internal/server"
	"github.com/datajobs/datajobs/internal/service"
)

// registerSecretsFlags: job secrets and team OAuth credentials (issue 26, docs/operations.md).
func registerSecretsFlags(f *pflag.FlagSet, cfg *server.Config) {
	addSecretsKeyFile(f, &cfg.Secrets.KeyFile, "keyring file whose newest key encrypts the data keys of secrets (required in auth mode oidc; `datajobs secrets add-key` makes one)")
	f.IntVar(&cfg.Secrets.MaxBytes, "max-secrets-bytes", service.DefaultMaxSecretsBytes, "largest serialized secrets object of one job; more get 413")
}

// newSecretsCommand is `datajobs secrets`: the keyring's keys and their rotation.
func newSecretsCommand(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "secrets", Short: "Manage the keys that encrypt secrets (docs/operations.md)", Args: cobra.NoArgs}
	cmd.AddCommand(newSecretsAddKeyCommand(g), newSecretsRotateCommand(g))
	return cmd
}

func newSecretsAddKeyCommand(g *globals) *cobra.Command {
	return keyringCommand(&cobra.Command{
		Use:   "add-key",
		Short: "Append a new random key to the keyring file (created, mode 0600, if missing); it becomes the newest",
	}, func(_ *cobra.Command, keyFile string) error {
		id, err := secrets.AddKey(keyFile)
		if err != nil {
			return err
		}
		fmt.Fprintf(g.stdout, "added key %s to %s; run `datajobs secrets rotate` to re-encrypt the data keys under it\n", id, keyFile)
		return nil
	})
}

func newSecretsRotateCommand(g *globals) *cobra.Command {
	var databaseURL string
	cmd := keyringCommand(&cobra.Command{
		Use:   "rotate",
		Short: "Re-encrypt every data key under the keyring file's newest key, online",
		Long: "Re-encrypts every data key (of job secrets, team OAuth credentials and team webhook and trigger signing secrets; one stored before any key file is sealed) under the newest key of the keyring file, one row at a time, while the service runs. " +
			"Once it reports success, no data key depends on an older key: remove the older keys from the file (docs/operations.md).",
	}, func(cmd *cobra.Command, keyFile string) error {
		keys, err := secrets.LoadKeyring(keyFile)
		if err != nil {
			return err
		}
		return withStore(cmd.Context(), databaseURL, func(db *store.Store) error {
			n, err := service.NewSecrets(db, keys, 0).Rotate(cmd.Context())
			if err != nil {
				return fmt.Errorf("rotate (%d data keys re-encrypted before the failure): %w", n, err)
			}
			fmt.Fprintf(g.stdout, "re-encrypted %d data keys under key %s\n", n, keys.Newest())
			return nil
		})
	})
	addDatabaseURL(cmd.Flags(), &databaseURL, required)
	return cmd
}

// keyringCommand completes cmd, a `datajobs secrets` command without arguments on the
// keyring file: --secrets-key-file is required, and run gets its path.
func keyringCommand(cmd *cobra.Command, run func(cmd *cobra.Command, keyFile string) error) *cobra.Command {
	var keyFile string
	cmd.Args = cobra.NoArgs
	cmd.PreRunE = requireFlag("secrets-key-file", &keyFile)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error { return run(cmd, keyFile) }
	addSecretsKeyFile(cmd.Flags(), &keyFile, "keyring file"+required)
	return cmd
}
