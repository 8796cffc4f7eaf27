package devenv

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5"
)

// DatabaseName is the database the environment creates for the service.
const DatabaseName = "datajobs"

// PostgresConfig configures a local PostgreSQL server.
type PostgresConfig struct {
	// Dir holds the server's files (data/ and run/). Required. As root, the server runs as
	// the postgres user (else nobody), which must be able to reach Dir: parents under the
	// temporary folder get o+x; elsewhere (under /root), the files go to
	// $TMPDIR/datajobs-pg-<hash of Dir> and Dir becomes a symbolic link to that folder.
	Dir string
	// LogPath receives the server's output (default: Dir/postgres.log).
	LogPath string
	// BinDir holds initdb and postgres (default: the newest /usr/lib/postgresql/*/bin, then
	// `pg_config --bindir`).
	BinDir string
	// Port is the TCP port on 127.0.0.1 to try first (default: a free one). Either is
	// replaced by another free one when another process takes it first
	// (processSpec.picked): read Postgres.Port.
	Port int
	// Fast turns durability off (fsync, synchronous_commit, full_page_writes) for tests.
	Fast bool
	// ReplicaOf, when not zero, is the port of a primary on 127.0.0.1 this server streams
	// from as a hot standby (a real streaming replica): on first use its data folder is a
	// copy of the primary's (pg_basebackup), not a new one.
	ReplicaOf int
	// Logger receives the environment's own logs (default: discarded).
	Logger *slog.Logger
}

// Postgres is a local PostgreSQL server. Stop and Start (from the embedded Process) stop and
// start it again on the same port, with the same data.
type Postgres struct {
	*Process
	// Port is the server's port on 127.0.0.1.
	Port int
	// DataDir is the server's data folder.
	DataDir string
}

// StartPostgres initialises the data folder on first use (trust authentication on loopback,
// superuser "postgres", a database named DatabaseName), starts the server and waits until
// it answers SQL.
func StartPostgres(ctx context.Context, cfg PostgresConfig) (*Postgres, error) {
	if cfg.Dir == "" {
		return nil, errors.New("start postgres: Dir is required")
	}
	logger := cmp.Or(cfg.Logger, slog.New(slog.DiscardHandler))
	binDir, err := findPostgres(cfg.BinDir)
	if err != nil {
		return nil, err
	}
	cred, err := postgresCredential()
	if err != nil {
		return nil, err
	}
	base, err := postgresBase(cfg.Dir, cred)
	if err != nil {
		return nil, err
	}
	logPath := cmp.Or(cfg.LogPath, filepath.Join(base, "postgres.log"))
	dataDir := filepath.Join(base, "data")
	runDir := filepath.Join(base, "run")
	for _, dir := range []string{base, runDir} {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("start postgres: %w", err)
		}
		if err := chownTo(dir, cred); err != nil {
			return nil, err
		}
	}

	if _, err := os.Stat(filepath.Join(dataDir, "PG_VERSION")); errors.Is(err, fs.ErrNotExist) {
		if err := makeDataDir(ctx, binDir, dataDir, logPath, cred, cfg); err != nil {
			return nil, err
		}
	}

	server := postgresServer{binDir: binDir, base: base, dataDir: dataDir, runDir: runDir, logPath: logPath, cred: cred, fast: cfg.Fast, logger: logger}
	port := cfg.Port
	if port == 0 {
		if port, err = freePort(); err != nil {
			return nil, err
		}
	}
	return server.start(ctx, port)
}

// postgresServer is what one start of the server needs.
type postgresServer struct {
	binDir, base, dataDir, runDir, logPath string
	cred                                   *syscall.Credential
	fast                                   bool
	logger                                 *slog.Logger
}

// start starts the server on port (or another, when that one is lost: processSpec.picked)
// and waits until it serves.
func (s postgresServer) start(ctx context.Context, port int) (*Postgres, error) {
	pg := &Postgres{Port: port, DataDir: s.dataDir}
	pg.Process = newProcess("postgres", s.logPath, processSpec{
		path: filepath.Join(s.binDir, "postgres"),
		dir:  s.base,
		cred: s.cred,
		// SIGINT is PostgreSQL's "fast" shutdown: it does not wait for clients to leave.
		stopSignal: syscall.SIGINT,
		ready: func(ctx context.Context) error {
			return ensureDatabase(ctx, pg.URL("postgres"), DatabaseName)
		},
		picked:    []*int{&pg.Port},
		configure: func(p *processSpec) error { p.args = s.args(pg.Port); return nil },
	}, s.logger)
	if err := pg.Start(ctx); err != nil {
		return nil, err
	}
	return pg, nil
}

func (s postgresServer) args(port int) []string {
	args := []string{
		"-D", s.dataDir, "-p", strconv.Itoa(port), "-c", "listen_addresses=127.0.0.1",
		"-c", "max_connections=300",
	}
	// A Unix socket path is limited to 107 bytes; without one, TCP alone serves.
	if len(s.runDir) < 80 {
		args = append(args, "-k", s.runDir)
	} else {
		args = append(args, "-k", "")
	}
	if s.fast {
		args = append(args, "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off")
	}
	return args
}

// URL returns the connection URL of database db on this server.
func (p *Postgres) URL(db string) string {
	u := url.URL{
		Scheme:   "postgres",
		User:     url.User("postgres"),
		Host:     "127.0.0.1:" + strconv.Itoa(p.Port),
		Path:     "/" + db,
		RawQuery: "sslmode=disable",
	}
	return u.String()
}

// makeDataDir creates the server's data folder: a new cluster (initdb), or for a replica a
// copy of its primary's that starts streaming from it (pg_basebackup -R).
func makeDataDir(ctx context.Context, binDir, dataDir, logPath string, cred *syscall.Credential, cfg PostgresConfig) error {
	tool, args := "initdb", []string{"-D", dataDir, "-U", "postgres", "--auth=trust", "--encoding=UTF8", "--locale=C", "--no-instructions"}
	if cfg.Fast {
		args = append(args, "--no-sync")
	}
	if cfg.ReplicaOf != 0 {
		tool, args = "pg_basebackup", []string{
			"-D", dataDir, "-h", "127.0.0.1", "-p", strconv.Itoa(cfg.ReplicaOf), "-U", "postgres",
			"--write-recovery-conf", "--wal-method=stream", "--checkpoint=fast", "--no-sync",
		}
	}
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("%s: open log: %w", tool, err)
	}
	defer logFile.Close()
	cmd := exec.CommandContext(ctx, filepath.Join(binDir, tool), args...)
	cmd.Dir = filepath.Dir(dataDir)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL, Credential: cred}
	if err := cmd.Run(); err != nil {
		// Leave no half-made data folder behind: the next start would not make it again.
		_ = os.RemoveAll(dataDir)
		return fmt.Errorf("%s %s: %w; last lines of %s:\n%s", tool, dataDir, err, logPath, tail(logPath, 20))
	}
	return nil
}

// ensureDatabase pings the server and creates database name if it does not exist yet.
func ensureDatabase(ctx context.Context, adminURL, name string) error {
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var exists bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, name).Scan(&exists); err != nil {
		return err
	}
	if exists {
		return nil
	}
	_, err = conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize())
	return err
}

// CreateDatabase creates database name on the server of adminURL, as a copy of template
// when template is not empty. Tests use it to give each test its own migrated database.
func CreateDatabase(ctx context.Context, adminURL, name, template string) error {
	sql := "CREATE DATABASE " + pgx.Identifier{name}.Sanitize()
	if template != "" {
		sql += " TEMPLATE " + pgx.Identifier{template}.Sanitize()
	}
	return adminExec(ctx, adminURL, sql)
}

// DropDatabase drops database name on the server of adminURL, disconnecting its clients.
func DropDatabase(ctx context.Context, adminURL, name string) error {
	return adminExec(ctx, adminURL, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
}

func adminExec(ctx context.Context, adminURL, sql string) error {
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return fmt.Errorf("connect to postgres: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, sql); err != nil {
		return fmt.Errorf("%s: %w", sql, err)
	}
	return nil
}

// postgresCredential returns the unprivileged user to run PostgreSQL as when we are root
// (it refuses to run as root): "postgres" if it exists, else "nobody". Nil when not root.
func postgresCredential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	var u *user.User
	var err error
	for _, name := range []string{"postgres", "nobody"} {
		if u, err = user.Lookup(name); err == nil {
			break
		}
	}
	if err != nil {
		return nil, fmt.Errorf("running as root, postgres needs an unprivileged user (postgres or nobody): %w", err)
	}
	uid, _ := strconv.ParseUint(u.Uid, 10, 32)
	gid, _ := strconv.ParseUint(u.Gid, 10, 32)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), NoSetGroups: true}, nil
}

// postgresBase returns the folder for the server's files. As root, when cred's user cannot
// traverse the parents of dir: under the temporary folder it adds o+x to them; elsewhere
// (a state folder under /root) it uses /tmp/datajobs-pg-<hash of dir> instead and makes
// dir a symbolic link to it, leaving the user's folders' permissions alone.
func postgresBase(dir string, cred *syscall.Credential) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("postgres folder: %w", err)
	}
	if resolved, err := filepath.EvalSymlinks(abs); err == nil {
		abs = resolved
	}
	if cred == nil {
		return abs, nil
	}
	if err := os.MkdirAll(filepath.Dir(abs), 0o755); err != nil {
		return "", fmt.Errorf("postgres folder: %w", err)
	}
	if canTraverse(filepath.Dir(abs), cred) {
		return abs, nil
	}
	// Under the temporary folder (a test's t.TempDir is 0700), opening the folders for
	// traversal is harmless and leaves nothing behind when they are removed.
	if tmp := filepath.Clean(os.TempDir()); strings.HasPrefix(abs, tmp+string(filepath.Separator)) {
		for dir := filepath.Dir(abs); dir != tmp; dir = filepath.Dir(dir) {
			st, err := os.Stat(dir)
			if err != nil {
				return "", fmt.Errorf("postgres folder: %w", err)
			}
			if err := os.Chmod(dir, st.Mode().Perm()|0o001); err != nil {
				return "", fmt.Errorf("postgres folder: %w", err)
			}
		}
		if canTraverse(filepath.Dir(abs), cred) {
			return abs, nil
		}
	}
	sum := sha256.Sum256([]byte(abs))
	alt := filepath.Join(os.TempDir(), "datajobs-pg-"+hex.EncodeToString(sum[:8]))
	if err := os.MkdirAll(alt, 0o700); err != nil {
		return "", fmt.Errorf("postgres folder: %w", err)
	}
	if _, err := os.Lstat(abs); errors.Is(err, fs.ErrNotExist) {
		if err := os.Symlink(alt, abs); err != nil {
			return "", fmt.Errorf("postgres folder: %w", err)
		}
	}
	return alt, nil
}

// canTraverse reports whether the user of cred may enter dir and each of its parents.
func canTraverse(dir string, cred *syscall.Credential) bool {
	for {
		st, err := os.Stat(dir)
		if err != nil {
			return false
		}
		sys, ok := st.Sys().(*syscall.Stat_t)
		if !ok {
			return false
		}
		mode := st.Mode().Perm()
		allowed := mode&0o001 != 0 ||
			(sys.Uid == cred.Uid && mode&0o100 != 0) ||
			(sys.Gid == cred.Gid && mode&0o010 != 0)
		if !allowed {
			return false
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return true
		}
		dir = parent
	}
}

func chownTo(path string, cred *syscall.Credential) error {
	if cred == nil {
		return nil
	}
	if err := os.Chown(path, int(cred.Uid), int(cred.Gid)); err != nil {
		return fmt.Errorf("postgres folder: %w", err)
	}
	return nil
}
