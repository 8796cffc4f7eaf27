// Package devenv runs the local environment of `datajobs dev` and of the tests: a
// PostgreSQL server and, optionally, a real Kubernetes control plane (etcd, kube-apiserver,
// and on request kube-controller-manager, kube-scheduler and kwok with one fake Node), all
// as child processes on 127.0.0.1, with every file under one state folder.
//
// Children run in their own process groups, are stopped by PID (never by name), and die
// with the parent even if it is killed. Starting again with the same state folder keeps
// the database and the cluster's objects.
package devenv

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"syscall"
)

// Config configures an environment.
type Config struct {
	// StateDir holds everything: data, keys, kubeconfig, logs (default ".datajobs").
	StateDir string
	// BinDir holds the Kubernetes binaries built by hack/k8s-bins/build.sh (see
	// EnsureBinaries). Required when Kubernetes is set.
	BinDir string
	// PostgresBinDir holds initdb and postgres (default: the newest
	// /usr/lib/postgresql/*/bin, then `pg_config --bindir`).
	PostgresBinDir string
	// Kubernetes starts etcd and kube-apiserver (default false: PostgreSQL only).
	Kubernetes bool
	// Controllers also starts kube-controller-manager, kube-scheduler and kwok with a fake
	// Node, so that CronJobs spawn Jobs whose Pods reach Succeeded. Implies Kubernetes.
	Controllers bool
	// RegistryBin, when set, also starts that OCI registry binary (registry.go) on loopback.
	RegistryBin string
	// Fast trades durability for speed (fsync off in PostgreSQL and etcd) and lifts
	// kube-controller-manager's client limits: for tests and benchmarks.
	Fast bool
	// Logger receives the environment's own logs (default: discarded).
	Logger *slog.Logger
	// HydraBin, when set, also starts Ory Hydra (an OIDC provider) on the environment's
	// PostgreSQL (see StartHydra).
	HydraBin string
	// Node is where pods run with Controllers (default NodeKwok). NodeReal and NodeBoth
	// start a real kubelet and containerd (node.go): root only, and they need RegistryBin
	// and NodeBinDir.
	Node NodeKind
	// NodeBinDir holds the real node's runtime built by hack/node-bins/build.sh
	// (NodeBinaries).
	NodeBinDir string
	// MailpitBin, when set, also starts Mailpit (mailpit.go), the SMTP server whose web UI
	// shows every mail the service sends, on ports kept in ports.json.
	MailpitBin string
	// NoPostgres starts no PostgreSQL: a second cluster beside an environment that has
	// one (an execution target's other cluster, testenv.SecondCluster).
	NoPostgres bool
}

// Env is a running environment. Its components can be stopped and started again
// individually (on the same port) to simulate outages.
type Env struct {
	// StateDir is the absolute state folder.
	StateDir string
	// DatabaseURL connects to the "datajobs" database as the superuser "postgres".
	DatabaseURL string
	// Kubeconfig is the path of a kubeconfig for the admin user (system:masters); empty
	// without Kubernetes.
	Kubeconfig string
	// APIServerURL is the kube-apiserver's https URL; empty without Kubernetes.
	APIServerURL string
	// BinDir is where the Kubernetes binaries (kubectl too) were taken from.
	BinDir string
	// Hydra is the OIDC provider; nil unless Config.HydraBin was set.
	Hydra *Hydra

	// Postgres is the database server.
	Postgres *Postgres
	// Etcd, APIServer, ControllerManager, Scheduler and Kwok are nil when not started.
	Etcd, APIServer, ControllerManager, Scheduler, Kwok *Process
	// Registry is the OCI registry; nil unless Config.RegistryBin was set.
	Registry *Registry
	// Node is the real node; nil unless Config.Node is NodeReal or NodeBoth.
	Node *Node
	// Mailpit is the SMTP server; nil unless Config.MailpitBin was set.
	Mailpit *Mailpit

	logger *slog.Logger
	lock   *os.File // flock on the state folder, held while running
	mu     sync.Mutex
}

// Start starts the environment described by cfg and waits until every component is
// ready. On failure it stops whatever it had started and returns an error naming the
// component, with the tail of its log.
func Start(ctx context.Context, cfg Config) (*Env, error) {
	cfg.StateDir = cmp.Or(cfg.StateDir, ".datajobs")
	cfg.Kubernetes = cfg.Kubernetes || cfg.Controllers
	cfg.Node = cmp.Or(cfg.Node, NodeKwok)
	if cfg.Node != NodeKwok && !cfg.Controllers {
		return nil, fmt.Errorf("devenv: a %s node needs Config.Controllers (the scheduler)", cfg.Node)
	}
	if cfg.Node != NodeKwok && cfg.NodeBinDir == "" {
		return nil, fmt.Errorf("devenv: a %s node needs Config.NodeBinDir: build it with `bash %s`", cfg.Node, nodeBinScript)
	}
	logger := cmp.Or(cfg.Logger, slog.New(slog.DiscardHandler))

	// Check for what is missing before starting anything.
	pgBin, err := findPostgres(cfg.PostgresBinDir)
	if err != nil {
		return nil, err
	}
	if cfg.Kubernetes {
		if err := checkKubeBinaries(cfg.BinDir, cfg.Controllers, cfg.Node); err != nil {
			return nil, err
		}
	}

	stateDir, err := filepath.Abs(cfg.StateDir)
	if err != nil {
		return nil, fmt.Errorf("state folder: %w", err)
	}
	if err := os.MkdirAll(filepath.Join(stateDir, "logs"), 0o755); err != nil {
		return nil, fmt.Errorf("state folder: %w", err)
	}
	lock, err := lockStateDir(stateDir)
	if err != nil {
		return nil, err
	}
	e := &Env{StateDir: stateDir, BinDir: cfg.BinDir, logger: logger, lock: lock}

	portsPath := filepath.Join(stateDir, "ports.json")
	p, err := loadPorts(portsPath)
	if err == nil {
		err = p.assign()
	}
	if err == nil {
		err = p.save(portsPath)
	}
	if err != nil {
		return nil, errors.Join(err, e.Stop())
	}

	// PostgreSQL and the control plane start side by side; both goroutines end before
	// Start returns.
	var wg sync.WaitGroup
	var pgErr error
	wg.Go(func() {
		if cfg.NoPostgres {
			return
		}
		pg, err := StartPostgres(ctx, PostgresConfig{
			Dir: filepath.Join(stateDir, "postgres"), LogPath: filepath.Join(stateDir, "logs", "postgres.log"),
			BinDir: pgBin, Port: p.Postgres, Fast: cfg.Fast, Logger: logger,
		})
		e.mu.Lock()
		defer e.mu.Unlock()
		e.Postgres, pgErr = pg, err
	})
	var kubeErr error
	if cfg.Kubernetes {
		kubeErr = e.startKubernetes(ctx, cfg, &p)
	}
	wg.Wait()
	if err := errors.Join(pgErr, kubeErr); err != nil {
		return nil, errors.Join(err, e.Stop())
	}
	if e.Postgres != nil {
		e.DatabaseURL = e.Postgres.URL(DatabaseName)
	}
	if err := e.startServices(ctx, cfg, &p); err != nil {
		return nil, errors.Join(err, e.Stop())
	}
	// The ports the components ended up on (one that lost its pick got another).
	e.finalPorts(&p)
	if err := p.save(portsPath); err != nil {
		return nil, errors.Join(err, e.Stop())
	}
	logger.InfoContext(ctx, "devenv started", "state_dir", stateDir, "database_url", e.DatabaseURL,
		"kubeconfig", e.Kubeconfig, "apiserver_url", e.APIServerURL)
	return e, nil
}

// startServices starts what runs beside the database and the cluster, each when asked
// for: the registry, the real node (which pulls from the registry), Mailpit, Hydra.
func (e *Env) startServices(ctx context.Context, cfg Config, p *ports) error {
	if cfg.RegistryBin != "" {
		reg, err := StartRegistry(ctx, RegistryConfig{
			Bin: cfg.RegistryBin, Dir: filepath.Join(e.StateDir, "registry"),
			LogPath: filepath.Join(e.StateDir, "logs", "registry.log"), Port: p.Registry, Logger: e.logger,
		})
		if err != nil {
			return err
		}
		e.mu.Lock()
		e.Registry = reg
		e.mu.Unlock()
	}
	if cfg.Node != NodeKwok {
		if err := e.startNode(ctx, cfg, *p, pki{dir: filepath.Join(e.StateDir, "pki")}); err != nil {
			return err
		}
	}
	if cfg.MailpitBin != "" {
		m, err := StartMailpit(ctx, MailpitConfig{
			Bin: cfg.MailpitBin, Dir: filepath.Join(e.StateDir, "mailpit"), LogPath: e.logPath("mailpit"),
			SMTPPort: p.MailpitSMTP, HTTPPort: p.MailpitHTTP, Logger: e.logger,
		})
		if err != nil {
			return err
		}
		e.mu.Lock()
		e.Mailpit = m
		e.mu.Unlock()
	}
	if cfg.HydraBin != "" {
		hy, err := StartHydra(ctx, HydraConfig{
			Bin: cfg.HydraBin, PostgresURL: e.Postgres.URL("postgres"),
			Dir: filepath.Join(e.StateDir, "hydra"), Logger: e.logger,
		})
		if err != nil {
			return err
		}
		e.mu.Lock()
		e.Hydra = hy
		e.mu.Unlock()
	}
	return nil
}

// finalPorts records in p the ports of the components that StartPostgres, StartRegistry
// and StartMailpit started from p's (the Kubernetes ones changed p themselves).
func (e *Env) finalPorts(p *ports) {
	port := func(addr string) int {
		_, s, _ := net.SplitHostPort(addr)
		n, _ := strconv.Atoi(s)
		return n
	}
	if e.Postgres != nil {
		p.Postgres = e.Postgres.Port
	}
	if e.Registry != nil {
		p.Registry = port(e.Registry.Addr)
	}
	if e.Mailpit != nil {
		p.MailpitSMTP, p.MailpitHTTP = port(e.Mailpit.SMTPAddr), port(e.Mailpit.HTTPAddr)
	}
}

// Processes returns the components that were started, in start order.
func (e *Env) Processes() []*Process {
	e.mu.Lock()
	defer e.mu.Unlock()
	var ps []*Process
	if e.Postgres != nil {
		ps = append(ps, e.Postgres.Process)
	}
	for _, p := range []*Process{e.Etcd, e.APIServer, e.ControllerManager, e.Scheduler, e.Kwok} {
		if p != nil {
			ps = append(ps, p)
		}
	}
	if e.Registry != nil {
		ps = append(ps, e.Registry.Process)
	}
	if e.Mailpit != nil {
		ps = append(ps, e.Mailpit.Process)
	}
	return ps
}

// Stop stops every component, in reverse start order, and releases the state folder.
// Nothing it started is left running, even when some stop fails.
func (e *Env) Stop() error {
	var errs []error
	e.mu.Lock()
	hy, node := e.Hydra, e.Node
	e.mu.Unlock()
	if hy != nil {
		errs = append(errs, hy.Stop())
	}
	if node != nil { // first: its kubelet talks to the apiserver, its pods pull from the registry
		errs = append(errs, node.Stop())
	}
	ps := e.Processes()
	slices.Reverse(ps)
	for _, p := range ps {
		errs = append(errs, p.Stop())
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.lock != nil {
		errs = append(errs, e.lock.Close())
		e.lock = nil
	}
	return errors.Join(errs...)
}

// lockStateDir takes an exclusive lock on the state folder, so that two environments
// never share one data folder.
func lockStateDir(dir string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lock state folder: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("state folder %s is in use by another datajobs dev or test environment: %w", dir, err)
	}
	return f, nil
}
