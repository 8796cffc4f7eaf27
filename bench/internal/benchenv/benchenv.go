// Package benchenv opens what the in-process benchmarks (bench/executions, bench/notify)
// run against in the environment of hack/with-env.sh: a database of their own, migrated,
// the service's use cases on it, a plain connection for counting rows, a Kubernetes client
// with a namespace of their own, and the synchronizer's lease (its epoch fences the
// benchmark's leader writes). Close undoes all of it, in reverse.
package benchenv

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/jackc/pgx/v5" //nolint:depguard // the benchmarks count rows
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/datajobs/datajobs/internal/devenv"
	"github.com/datajobs/datajobs/internal/service"
	"github.com/datajobs/datajobs/internal/store"
)

// Env is one benchmark's database, service, connection, cluster client and lease.
type Env struct {
	URL    string
	DB     *store.Store
	Svc    *service.Service
	Conn   *pgx.Conn
	Client kubernetes.Interface
	NS     string
	Epoch  int64

	closers []func()
}

// Config names what Open makes.
type Config struct {
	// Admin is the PostgreSQL URL of the environment's admin; Kubeconfig its cluster's.
	Admin, Kubeconfig string
	// Prefix starts the namespace's name and, with _ for -, the database's (a random
	// suffix follows each).
	Prefix string
	// Tracer, when set, sees every statement of DB's pool (a benchmark counts writes).
	Tracer pgx.QueryTracer
	// MaxConns is the size of DB's pool (default 16).
	MaxConns int32
}

// Open makes the environment; on an error it closes what it had opened.
func Open(ctx context.Context, cfg Config) (_ *Env, err error) {
	e := &Env{NS: cfg.Prefix + "-" + randomHex(4)}
	defer func() {
		if err != nil {
			e.Close()
		}
	}()
	name := strings.ReplaceAll(cfg.Prefix, "-", "_") + "_" + randomHex(5)
	if err := devenv.CreateDatabase(ctx, cfg.Admin, name, ""); err != nil {
		return nil, err
	}
	e.OnClose(func() { _ = devenv.DropDatabase(context.Background(), cfg.Admin, name) })
	u, err := url.Parse(cfg.Admin)
	if err != nil {
		return nil, err
	}
	u.Path = "/" + name
	e.URL = u.String()
	// No bound on a team's active manual executions: a thousand run at once here.
	if e.DB, err = store.Open(ctx, store.Config{URL: e.URL, MaxConns: cmp.Or(cfg.MaxConns, 16), Tracer: cfg.Tracer, Quotas: store.TeamQuotas{MaxActiveExecutions: -1}}); err != nil {
		return nil, err
	}
	e.OnClose(e.DB.Close)
	if _, err := e.DB.Migrate(ctx); err != nil {
		return nil, err
	}
	if e.Svc, err = service.New(service.Config{SupportedPythonVersions: []string{"3.11"}}, e.DB); err != nil {
		return nil, err
	}
	if e.Conn, err = pgx.Connect(ctx, e.URL); err != nil {
		return nil, err
	}
	e.OnClose(func() { e.Conn.Close(context.Background()) })
	if err := e.openCluster(ctx, cfg.Kubeconfig); err != nil {
		return nil, err
	}
	epoch, ok, err := e.DB.TryAcquireLease(ctx, store.SyncLeaseName, "bench", time.Hour)
	if err != nil || !ok {
		return nil, fmt.Errorf("lease: %v %w", ok, err)
	}
	e.Epoch = epoch
	return e, nil
}

// openCluster connects to the cluster with a high rate limit (the benchmarks measure the
// service, not client-go's throttle) and makes the namespace.
func (e *Env) openCluster(ctx context.Context, kubeconfig string) error {
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	rc.QPS, rc.Burst = 2000, 4000
	if e.Client, err = kubernetes.NewForConfig(rc); err != nil {
		return err
	}
	if _, err := e.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: e.NS}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	e.OnClose(func() {
		_ = e.Client.CoreV1().Namespaces().Delete(context.Background(), e.NS, metav1.DeleteOptions{})
	})
	return nil
}

// OnClose adds f to what Close does (first added, last done).
func (e *Env) OnClose(f func()) { e.closers = append(e.closers, f) }

// Close undoes Open and every OnClose, in reverse.
func (e *Env) Close() {
	for i := len(e.closers) - 1; i >= 0; i-- {
		e.closers[i]()
	}
	e.closers = nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
