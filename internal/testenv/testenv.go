// Package testenv gives tests a real PostgreSQL and a real Kubernetes control plane.
//
// A package's TestMain calls Main, which starts one environment for the whole test binary
// (or reuses the one named by DATAJOBS_TEST_DATABASE_URL and DATAJOBS_TEST_KUBECONFIG,
// which `make test` sets from `datajobs dev --env-only`), runs the tests, stops what it
// started and checks for leaked goroutines. Each test then asks for what it needs: a fresh
// migrated database, a fresh namespace, a client.
package testenv

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/datajobs/datajobs/internal/devenv"
	"github.com/datajobs/datajobs/internal/store"
)

// Environment variables that make Main reuse a running environment instead of starting one.
const (
	// EnvDatabaseURL names a running PostgreSQL (its URL; tests create databases on it).
	EnvDatabaseURL = "DATAJOBS_TEST_DATABASE_URL"
	// EnvKubeconfig names a running cluster's kubeconfig (admin rights needed).
	EnvKubeconfig = "DATAJOBS_TEST_KUBECONFIG"
)

// Option selects what Main starts.
type Option func(*options)

type options struct {
	kubernetes  bool
	controllers bool
	oidc        bool
}

// WithKubernetes makes Main provide a kube-apiserver (with etcd) besides PostgreSQL.
func WithKubernetes() Option { return func(o *options) { o.kubernetes = true } }

// WithControllers makes Main also run kube-controller-manager, kube-scheduler and kwok
// with a fake Node, so that Jobs get Pods that reach Succeeded. Implies WithKubernetes.
// When the environment is reused from the environment variables, it is assumed to have
// them (`datajobs dev --env-only` starts them by default).
func WithControllers() Option {
	return func(o *options) { o.kubernetes, o.controllers = true, true }
}

// harness is the environment of one test binary, set by Main.
type harness struct {
	opts        options
	env         *devenv.Env // nil when reused
	databaseURL string
	kubeconfig  string
	oidc        *OIDCProvider // nil when none runs (see WithOIDC)

	templateOnce sync.Once
	template     string
	templateErr  error
}

// current is the one piece of package state: Main sets it before any test runs.
var current *harness

// Main is called from TestMain. It starts one environment for this test binary (or reuses
// the one named by DATAJOBS_TEST_DATABASE_URL and DATAJOBS_TEST_KUBECONFIG), runs the tests,
// stops what it started, and fails the run if goroutines leaked. It does not return.
func Main(m *testing.M, opts ...Option) {
	os.Exit(run(m, opts))
}

func run(m *testing.M, opts []Option) int {
	h := &harness{}
	for _, o := range opts {
		o(&h.opts)
	}
	dbURL, kubeconfig := os.Getenv(EnvDatabaseURL), os.Getenv(EnvKubeconfig)
	stop := func() error { return nil }
	issuer, adminURL := os.Getenv(EnvOIDCIssuer), os.Getenv(EnvOIDCAdminURL)
	if dbURL != "" && (!h.opts.kubernetes || kubeconfig != "") && (!h.opts.oidc || issuer != "" || hydraBin() == "") {
		h.databaseURL, h.kubeconfig = dbURL, kubeconfig
		if h.opts.oidc && issuer != "" {
			h.oidc = &OIDCProvider{IssuerURL: issuer, AdminURL: adminURL}
		}
	} else {
		var err error
		if stop, err = h.start(); err != nil {
			fmt.Fprintf(os.Stderr, "testenv: %v\n", err)
			return 1
		}
	}
	current = h
	code := m.Run()
	current = nil
	if err := stopRegistries(); err != nil {
		fmt.Fprintf(os.Stderr, "testenv: stop registries: %v\n", err)
		code = cmp.Or(code, 1)
	}
	if err := stopSecondCluster(); err != nil {
		fmt.Fprintf(os.Stderr, "testenv: %v\n", err)
		code = cmp.Or(code, 1)
	}
	if h.template != "" {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		if err := devenv.DropDatabase(ctx, h.databaseURL, h.template); err != nil {
			fmt.Fprintf(os.Stderr, "testenv: drop template database: %v\n", err)
		}
		cancel()
	}
	if err := stop(); err != nil {
		fmt.Fprintf(os.Stderr, "testenv: stop: %v\n", err)
		code = cmp.Or(code, 1)
	}
	if code == 0 {
		if err := goleak.Find(leakOptions()...); err != nil {
			fmt.Fprintf(os.Stderr, "testenv: goroutines leaked by the tests:\n%v\n", err)
			return 1
		}
	}
	return code
}

// start starts this binary's own environment in a temporary state folder.
func (h *harness) start() (stop func() error, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	cfg := devenv.Config{Kubernetes: h.opts.kubernetes, Controllers: h.opts.controllers, Fast: true}
	if h.opts.oidc {
		cfg.HydraBin = hydraBin() // none: OIDC skips its tests, saying why
	}
	if cfg.Kubernetes {
		root, err := devenv.RepoRoot()
		if err != nil {
			return nil, err
		}
		if cfg.BinDir, err = devenv.EnsureBinaries(ctx, root, os.Stderr); err != nil {
			return nil, err
		}
	}
	if cfg.StateDir, err = os.MkdirTemp("", "datajobs-testenv-"); err != nil {
		return nil, fmt.Errorf("state folder: %w", err)
	}
	env, err := devenv.Start(ctx, cfg)
	if err != nil {
		// The state folder stays, for its logs.
		return nil, fmt.Errorf("start environment (logs in %s): %w", filepath.Join(cfg.StateDir, "logs"), err)
	}
	h.env, h.databaseURL, h.kubeconfig = env, env.DatabaseURL, env.Kubeconfig
	if env.Hydra != nil {
		h.oidc = &OIDCProvider{IssuerURL: env.Hydra.IssuerURL, AdminURL: env.Hydra.AdminURL}
	}
	return func() error {
		err := env.Stop()
		if err == nil {
			err = os.RemoveAll(cfg.StateDir)
		}
		return err
	}, nil
}

// leakOptions ignores the long-lived goroutines that klog and client-go keep on purpose: a
// log flush daemon, and the idle connections of client-go's process-wide transport cache.
// Informers, work queues and event broadcasters are not ignored: their owners stop them.
func leakOptions() []goleak.Option {
	return []goleak.Option{
		goleak.IgnoreTopFunction("k8s.io/klog/v2.(*flushDaemon).run.func1"),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreAnyFunction("golang.org/x/net/http2.(*ClientConn).readLoop"),
		goleak.IgnoreAnyFunction("net/http.(*http2ClientConn).readLoop"),
	}
}

func get(t testing.TB) *harness {
	t.Helper()
	if current == nil {
		t.Fatal("testenv: call testenv.Main(m) from this package's TestMain")
	}
	return current
}

func getKube(t testing.TB) *harness {
	t.Helper()
	h := get(t)
	if !h.opts.kubernetes || h.kubeconfig == "" {
		t.Fatal("testenv: this test needs Kubernetes: call testenv.Main(m, testenv.WithKubernetes()) in this package's TestMain")
	}
	return h
}

// Env returns the environment this binary started, for tests that stop and start a
// component. It is nil when the environment was reused from the environment variables;
// such tests should skip then.
func Env() *devenv.Env {
	if current == nil {
		return nil
	}
	return current.env
}

// DatabaseURL returns the URL of a fresh database for t, migrated with store.Migrate and
// dropped when t ends. It is fast: the schema is migrated once per binary into a template.
func DatabaseURL(t testing.TB) string {
	t.Helper()
	h := get(t)
	template, err := h.migratedTemplate()
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	name := "test_" + randomHex(8)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := devenv.CreateDatabase(ctx, h.databaseURL, name, template); err != nil {
		t.Fatalf("testenv: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := devenv.DropDatabase(ctx, h.databaseURL, name); err != nil {
			t.Errorf("testenv: %v", err)
		}
	})
	u, err := withDatabase(h.databaseURL, name)
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	return u
}

// migratedTemplate creates and migrates this binary's template database once.
func (h *harness) migratedTemplate() (string, error) {
	h.templateOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		name := "template_" + randomHex(8)
		if err := devenv.CreateDatabase(ctx, h.databaseURL, name, ""); err != nil {
			h.templateErr = err
			return
		}
		h.template = name // dropped by Main from here on
		u, err := withDatabase(h.databaseURL, name)
		if err != nil {
			h.templateErr = err
			return
		}
		s, err := store.Open(ctx, store.Config{URL: u})
		if err != nil {
			h.templateErr = err
			return
		}
		defer s.Close()
		if _, err := s.Migrate(ctx); err != nil {
			h.templateErr = fmt.Errorf("migrate template database: %w", err)
		}
	})
	return h.template, h.templateErr
}

// Store returns a store on a fresh migrated database for t, closed when t ends.
func Store(t testing.TB) *store.Store {
	t.Helper()
	u := DatabaseURL(t)
	s, err := store.Open(context.Background(), store.Config{URL: u})
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	t.Cleanup(s.Close)
	return s
}

// Kubeconfig returns the path of a kubeconfig for the admin user (system:masters).
func Kubeconfig(t testing.TB) string {
	t.Helper()
	return getKube(t).kubeconfig
}

// RestConfig returns a fresh client configuration for the admin user.
func RestConfig(t testing.TB) *rest.Config {
	t.Helper()
	rc, err := clientcmd.BuildConfigFromFlags("", Kubeconfig(t))
	if err != nil {
		t.Fatalf("testenv: load kubeconfig: %v", err)
	}
	return rc
}

// Clientset returns a Kubernetes client for the admin user.
func Clientset(t testing.TB) kubernetes.Interface {
	t.Helper()
	cs, err := kubernetes.NewForConfig(RestConfig(t))
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	return cs
}

// Namespace creates a fresh namespace for t and deletes it when t ends. (Without
// controllers a deleted namespace stays Terminating; its name is never reused.)
func Namespace(t testing.TB) string {
	t.Helper()
	cs := Clientset(t)
	name := "test-" + randomHex(6)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatalf("testenv: create namespace: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := cs.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Errorf("testenv: delete namespace %s: %v", name, err)
		}
	})
	return name
}

func withDatabase(rawURL, db string) (string, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "", fmt.Errorf("parse database url: %w", err)
	}
	if u.Scheme == "" {
		return "", fmt.Errorf("database url must be a postgres:// URL, not key=value settings")
	}
	u.Path = "/" + db
	return u.String(), nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
