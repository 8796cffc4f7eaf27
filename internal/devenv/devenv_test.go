package devenv_test

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/datajobs/datajobs/internal/devenv"
)

// binDir is the folder of the Kubernetes binaries, built once for this test binary.
var binDir string

func TestMain(m *testing.M) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	root, err := devenv.RepoRoot()
	if err == nil {
		binDir, err = devenv.EnsureBinaries(ctx, root, os.Stderr)
	}
	cancel()
	if err != nil {
		println("devenv tests:", err.Error())
		os.Exit(1)
	}
	goleak.VerifyTestMain(m,
		goleak.IgnoreTopFunction("k8s.io/klog/v2.(*flushDaemon).run.func1"),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"),
	)
}

// stateDir returns a fresh state folder. It is 0700 under the temporary folder: devenv
// makes it reachable for PostgreSQL when the tests run as root.
func stateDir(t *testing.T) string {
	return t.TempDir()
}

func start(t *testing.T, cfg devenv.Config) *devenv.Env {
	t.Helper()
	cfg.Fast = true
	if cfg.Kubernetes || cfg.Controllers {
		cfg.BinDir = binDir
	}
	env, err := devenv.Start(t.Context(), cfg)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, env.Stop()) })
	return env
}

func ping(ctx context.Context, url string) error {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	return conn.Ping(ctx)
}

func alive(pid int) bool {
	return syscall.Kill(pid, 0) == nil
}

func TestStopLeavesNoProcess(t *testing.T) {
	t.Parallel()
	env, err := devenv.Start(t.Context(), devenv.Config{StateDir: stateDir(t), Kubernetes: true, BinDir: binDir, Fast: true})
	require.NoError(t, err)
	var pids []int
	for _, p := range env.Processes() {
		require.True(t, p.Running(), p.Name)
		pids = append(pids, p.PID())
	}
	require.Len(t, pids, 3) // postgres, etcd, kube-apiserver

	require.NoError(t, env.Stop())
	for _, pid := range pids {
		require.False(t, alive(pid), "pid %d still alive", pid)
		// Nothing the child forked is left either (postgres backends, ...).
		require.ErrorIs(t, syscall.Kill(-pid, 0), syscall.ESRCH, "process group %d still alive", pid)
	}
}

func TestRestartKeepsData(t *testing.T) {
	t.Parallel()
	dir := stateDir(t)
	ctx := t.Context()
	env, err := devenv.Start(ctx, devenv.Config{StateDir: dir, Kubernetes: true, BinDir: binDir, Fast: true})
	require.NoError(t, err)
	conn, err := pgx.Connect(ctx, env.DatabaseURL)
	require.NoError(t, err)
	_, err = conn.Exec(ctx, `CREATE TABLE kept (v text); INSERT INTO kept VALUES ('hello')`)
	require.NoError(t, err)
	require.NoError(t, conn.Close(ctx))
	cs := clientset(t, env)
	_, err = cs.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "kept"}, Data: map[string]string{"v": "hello"},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	require.NoError(t, env.Stop())

	env = start(t, devenv.Config{StateDir: dir, Kubernetes: true})
	conn, err = pgx.Connect(ctx, env.DatabaseURL)
	require.NoError(t, err)
	defer conn.Close(ctx)
	var v string
	require.NoError(t, conn.QueryRow(ctx, `SELECT v FROM kept`).Scan(&v))
	require.Equal(t, "hello", v)
	cm, err := clientset(t, env).CoreV1().ConfigMaps("default").Get(ctx, "kept", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "hello", cm.Data["v"])
}

func TestStateDirInUse(t *testing.T) {
	t.Parallel()
	dir := stateDir(t)
	start(t, devenv.Config{StateDir: dir})
	_, err := devenv.Start(t.Context(), devenv.Config{StateDir: dir, Fast: true})
	require.ErrorContains(t, err, "in use")
}

func TestMissingBinaries(t *testing.T) {
	t.Parallel()
	empty := t.TempDir()
	tests := map[string]struct {
		cfg  devenv.Config
		want []string
	}{
		"a missing kube-apiserver is named with the fix": {
			cfg:  devenv.Config{Kubernetes: true, BinDir: empty},
			want: []string{"etcd missing in " + empty, "hack/k8s-bins/build.sh"},
		},
		"a missing kwok is named when controllers are asked for": {
			cfg:  devenv.Config{Controllers: true, BinDir: onlyControlPlane(t)},
			want: []string{"kube-controller-manager missing in", "hack/k8s-bins/build.sh"},
		},
		"no bin dir at all": {
			cfg:  devenv.Config{Kubernetes: true},
			want: []string{"BinDir is empty"},
		},
		"missing postgres names the package to install": {
			cfg:  devenv.Config{PostgresBinDir: empty},
			want: []string{"initdb, postgres", empty, "apt-get install postgresql"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			tc.cfg.StateDir = stateDir(t)
			_, err := devenv.Start(t.Context(), tc.cfg)
			require.Error(t, err)
			for _, w := range tc.want {
				require.ErrorContains(t, err, w)
			}
		})
	}
}

// onlyControlPlane returns a bin dir holding etcd and kube-apiserver but no controllers.
func onlyControlPlane(t *testing.T) string {
	dir := t.TempDir()
	for _, name := range []string{"etcd", "kube-apiserver"} {
		require.NoError(t, os.Symlink(filepath.Join(binDir, name), filepath.Join(dir, name)))
	}
	return dir
}

func TestChildExitingEarlyFailsStart(t *testing.T) {
	t.Parallel()
	// An etcd that exits at once: kube-apiserver is never started and nothing is left.
	dir := onlyControlPlane(t)
	fake := filepath.Join(dir, "etcd")
	require.NoError(t, os.Remove(fake))
	require.NoError(t, os.WriteFile(fake, []byte("#!/bin/sh\necho 'etcd: boom' >&2\nexit 3\n"), 0o755))
	_, err := devenv.Start(t.Context(), devenv.Config{StateDir: stateDir(t), Kubernetes: true, BinDir: dir, Fast: true})
	require.ErrorContains(t, err, "etcd exited during start-up")
	require.ErrorContains(t, err, "etcd: boom")
}

func TestPostgresDownThenBack(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	env := start(t, devenv.Config{StateDir: stateDir(t)})
	require.NoError(t, ping(ctx, env.DatabaseURL))

	require.NoError(t, env.Postgres.Stop())
	require.False(t, env.Postgres.Running())
	require.Error(t, ping(ctx, env.DatabaseURL))

	require.NoError(t, env.Postgres.Start(ctx))
	require.NoError(t, ping(ctx, env.DatabaseURL))
}

func TestStartPostgresAlone(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dir := filepath.Join(t.TempDir(), "pg")
	pg, err := devenv.StartPostgres(ctx, devenv.PostgresConfig{Dir: dir, Fast: true})
	require.NoError(t, err)
	defer func() { require.NoError(t, pg.Stop()) }()
	require.DirExists(t, filepath.Join(dir, "data"), "the data stays in the temporary folder")
	require.NoError(t, ping(ctx, pg.URL(devenv.DatabaseName)))
	require.NoError(t, devenv.CreateDatabase(ctx, pg.URL("postgres"), "other", ""))
	require.NoError(t, ping(ctx, pg.URL("other")))
	require.NoError(t, devenv.DropDatabase(ctx, pg.URL("postgres"), "other"))
	require.Error(t, ping(ctx, pg.URL("other")))
}

func TestPostgresAsRootOutsideTheTemporaryFolder(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("only root runs PostgreSQL as another user")
	}
	// Not parallel: TMPDIR changes. A 0700 folder outside $TMPDIR stands for /root.
	private := filepath.Join(t.TempDir(), "private")
	require.NoError(t, os.Mkdir(private, 0o700))
	tmp := t.TempDir()
	for _, d := range []string{tmp, filepath.Dir(tmp)} {
		require.NoError(t, os.Chmod(d, 0o755)) // as /tmp is reachable by all
	}
	t.Setenv("TMPDIR", tmp)
	dir := filepath.Join(private, "pg")

	pg, err := devenv.StartPostgres(t.Context(), devenv.PostgresConfig{Dir: dir, Fast: true})
	require.NoError(t, err)
	require.NoError(t, ping(t.Context(), pg.URL(devenv.DatabaseName)))
	require.NoError(t, pg.Stop())

	target, err := os.Readlink(dir)
	require.NoError(t, err, "the state folder links to the data")
	require.Equal(t, tmp, filepath.Dir(target))
	st, err := os.Stat(private)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o700), st.Mode().Perm(), "the private folder is left alone")
}

func clientset(t *testing.T, env *devenv.Env) kubernetes.Interface {
	t.Helper()
	rc, err := env.RestConfig()
	require.NoError(t, err)
	cs, err := kubernetes.NewForConfig(rc)
	require.NoError(t, err)
	return cs
}

func TestKubernetesSmoke(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	env := start(t, devenv.Config{StateDir: stateDir(t), Kubernetes: true})
	cs := clientset(t, env)

	v, err := cs.Discovery().ServerVersion()
	require.NoError(t, err)
	require.Equal(t, "v1.37.2", v.GitVersion)

	_, err = cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "smoke"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	cronJobs := cs.BatchV1().CronJobs("smoke")
	created, err := cronJobs.Create(ctx, cronJob("tick", "*/5 * * * *"), metav1.CreateOptions{})
	require.NoError(t, err)
	require.Equal(t, batchv1.AllowConcurrent, created.Spec.ConcurrencyPolicy, "defaults are applied")

	_, err = cronJobs.Create(ctx, cronJob("bad", "every minute"), metav1.CreateOptions{})
	require.True(t, apierrors.IsInvalid(err), "want 422 Invalid, got %v", err)
	require.ErrorContains(t, err, "spec.schedule")

	created.Spec.Suspend = new(true)
	updated, err := cronJobs.Update(ctx, created, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.True(t, *updated.Spec.Suspend)

	require.NoError(t, cronJobs.Delete(ctx, "tick", metav1.DeleteOptions{}))
	_, err = cronJobs.Get(ctx, "tick", metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "want 404, got %v", err)
}

func TestAPIServerDownThenBack(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	env := start(t, devenv.Config{StateDir: stateDir(t), Kubernetes: true})
	cs := clientset(t, env)
	_, err := cs.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{})
	require.NoError(t, err)

	require.NoError(t, env.APIServer.Stop())
	_, err = cs.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{})
	require.Error(t, err)
	require.False(t, apierrors.IsNotFound(err))

	require.NoError(t, env.APIServer.Start(ctx))
	_, err = cs.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{})
	require.NoError(t, err)
}

func cronJob(name, schedule string) *batchv1.CronJob {
	return &batchv1.CronJob{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: batchv1.CronJobSpec{
			Schedule: schedule,
			JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{
				Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyNever,
					Containers:    []corev1.Container{{Name: "job", Image: "registry.example/tick:1"}},
				},
			}}},
		},
	}
}
