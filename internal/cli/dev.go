package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/datajobs/datajobs/internal/devenv"
	"github.com/datajobs/datajobs/internal/server"
)

// devDefaultListen is dev's --listen: serve's port, on loopback only (dev serves
// without login).
const devDefaultListen = "127.0.0.1:8092"

// devFlags are the flags of `datajobs dev`.
type devFlags struct {
	stateDir, envFile, binDir  string
	hydraBin, node             string
	listen, adminListen        string
	controllers, envOnly, fast bool
}

// newDevCommand is `datajobs dev`: the service on a local PostgreSQL and a local
// Kubernetes control plane that it starts itself, with all state in one folder.
func newDevCommand(serve ServeFunc) *cobra.Command {
	var fl devFlags
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run the service on a local PostgreSQL and Kubernetes control plane",
		Long: `dev starts PostgreSQL, etcd, kube-apiserver and (by default) kube-controller-manager,
kube-scheduler and a node, all on 127.0.0.1, then serves the API and the console against them.
As root the node is real (a kubelet and containerd: jobs run); otherwise it is kwok's fake node.
Everything is kept in the state folder: starting again keeps the jobs and the cluster's objects.
The Kubernetes binaries are built from the checkout on first use (a few minutes, then cached).
Ctrl-C, SIGTERM or SIGHUP (the terminal closed) stops everything.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runDevCommand(cmd, serve, fl) },
	}
	f := cmd.Flags()
	f.StringVar(&fl.stateDir, "state-dir", ".datajobs", "folder that keeps the database, the cluster, keys and logs")
	f.BoolVar(&fl.controllers, "controllers", true, "also run kube-controller-manager, kube-scheduler and a node, so CronJobs run")
	f.StringVar(&fl.node, "node", "auto", "where pods run: kwok (a fake node), real (a kubelet and containerd, root only), both (kwok, and the real node for the namespaces that ask for it), or auto (real as root, both with --env-only as root, else kwok)")
	f.BoolVar(&fl.envOnly, "env-only", false, "start the environment, print it and wait for a signal, without serving")
	f.StringVar(&fl.envFile, "env-file", "", "with --env-only: write DATAJOBS_TEST_DATABASE_URL and DATAJOBS_TEST_KUBECONFIG lines there once ready")
	f.BoolVar(&fl.fast, "fast", false, "turn fsync off in PostgreSQL and etcd (for tests; a crash may lose data)")
	f.StringVar(&fl.binDir, "bin-dir", "", "folder of the Kubernetes binaries (default: build them into .cache/k8s-bin of the checkout)")
	f.StringVar(&fl.hydraBin, "hydra-bin", "", "with --env-only: also run this Ory Hydra as the tests' OIDC provider (default: .cache/hydra-bin/hydra of the checkout when built)")
	f.StringVar(&fl.listen, "listen", devDefaultListen, "address the API and the console listen on")
	f.StringVar(&fl.adminListen, "admin-listen", server.DefaultAdminListen, "address of /metrics and /data-jobs/debug/*")
	return cmd
}

func runDevCommand(cmd *cobra.Command, serve ServeFunc, fl devFlags) (err error) {
	if fl.envFile != "" && !fl.envOnly {
		return errors.New("--env-file needs --env-only")
	}
	// A closed terminal stops the environment as gracefully as Ctrl-C.
	ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGHUP)
	defer stop()
	out, errOut := cmd.OutOrStdout(), cmd.ErrOrStderr()
	if !fl.envOnly {
		if err := checkPortsFree(fl.listen, fl.adminListen); err != nil {
			return err
		}
	}
	cfg, err := devEnvConfig(ctx, fl, out, errOut)
	if err != nil {
		return err
	}
	began := time.Now()
	env, err := devenv.Start(ctx, cfg)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, env.Stop()) }()
	printEnv(out, env, time.Since(began))
	if ctx, err = setUpDevRegistry(ctx, env, out); err != nil {
		return err
	}
	if !fl.envOnly {
		return serveOnDevEnv(ctx, fl, env, serve, out)
	}
	return waitOnDevEnv(ctx, fl, env, out)
}

// devEnvConfig is the environment the flags ask for: its node, the Kubernetes binaries
// (built from the checkout unless --bin-dir), the tests' OIDC provider with --env-only,
// Mailpit without.
func devEnvConfig(ctx context.Context, fl devFlags, out, errOut io.Writer) (devenv.Config, error) {
	node, err := devNode(fl, realNodeUnavailable(), out)
	if err != nil {
		return devenv.Config{}, err
	}
	binDir := fl.binDir
	if binDir == "" {
		root, err := devenv.RepoRoot()
		if err != nil {
			return devenv.Config{}, fmt.Errorf("dev builds the Kubernetes binaries from the datajobs checkout (or pass --bin-dir): %w", err)
		}
		if binDir, err = devenv.EnsureBinaries(ctx, root, errOut); err != nil {
			return devenv.Config{}, err
		}
	}
	hydraBin, mailpitBin := fl.hydraBin, ""
	if fl.envOnly && hydraBin == "" {
		hydraBin = devenv.HydraBinary() // the tests' OIDC provider, when built
	}
	if !fl.envOnly { // the tests start a Mailpit of their own each
		if mailpitBin, err = mailpitForDev(ctx, errOut, out); err != nil {
			return devenv.Config{}, err
		}
	}
	return devenv.Config{
		StateDir: fl.stateDir, BinDir: binDir, Kubernetes: true, Controllers: fl.controllers, Fast: fl.fast,
		RegistryBin: devenv.RegistryBinary(), // when hack/registry/build.sh has built it
		HydraBin:    hydraBin, Node: node, NodeBinDir: devenv.NodeBinaries(), MailpitBin: mailpitBin,
		Logger: slog.New(slog.NewTextHandler(errOut, &slog.HandlerOptions{Level: slog.LevelWarn})),
	}, nil
}

// serveOnDevEnv serves the API and the console on the environment until ctx ends, with
// its secrets key file, the job pods' way to the API and its Mailpit.
func serveOnDevEnv(ctx context.Context, fl devFlags, env *devenv.Env, serve ServeFunc, out io.Writer) (err error) {
	if ctx, err = withDevSecrets(ctx, env.StateDir); err != nil {
		return err
	}
	ctx, closeForward, err := forwardDevJobAPI(ctx, env, fl.listen, out)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, closeForward()) }()
	ctx = withDevMailpit(ctx, env, out)
	return serve(withDevListen(ctx, fl.listen, fl.adminListen), env.DatabaseURL, env.Kubeconfig, out)
}

// waitOnDevEnv (--env-only) writes the env file, if asked, and waits for ctx to end.
func waitOnDevEnv(ctx context.Context, fl devFlags, env *devenv.Env, out io.Writer) error {
	if fl.envFile != "" {
		if err := writeEnvFile(ctx, fl.envFile, env); err != nil {
			return err
		}
		defer os.Remove(fl.envFile)
		fmt.Fprintf(out, "  env file:    %s\n", fl.envFile)
	}
	fmt.Fprintln(out, "environment only: press Ctrl-C to stop it")
	<-ctx.Done()
	return nil
}

// realNodeUnavailable says why this process cannot run a real node, or "".
func realNodeUnavailable() string {
	if why := devenv.RealNodeUnavailable(); why != "" {
		return why
	}
	if devenv.NodeBinaries() == "" {
		return "the real node's runtime is not built (bash hack/node-bins/build.sh, part of make setup)"
	}
	return ""
}

// devNode resolves --node, why being realNodeUnavailable's answer. Without a real node,
// auto falls back to kwok and says so in one line; an explicit real or both fails.
func devNode(fl devFlags, why string, out io.Writer) (devenv.NodeKind, error) {
	if !fl.controllers {
		return devenv.NodeKwok, nil
	}
	switch kind := devenv.NodeKind(fl.node); kind {
	case devenv.NodeKwok:
		return kind, nil
	case devenv.NodeReal, devenv.NodeBoth:
		if why != "" {
			return "", fmt.Errorf("--node %s: %s", kind, why)
		}
		return kind, nil
	case "auto":
		if why != "" {
			fmt.Fprintf(out, "node: kwok's fake node: pods are not run, %s\n", why)
			return devenv.NodeKwok, nil
		}
		if fl.envOnly {
			return devenv.NodeBoth, nil
		}
		return devenv.NodeReal, nil
	default:
		return "", fmt.Errorf("--node %q: must be auto, kwok, real or both", fl.node)
	}
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
	if env.Node != nil {
		fmt.Fprintf(out, "  node:        %s, real (kubelet and containerd): pods run\n", devenv.RealNodeName)
	}
	if env.Hydra != nil {
		fmt.Fprintf(out, "  oidc issuer: %s (admin %s)\n", env.Hydra.IssuerURL, env.Hydra.AdminURL)
	}
}

// writeEnvFile writes the variables that make testenv reuse this environment. It renames
// a complete file into place, so a reader polling for it never sees half of it.
func writeEnvFile(ctx context.Context, path string, env *devenv.Env) error {
	content := fmt.Sprintf("DATAJOBS_TEST_DATABASE_URL=%s\nDATAJOBS_TEST_KUBECONFIG=%s\n", env.DatabaseURL, env.Kubeconfig)
	if env.Registry != nil {
		content += "DATAJOBS_TEST_REGISTRY=" + env.Registry.Addr + "\n"
	}
	if d, ok := ctx.Value(devImagesKey{}).(devImages); ok && d.python != "" {
		content += "DATAJOBS_TEST_PYTHON_BASE_IMAGE=" + d.python + "\n"
	}
	if env.Node != nil {
		content += "DATAJOBS_TEST_REAL_NODE=" + devenv.RealNodeName + "\nDATAJOBS_TEST_REAL_NODE_GATEWAY=" + env.Node.Gateway + "\n"
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
