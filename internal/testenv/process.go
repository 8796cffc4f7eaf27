package testenv

import (
	"bytes"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/devenv"
)

// Binary builds the datajobs command once per test binary, for tests that run it as a
// user or an operator would.
var Binary = sync.OnceValues(func() (string, error) {
	root, err := devenv.RepoRoot()
	if err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp("", "datajobs-bin-")
	if err != nil {
		return "", err
	}
	out := filepath.Join(dir, "datajobs")
	cmd := exec.Command("go", "build", "-o", out, "./cmd/datajobs")
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build: %w: %s", err, b)
	}
	return out, nil
})

// FreeAddr is a loopback address with a port that was free a moment ago.
func FreeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

// Process is a datajobs process a test started; it is stopped with SIGTERM when the test
// ends, and its output is logged if the test failed.
type Process struct {
	Cmd  *exec.Cmd
	logs *LogBuffer
}

// Logs is what the process has printed so far.
func (p *Process) Logs() string { return p.logs.String() }

// Start runs bin with args and env (the whole environment), and returns once ready (a
// URL) answers 200.
func Start(t testing.TB, bin string, args, env []string, ready string) *Process {
	t.Helper()
	p := &Process{Cmd: exec.Command(bin, args...), logs: &LogBuffer{}}
	p.Cmd.Env = env
	p.Cmd.Stdout, p.Cmd.Stderr = p.logs, p.logs
	require.NoError(t, p.Cmd.Start())
	t.Cleanup(func() {
		_ = p.Cmd.Process.Signal(syscall.SIGTERM)
		_ = p.Cmd.Wait()
		if t.Failed() {
			t.Logf("%s (pid %d) printed:\n%s", filepath.Base(bin), p.Cmd.Process.Pid, p.logs)
		}
	})
	require.Eventually(t, func() bool {
		resp, err := http.Get(ready)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, time.Minute, 100*time.Millisecond, "%s ready", ready)
	return p
}

// LogBuffer is a process's output, or any log sink a test reads while something writes.
type LogBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *LogBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *LogBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
