package devenv

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Process is one child process of the environment (postgres, etcd, kube-apiserver, ...).
// It can be stopped and started again on the same port with the same arguments, which is
// how tests simulate "the database is down, then back".
type Process struct {
	// Name names the component in errors and logs, for example "kube-apiserver".
	Name string
	// LogPath is the file that receives the child's stdout and stderr (appended to).
	LogPath string

	spec   processSpec
	logger *slog.Logger

	mu       sync.Mutex
	cmd      *exec.Cmd
	done     chan struct{} // closed when the child has exited and been reaped
	exitErr  error
	stopping bool
}

// processSpec is everything needed to (re)launch a child.
type processSpec struct {
	path string
	args []string
	dir  string
	env  []string
	// cred, when set, runs the child as another user (postgres refuses to run as root).
	cred *syscall.Credential
	// unshareMount runs the child in a new mount namespace whose mounts are private (Go
	// makes / MS_REC|MS_PRIVATE in it): nothing it mounts reaches the host (node.go).
	unshareMount bool
	// stopSignal asks the child to shut down (SIGTERM unless set; postgres wants SIGINT).
	stopSignal syscall.Signal
	// stopTimeout is how long Stop waits after stopSignal before SIGKILL.
	stopTimeout time.Duration
	// readyTimeout bounds how long Start waits for ready to succeed.
	readyTimeout time.Duration
	// ready returns nil once the child serves; Start polls it.
	ready func(ctx context.Context) error
	// picked are the ports the child listens on that were picked for it (freePort, or a
	// pick saved in ports.json), promised to no one yet. A pick is checked free, then
	// handed to the child: another process (an environment of another test binary or
	// session) may bind it in between, and the child exits "address already in use". Start
	// then picks them all again, calls configure, and tries again, up to portAttempts
	// times. Once the child has started they are its own: a restart keeps them.
	picked []*int
	// configure, when set, derives what depends on the ports (args, env, ready, the
	// owner's addresses and files) from their current values, before each start.
	configure func(*processSpec) error
}

// portAttempts bounds the starts of a child that keeps losing its picked ports.
const portAttempts = 3

// errPortLost is a start that failed because a picked port was taken.
var errPortLost = errors.New("a picked port was taken by another process")

// addrInUse is what a child logs when its port is taken: Go's "bind: address already in
// use", PostgreSQL's "could not bind IPv4 address …: Address already in use".
const addrInUse = "address already in use"

func newProcess(name, logPath string, spec processSpec, logger *slog.Logger) *Process {
	spec.stopSignal = cmpSignal(spec.stopSignal, syscall.SIGTERM)
	if spec.stopTimeout <= 0 {
		spec.stopTimeout = 15 * time.Second
	}
	if spec.readyTimeout <= 0 {
		spec.readyTimeout = 2 * time.Minute
	}
	return &Process{Name: name, LogPath: logPath, spec: spec, logger: logger}
}

func cmpSignal(s, def syscall.Signal) syscall.Signal {
	if s == 0 {
		return def
	}
	return s
}

// PID returns the child's process id, or 0 when it is not running.
func (p *Process) PID() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.exited() {
		return 0
	}
	return p.cmd.Process.Pid
}

// Running reports whether the child is running.
func (p *Process) Running() bool { return p.PID() != 0 }

// exited reports whether the current child has exited; p.mu must be held.
func (p *Process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Start launches the child and waits until it is ready. If the child exits first, or is not
// ready in time, Start stops it and returns an error with the tail of its log. A child that
// lost a picked port to another process is started again on new ones (processSpec.picked).
func (p *Process) Start(ctx context.Context) error {
	for attempt := 1; ; attempt++ {
		if p.spec.configure != nil {
			if err := p.spec.configure(&p.spec); err != nil {
				return fmt.Errorf("start %s: %w", p.Name, err)
			}
		}
		err := p.startOnce(ctx)
		if err == nil {
			p.spec.picked = nil
			return nil
		}
		if attempt == portAttempts || !errors.Is(err, errPortLost) {
			return err
		}
		lost := make([]int, len(p.spec.picked))
		for i, port := range p.spec.picked {
			lost[i] = *port
			if *port, err = freePort(); err != nil {
				return err
			}
		}
		p.logger.WarnContext(ctx, "devenv component lost a picked port to another process, trying new ones",
			"component", p.Name, "lost", lost, "attempt", attempt)
	}
}

// startOnce is one start of the child on its current ports.
func (p *Process) startOnce(ctx context.Context) error {
	p.mu.Lock()
	if p.cmd != nil && !p.exited() {
		p.mu.Unlock()
		return fmt.Errorf("start %s: already running with pid %d", p.Name, p.cmd.Process.Pid)
	}
	from := fileSize(p.LogPath)
	logFile, err := os.OpenFile(p.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		p.mu.Unlock()
		return fmt.Errorf("start %s: open log: %w", p.Name, err)
	}
	fmt.Fprintf(logFile, "\n=== devenv: starting %s at %s: %s %s\n", p.Name,
		time.Now().Format(time.RFC3339), p.spec.path, strings.Join(p.spec.args, " "))
	cmd := exec.Command(p.spec.path, p.spec.args...)
	cmd.Dir = p.spec.dir
	cmd.Env = p.spec.env
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{
		// Its own process group, so that Stop can kill what the child forked too.
		Setpgid: true,
		// Die with us if we are killed without a chance to clean up.
		Pdeathsig:  syscall.SIGKILL,
		Credential: p.spec.cred,
	}
	if p.spec.unshareMount {
		cmd.SysProcAttr.Unshareflags = syscall.CLONE_NEWNS
	}
	err = cmd.Start()
	logFile.Close() // the child holds its own copy
	if err != nil {
		p.mu.Unlock()
		return fmt.Errorf("start %s: %w", p.Name, err)
	}
	done := make(chan struct{})
	p.cmd, p.done, p.exitErr, p.stopping = cmd, done, nil, false
	p.mu.Unlock()

	// The owner of this goroutine is the Process: Stop waits for done.
	go func() {
		err := cmd.Wait()
		p.mu.Lock()
		p.exitErr = err
		stopping := p.stopping
		p.mu.Unlock()
		close(done)
		if !stopping {
			p.logger.WarnContext(ctx, "devenv component exited", "component", p.Name, "err", err, "log", p.LogPath)
		}
	}()

	if err := p.waitReady(ctx, done, from); err != nil {
		stopErr := p.Stop()
		return errors.Join(err, stopErr)
	}
	p.logger.DebugContext(ctx, "devenv component ready", "component", p.Name, "pid", cmd.Process.Pid)
	return nil
}

// waitReady polls ready, 50 ms after each attempt, until it passes. A child that logged, since offset from of its
// log, that a picked port is taken has lost it, whether it exited (most do) or goes on
// without that listener (Mailpit without SMTP): errPortLost.
func (p *Process) waitReady(ctx context.Context, done <-chan struct{}, from int64) error {
	if p.spec.ready == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, p.spec.readyTimeout)
	defer cancel()
	var lastErr error
	for {
		attempt, cancelAttempt := context.WithTimeout(ctx, 2*time.Second)
		lastErr = p.spec.ready(attempt)
		cancelAttempt()
		if p.lostPort(from) {
			return fmt.Errorf("%s: %w; last lines of %s:\n%s", p.Name, errPortLost, p.LogPath, tail(p.LogPath, 5))
		}
		if lastErr == nil {
			return nil
		}
		select {
		case <-done:
			if p.lostPort(from) {
				return fmt.Errorf("%s exited: %w; last lines of %s:\n%s", p.Name, errPortLost, p.LogPath, tail(p.LogPath, 5))
			}
			p.mu.Lock()
			exitErr := cmp.Or(p.exitErr, errors.New("exit status 0"))
			p.mu.Unlock()
			return fmt.Errorf("%s exited during start-up (%w); last lines of %s:\n%s",
				p.Name, exitErr, p.LogPath, tail(p.LogPath, 20))
		case <-ctx.Done():
			return fmt.Errorf("%s not ready: %w (last check: %w); last lines of %s:\n%s",
				p.Name, ctx.Err(), lastErr, p.LogPath, tail(p.LogPath, 20))
		case <-time.After(50 * time.Millisecond): // the next attempt, 50 ms after this one ended
		}
	}
}

// Stop asks the child to shut down, kills its process group if it has not exited after the
// stop timeout, and returns once it has been reaped. Stopping a stopped process does nothing.
func (p *Process) Stop() error {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	if cmd == nil {
		p.mu.Unlock()
		return nil
	}
	p.stopping = true
	p.mu.Unlock()
	pid := cmd.Process.Pid

	var errs []error
	select {
	case <-done:
		// It exited by itself earlier; its PID may belong to someone else by now.
		p.forget()
		return nil
	default:
		if err := syscall.Kill(pid, p.spec.stopSignal); err != nil && !errors.Is(err, syscall.ESRCH) {
			errs = append(errs, fmt.Errorf("stop %s: signal pid %d: %w", p.Name, pid, err))
		}
		select {
		case <-done:
		case <-time.After(p.spec.stopTimeout):
			p.logger.Warn("devenv component did not stop in time, killing it", "component", p.Name, "pid", pid)
			if err := syscall.Kill(-pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
				errs = append(errs, fmt.Errorf("stop %s: kill group %d: %w", p.Name, pid, err))
			}
			<-done
		}
	}
	// Sweep anything the child forked and left behind in its group (ESRCH when none). The
	// group id cannot have been reused while members remain.
	if err := syscall.Kill(-pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		errs = append(errs, fmt.Errorf("stop %s: kill group %d: %w", p.Name, pid, err))
	}
	p.forget()
	return errors.Join(errs...)
}

// expectExit marks the child as being stopped by its owner (the real node's sweep kills
// it), so that its exit is not reported as a failure.
func (p *Process) expectExit() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stopping = true
}

// forget drops the reaped child, so that a second Stop signals nothing.
func (p *Process) forget() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cmd = nil
}

// lostPort reports whether the child has picked ports and logged, since offset from, that
// one is taken.
func (p *Process) lostPort(from int64) bool {
	return len(p.spec.picked) > 0 && logSince(p.LogPath, from, addrInUse)
}

func fileSize(path string) int64 {
	st, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return st.Size()
}

// logSince reports whether the file, from offset on, contains s (any case).
func logSince(path string, offset int64, s string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return false
	}
	b, err := io.ReadAll(io.LimitReader(f, 1<<20))
	return err == nil && bytes.Contains(bytes.ToLower(b), []byte(strings.ToLower(s)))
}

// tail returns the last n lines of a file, for error messages.
func tail(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Sprintf("(cannot read log: %v)", err)
	}
	defer f.Close()
	const maxBytes = 16 << 10
	if st, err := f.Stat(); err == nil && st.Size() > maxBytes {
		if _, err := f.Seek(-maxBytes, io.SeekEnd); err != nil {
			return fmt.Sprintf("(cannot read log: %v)", err)
		}
	}
	b, err := io.ReadAll(f)
	if err != nil {
		return fmt.Sprintf("(cannot read log: %v)", err)
	}
	lines := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return "    " + string(bytes.Join(lines, []byte("\n    ")))
}
