package cli

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/datajobs/datajobs/internal/devenv"
)

// newDevCommand is `datajobs dev`: the service on a local PostgreSQL and a local
// Kubernetes control plane that it starts itself, with all state in one folder.
func newDevCommand(serve ServeFunc) *cobra.Command {
	var (
		stateDir, envFile, binDir  string
		hydraBin                   string
		controllers, envOnly, fast bool
	)
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run the service on a local PostgreSQL and Kubernetes control plane",
		Long: `dev starts PostgreSQL, etcd, kube-apiserver and (by default) kube-controller-manager,
kube-scheduler and kwok with one fake node, all on 127.0.0.1, then serves the API against them.
Everything is kept in the state folder: starting again keeps the jobs and the cluster's objects.
The Kubernetes binaries are built from the checkout on first use (a few minutes, then cached).
Ctrl-C stops everything.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) (err error) {
			if envFile != "" && !envOnly {
				return errors.New("--env-file needs --env-only")
			}
			ctx := cmd.Context()
			out, errOut := cmd.OutOrStdout(), cmd.ErrOrStderr()
			if binDir == "" {
				root, err := devenv.RepoRoot()
				if err != nil {
					return fmt.Errorf("dev builds the Kubernetes binaries from the datajobs checkout (or pass --bin-dir): %w", err)
				}
				if binDir, err = devenv.EnsureBinaries(ctx, root, errOut); err != nil {
					return err
				}
			}
			if envOnly && hydraBin == "" {
				hydraBin = devenv.HydraBinary() // the tests' OIDC provider, when built
			}
			began := time.Now()
			env, err := devenv.Start(ctx, devenv.Config{
				StateDir: stateDir, BinDir: binDir, Kubernetes: true, Controllers: controllers, Fast: fast,
				RegistryBin: devenv.RegistryBinary(), // when hack/registry/build.sh has built it
				HydraBin:    hydraBin,
				Logger:      slog.New(slog.NewTextHandler(errOut, &slog.HandlerOptions{Level: slog.LevelWarn})),
			})
			if err != nil {
				return err
			}
			defer func() { err = errors.Join(err, env.Stop()) }()
			printEnv(out, env, time.Since(began))
			if ctx, err = setUpDevRegistry(ctx, env, out); err != nil {
				return err
			}

			if !envOnly {
				return serve(ctx, env.DatabaseURL, env.Kubeconfig, out)
			}
			if envFile != "" {
				if err := writeEnvFile(envFile, env); err != nil {
					return err
				}
				defer os.Remove(envFile)
				fmt.Fprintf(out, "  env file:    %s\n", envFile)
			}
			fmt.Fprintln(out, "environment only: press Ctrl-C to stop it")
			<-ctx.Done()
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&stateDir, "state-dir", ".datajobs", "folder that keeps the database, the cluster, keys and logs")
	f.BoolVar(&controllers, "controllers", true, "also run kube-controller-manager, kube-scheduler and kwok (a fake node), so CronJobs run")
	f.BoolVar(&envOnly, "env-only", false, "start the environment, print it and wait for a signal, without serving")
	f.StringVar(&envFile, "env-file", "", "with --env-only: write DATAJOBS_TEST_DATABASE_URL and DATAJOBS_TEST_KUBECONFIG lines there once ready")
	f.BoolVar(&fast, "fast", false, "turn fsync off in PostgreSQL and etcd (for tests; a crash may lose data)")
	f.StringVar(&binDir, "bin-dir", "", "folder of the Kubernetes binaries (default: build them into .cache/k8s-bin of the checkout)")
	f.StringVar(&hydraBin, "hydra-bin", "", "with --env-only: also run this Ory Hydra as the tests' OIDC provider (default: .cache/hydra-bin/hydra of the checkout when built)")
	return cmd
}

func printEnv(out io.Writer, env *devenv.Env, took time.Duration) {
	kubectl := filepath.Join(env.BinDir, "kubectl")
	fmt.Fprintf(out, "datajobs dev environment ready in %.1fs (state in %s)\n", took.Seconds(), env.StateDir)
	fmt.Fprintf(out, "  database:    %s\n", env.DatabaseURL)
	fmt.Fprintf(out, "  kubernetes:  %s\n", env.APIServerURL)
	fmt.Fprintf(out, "  kubeconfig:  %s\n", env.Kubeconfig)
	fmt.Fprintf(out, "    export KUBECONFIG=%s\n", env.Kubeconfig)
	fmt.Fprintf(out, "    %s --kubeconfig %s get ns\n", kubectl, env.Kubeconfig)
	fmt.Fprintf(out, "  logs:        %s\n", filepath.Join(env.StateDir, "logs"))
	if env.Hydra != nil {
		fmt.Fprintf(out, "  oidc issuer: %s (admin %s)\n", env.Hydra.IssuerURL, env.Hydra.AdminURL)
	}
}

// writeEnvFile writes the variables that make testenv reuse this environment. It renames
// a complete file into place, so a reader polling for it never sees half of it.
func writeEnvFile(path string, env *devenv.Env) error {
	content := fmt.Sprintf("DATAJOBS_TEST_DATABASE_URL=%s\nDATAJOBS_TEST_KUBECONFIG=%s\n", env.DatabaseURL, env.Kubeconfig)
	if env.Registry != nil {
		content += "DATAJOBS_TEST_REGISTRY=" + env.Registry.Addr + "\n"
	}
	if env.Hydra != nil {
		content += fmt.Sprintf("DATAJOBS_TEST_OIDC_ISSUER=%s\nDATAJOBS_TEST_OIDC_ADMIN_URL=%s\n", env.Hydra.IssuerURL, env.Hydra.AdminURL)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		return fmt.Errorf("write env file: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write env file: %w", err)
	}
	return nil
}
