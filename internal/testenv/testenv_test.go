package testenv

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/datajobs/datajobs/internal/devenv"
	"github.com/datajobs/datajobs/internal/store"
)

func TestMain(m *testing.M) {
	Main(m, WithKubernetes())
}

func TestStoreIsMigrated(t *testing.T) {
	t.Parallel()
	s := Store(t)
	require.NoError(t, s.Ping(t.Context()))
	applied, err := s.Migrate(t.Context())
	require.NoError(t, err)
	require.Empty(t, applied, "the template was migrated already")
}

func TestMigrateTwiceAppliesNothingTheSecondTime(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	// An empty database, not a copy of the migrated template.
	name := "empty_" + randomHex(6)
	admin := current.databaseURL
	require.NoError(t, devenv.CreateDatabase(ctx, admin, name, ""))
	t.Cleanup(func() { require.NoError(t, devenv.DropDatabase(context.Background(), admin, name)) })
	u, err := withDatabase(admin, name)
	require.NoError(t, err)
	s, err := store.Open(ctx, store.Config{URL: u})
	require.NoError(t, err)
	defer s.Close()

	first, err := s.Migrate(ctx)
	require.NoError(t, err)
	require.NotEmpty(t, first)
	second, err := s.Migrate(ctx)
	require.NoError(t, err)
	require.Empty(t, second)
}

func TestEachTestGetsItsOwnDatabase(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	a, b := DatabaseURL(t), DatabaseURL(t)
	require.NotEqual(t, a, b)

	connA, err := pgx.Connect(ctx, a)
	require.NoError(t, err)
	defer connA.Close(ctx)
	_, err = connA.Exec(ctx, `CREATE TABLE only_in_a (id int)`)
	require.NoError(t, err)

	connB, err := pgx.Connect(ctx, b)
	require.NoError(t, err)
	defer connB.Close(ctx)
	var n int
	require.NoError(t, connB.QueryRow(ctx, `SELECT count(*) FROM pg_tables WHERE tablename = 'only_in_a'`).Scan(&n))
	require.Zero(t, n)
}

func TestDatabaseIsDroppedAtCleanup(t *testing.T) {
	t.Parallel()
	var url string
	t.Run("user", func(t *testing.T) {
		url = DatabaseURL(t)
		conn, err := pgx.Connect(t.Context(), url)
		require.NoError(t, err)
		require.NoError(t, conn.Close(t.Context()))
	})
	_, err := pgx.Connect(t.Context(), url)
	require.ErrorContains(t, err, "does not exist")
}

func TestNamespaceAndClientset(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	ns := Namespace(t)
	cs := Clientset(t)
	_, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	require.FileExists(t, Kubeconfig(t))
	require.NotEqual(t, ns, Namespace(t))
}

// fatalRecorder records a Fatal call and stops the goroutine, as testing.T does.
type fatalRecorder struct {
	testing.TB
	msg string
}

func (f *fatalRecorder) Helper() {}

func (f *fatalRecorder) Fatal(args ...any) { f.msg = fmt.Sprint(args...); runtime.Goexit() }

func (f *fatalRecorder) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func TestKubernetesWithoutTheOptionFailsClearly(t *testing.T) {
	// Not parallel: it swaps the harness.
	saved := current
	t.Cleanup(func() { current = saved })
	current = &harness{databaseURL: saved.databaseURL}

	rec := &fatalRecorder{TB: t}
	var wg sync.WaitGroup
	wg.Go(func() { Kubeconfig(rec) })
	wg.Wait()
	require.Contains(t, rec.msg, "testenv.WithKubernetes()")
}
