package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/datajobs/datajobs/internal/store"
)

// server is one `datajobs serve` process.
type server struct {
	name    string
	cmd     *exec.Cmd
	addr    string
	admin   string        // the admin listener: /metrics
	exited  chan struct{} // closed once the process has exited and waitErr is set
	waitErr error
}

// serve starts `datajobs serve` on a free loopback port against the fleet, logging to
// out/<name>.log, with env added to this process's environment and extra flags.
func (b *bench) serve(ctx context.Context, f *fleet, name string, env []string, extra ...string) (*server, error) {
	return b.serveBin(ctx, f, b.datajobs, name, env, extra...)
}

// serveBin is serve of the datajobs binary bin.
func (b *bench) serveBin(ctx context.Context, f *fleet, bin, name string, env []string, extra ...string) (*server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := ln.Addr().String()
	ln.Close()
	adminLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	admin := adminLn.Addr().String()
	adminLn.Close()
	logFile, err := os.Create(filepath.Join(b.outDir, name+".log"))
	if err != nil {
		return nil, err
	}
	args := append([]string{
		"serve", "--listen", addr, "--admin-listen", admin, "--auth-mode", "none", "--database-url", f.dbURL,
		"--kubeconfig", b.kubeconfig, "--namespace", f.ns, "--sync-workers", strconv.Itoa(b.workers), "--log-format", "json",
		// The jobs run prebuilt images of a registry that is not there: not what is measured.
		"--verify-prebuilt-images=false", "--admin-profiling",
	},
		b.limits.flags()...)
	cmd := exec.CommandContext(ctx, bin, append(args, extra...)...)
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	s := &server{name: name, cmd: cmd, addr: addr, admin: admin, exited: make(chan struct{})}
	go func() { // owned by the server: stop waits for it
		s.waitErr = cmd.Wait()
		logFile.Close()
		close(s.exited)
	}()
	return s, nil
}

// stop ends the process gracefully (SIGTERM), or kills it after 30 s.
func (s *server) stop() {
	_ = s.cmd.Process.Signal(syscall.SIGCONT)
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(30 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.exited
	}
}

// holds tells whether holder (host-<pid>-<random>) names this process.
func (s *server) holds(holder string) bool {
	return strings.Contains(holder, "-"+strconv.Itoa(s.cmd.Process.Pid)+"-")
}

func (s *server) get(ctx context.Context, path string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+s.admin+path, nil) // /metrics and /healthz
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	return string(body), err
}

// save writes what the admin listener answers at path to file (a profile).
func (s *server) save(ctx context.Context, path, file string) error {
	body, err := s.get(ctx, path)
	if err != nil {
		return err
	}
	return os.WriteFile(file, []byte(body), 0o644)
}

// poll calls cond every interval until it is true, or fails after timeout.
func poll(ctx context.Context, interval, timeout time.Duration, what string, cond func() (bool, error)) error {
	deadline := time.Now().Add(timeout)
	for {
		ok, err := cond()
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			if err != nil {
				return fmt.Errorf("%s: not within %s: %w", what, timeout, err)
			}
			return fmt.Errorf("%s: not within %s", what, timeout)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %w", what, ctx.Err())
		case <-time.After(interval):
		}
	}
}

// failover starts two serve processes, lets the first become leader, freezes it
// (SIGSTOP), writes n new deployments, kills it (SIGKILL) and times the second one's
// takeover and its apply of all n deployments, with hogs busy processes beside it from
// the freeze on.
func (b *bench) failover(ctx context.Context, n, hogs int) error {
	b.printf("## failover (%d pending deployments, two `datajobs serve` processes, %s, %d CPU hogs)\n\n", n, b.datajobs, hogs)
	f, err := newFleet(ctx, b, false)
	if err != nil {
		return err
	}
	defer f.drop()
	a, err := b.serve(ctx, f, "failover-a", nil)
	if err != nil {
		return err
	}
	defer a.stop()
	if err := poll(ctx, 20*time.Millisecond, time.Minute, "first process leads", func() (bool, error) {
		holder, _, exp, err := f.db.LeaseHolder(ctx, store.SyncLeaseName)
		return err == nil && a.holds(holder) && exp.After(time.Now()), err
	}); err != nil {
		return err
	}
	if err := poll(ctx, 50*time.Millisecond, time.Minute, "first process makes its first pass", func() (bool, error) {
		m, err := a.get(ctx, "/metrics")
		return strings.Contains(m, `datajobs_sync_passes_total{result="ok",target="default"}`), err
	}); err != nil {
		return err
	}
	bproc, err := b.serve(ctx, f, "failover-b", nil)
	if err != nil {
		return err
	}
	defer bproc.stop()
	if err := poll(ctx, 20*time.Millisecond, time.Minute, "second process serves", func() (bool, error) {
		_, err := bproc.get(ctx, "/healthz")
		return err == nil, err
	}); err != nil {
		return err
	}
	names := jobNames(n)
	if err := f.createJobs(ctx, names, 8); err != nil {
		return err
	}
	leaderRSS, _ := processRSS(a.cmd.Process.Pid)
	followerRSS, _ := processRSS(bproc.cmd.Process.Pid)
	_, epochA, _, err := f.db.LeaseHolder(ctx, store.SyncLeaseName)
	if err != nil {
		return err
	}

	stopHogs, err := startHogs(ctx, hogs)
	if err != nil {
		return err
	}
	defer stopHogs()
	tStop := time.Now()
	if err := a.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		return err
	}
	_, _, expires, err := f.db.LeaseHolder(ctx, store.SyncLeaseName)
	if err != nil {
		return err
	}
	if err := f.deployJobs(ctx, names, 8); err != nil {
		return err
	}
	tWritten := time.Now()
	if err := a.cmd.Process.Kill(); err != nil {
		return err
	}
	tKill := time.Now()
	<-a.exited
	if a.waitErr == nil {
		return fmt.Errorf("first process exited cleanly; want killed")
	}
	if !strings.Contains(a.waitErr.Error(), "killed") {
		return fmt.Errorf("first process: want killed: %w", a.waitErr)
	}
	b.cpu.extra["b"] = bproc.cmd.Process.Pid
	defer delete(b.cpu.extra, "b")

	var epochB int64
	var tLead time.Time
	if err := poll(ctx, 5*time.Millisecond, time.Minute, "second process leads", func() (bool, error) {
		holder, epoch, _, err := f.db.LeaseHolder(ctx, store.SyncLeaseName)
		if err == nil && bproc.holds(holder) && epoch > epochA {
			epochB, tLead = epoch, time.Now()
			return true, nil
		}
		return false, err
	}); err != nil {
		return err
	}
	// The new leader's CPU profile over its first 10 s as leader, for where the apply
	// part's time goes in this process (the CPU report below has the other processes').
	profiled := make(chan error, 1)
	go func() {
		profiled <- bproc.save(ctx, "/debug/pprof/profile?seconds=10", filepath.Join(b.outDir, "failover-b.cpu.pprof"))
	}()
	// Polled cheaply (a count of the actual rows, every 50 ms), then checked in full.
	c0 := b.cpu.sample()
	var tSynced time.Time
	err = poll(ctx, 50*time.Millisecond, 5*time.Minute, "all deployments applied", func() (bool, error) {
		var applied int
		err := f.conn.QueryRow(ctx, `SELECT count(*) FROM actual_data_job_deployment`).Scan(&applied)
		tSynced = time.Now()
		return err == nil && applied >= n, err
	})
	cpu := c0.to(b.cpu.sample())
	if err != nil {
		return err
	}
	synced, err := f.syncedCount(ctx)
	if err != nil {
		return fmt.Errorf("count synced deployments: %w", err)
	}
	if synced != n {
		return fmt.Errorf("%d of %d deployments synced in the database", synced, n)
	}
	got, err := countCronJobs(ctx, b.admin, f.ns)
	if err != nil {
		return err
	}
	if got != n {
		return fmt.Errorf("%d CronJobs after failover, want %d", got, n)
	}
	floorTook, floorCPU, err := b.failoverFloor(ctx, f)
	stopHogs()
	if err != nil {
		return fmt.Errorf("floor: %w", err)
	}
	since := func(t time.Time) string { return secs(t.Sub(tStop)) }
	b.printf("| event | time since the leader froze (SIGSTOP) |\n|---|---|\n")
	b.printf("| %d deployments written (service, 8 at a time) | %s |\n", n, since(tWritten))
	b.printf("| leader killed (SIGKILL) | %s |\n", since(tKill))
	b.printf("| frozen leader's lease expired (its expires_at) | %s |\n", since(expires))
	b.printf("| second process took the lease (epoch %d → %d) | %s |\n", epochA, epochB, since(tLead))
	b.printf("| all %d deployments synced (CronJobs created, rows recorded) | %s |\n", n, since(tSynced))
	b.printf("\nLease part: %s from the freeze (%s after the kill; the lease had %s left at the freeze; the follower tries again at its expiry). "+
		"Apply part: %s from the takeover to all %d synced (%.0f deployments/s), at client QPS/burst %s.\n",
		secs(tLead.Sub(tStop)), secs(tLead.Sub(tKill)), secs(expires.Sub(tStop)), secs(tSynced.Sub(tLead)), n,
		float64(n)/tSynced.Sub(tLead).Seconds(), b.limits)
	b.printf("\nFloor: the same %d CronJobs created by a bare client-go loop (plain creates, %d at a time) in a namespace of their own, "+
		"with the hogs still running and the new leader idle: %s (%0.2fx of it the apply part); the lease part plus the floor: %s.\n",
		n, b.workers, secs(floorTook), tSynced.Sub(tLead).Seconds()/floorTook.Seconds(), secs(tLead.Sub(tStop)+floorTook))
	b.printf("\nCPU during the floor: %s\n", floorCPU)
	newLeaderRSS, _ := processRSS(bproc.cmd.Process.Pid)
	b.printf("\nRSS with %d jobs and no deployment: leader %s, follower %s; the follower once leader with %d CronJobs: %s.\n",
		n, mib(leaderRSS), mib(followerRSS), n, mib(newLeaderRSS))
	b.printf("\nCPU during the apply part: %s\n", cpu)
	if err := <-profiled; err != nil {
		b.printf("\nno CPU profile of the new leader: %v\n\n", err)
	} else {
		b.printf("\nthe new leader's CPU profile, its first 10 s as leader: `go tool pprof -top %s`\n\n", filepath.Join(b.outDir, "failover-b.cpu.pprof"))
	}
	return nil
}

// failoverFloor creates the fleet's CronJobs again, as rendered, with a bare client-go
// loop in a namespace of its own: what the apply part would take if the new leader's
// only work were the apiserver's creates, on the machine as busy as it was. The profile
// scenario's plain-create floor is the same.
func (b *bench) failoverFloor(ctx context.Context, f *fleet) (time.Duration, cpuReport, error) {
	objs, err := f.rendered(ctx)
	if err != nil {
		return 0, cpuReport{}, err
	}
	ns, drop, err := b.namespace(ctx)
	if err != nil {
		return 0, cpuReport{}, err
	}
	defer drop()
	for _, o := range objs {
		o.Namespace = ns
	}
	c0 := b.cpu.sample()
	took, _, err := b.floor(ctx, ns, objs)
	return took, c0.to(b.cpu.sample()), err
}

// startHogs starts n busy shell loops (the machine's other work, counted in "others") and
// returns what stops them; it may be called more than once.
func startHogs(ctx context.Context, n int) (stop func(), err error) {
	var cmds []*exec.Cmd
	stop = func() {
		for _, c := range cmds {
			_ = c.Process.Kill()
			_ = c.Wait()
		}
		cmds = nil
	}
	for range n {
		c := exec.CommandContext(ctx, "sh", "-c", "while :; do :; done")
		if err := c.Start(); err != nil {
			stop()
			return nil, fmt.Errorf("start a CPU hog: %w", err)
		}
		cmds = append(cmds, c)
	}
	return stop, nil
}
