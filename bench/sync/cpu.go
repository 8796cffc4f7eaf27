package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// clockTicks is the kernel's USER_HZ, the unit of CPU times in /proc (100 on Linux).
const clockTicks = 100

// cpuGroups names the processes whose CPU time a phase reports: the environment's
// (found once, they live as long as it does), this process, and extra ones (serve
// processes of the failover benchmark). The rest of the machine is "others".
type cpuGroups struct {
	pids  map[string][]int
	pgPID int // the postmaster; its backends are its children
	extra map[string]int
}

// findEnvProcesses finds the environment's processes: those whose command line names the
// state folder (etcd, kube-apiserver, controllers, kwok) and the postmaster on pgPort.
func findEnvProcesses(stateDir, pgPort string) *cpuGroups {
	g := &cpuGroups{pids: map[string][]int{}, extra: map[string]int{}}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		raw, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || len(raw) == 0 {
			continue
		}
		args := strings.Split(string(bytes.TrimRight(raw, "\x00")), "\x00")
		base := filepath.Base(args[0])
		line := strings.Join(args, " ")
		switch {
		case base == "postgres" && strings.Contains(line, "-p "+pgPort+" "):
			g.pgPID = pid
		case !strings.Contains(line, stateDir):
		case base == "kube-apiserver":
			g.pids["apiserver"] = append(g.pids["apiserver"], pid)
		case base == "etcd":
			g.pids["etcd"] = append(g.pids["etcd"], pid)
		case base == "kube-controller-manager", base == "kube-scheduler", base == "kwok":
			g.pids["controllers"] = append(g.pids["controllers"], pid)
		}
	}
	return g
}

// cpuSample is the CPU seconds each group had used at one moment.
type cpuSample struct {
	at     time.Time
	groups map[string]float64
	busy   float64 // the whole machine's non-idle CPU seconds
}

// groupOrder is the order of the columns of a CPU report.
var groupOrder = []string{"bench", "apiserver", "etcd", "postgres", "controllers", "serve"}

func (g *cpuGroups) sample() cpuSample {
	s := cpuSample{at: time.Now(), groups: map[string]float64{}}
	for name, pids := range g.pids {
		for _, pid := range pids {
			u, _ := procCPU(pid, false)
			s.groups[name] += u
		}
	}
	self, _ := procCPU(os.Getpid(), false)
	s.groups["bench"] = self
	for _, pid := range g.extra {
		u, _ := procCPU(pid, true)
		s.groups["serve"] += u
	}
	if g.pgPID != 0 {
		u, _ := procCPU(g.pgPID, true)
		for _, child := range children(g.pgPID) {
			c, _ := procCPU(child, false)
			u += c
		}
		s.groups["postgres"] = u
	}
	s.busy = machineBusy()
	return s
}

// cpuReport is the CPU used between two samples, per group, in seconds.
type cpuReport struct {
	wall   time.Duration
	groups map[string]float64
	others float64
}

func (a cpuSample) to(b cpuSample) cpuReport {
	r := cpuReport{wall: b.at.Sub(a.at), groups: map[string]float64{}}
	known := 0.0
	for k, v := range b.groups {
		r.groups[k] = max(v-a.groups[k], 0)
		known += r.groups[k]
	}
	r.others = max(b.busy-a.busy-known, 0)
	return r
}

// ours is the CPU seconds of every group but others.
func (r cpuReport) ours() float64 {
	sum := 0.0
	for _, v := range r.groups {
		sum += v
	}
	return sum
}

// String renders the report as "bench 1.2s, apiserver 3.4s, ..., others 0.5s (87% of 2 cores)".
func (r cpuReport) String() string {
	var parts []string
	total := r.others
	for _, k := range groupOrder {
		if v, ok := r.groups[k]; ok && (v > 0 || k != "serve") {
			parts = append(parts, fmt.Sprintf("%s %.1fs", k, v))
			total += v
		}
	}
	parts = append(parts, fmt.Sprintf("others %.1fs", r.others))
	cores := float64(runtime.NumCPU())
	return fmt.Sprintf("%s (machine %.0f%% busy)", strings.Join(parts, ", "), 100*total/(r.wall.Seconds()*cores))
}

// procCPU reads a process's user+system CPU seconds, with its reaped children's when
// withChildren is set.
func procCPU(pid int, withChildren bool) (float64, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) may hold spaces; fields after it start past the last ')'.
	fields := strings.Fields(string(raw[bytes.LastIndexByte(raw, ')')+1:]))
	// fields[0] is field 3 (state); utime, stime, cutime, cstime are fields 14 to 17.
	sum := 0.0
	last := 14
	if withChildren {
		last = 16
	}
	for i := 11; i <= last; i++ {
		v, _ := strconv.ParseFloat(fields[i], 64)
		sum += v
	}
	return sum / clockTicks, nil
}

// children lists the processes whose parent is pid.
func children(pid int) []int {
	var out []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		raw, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		fields := strings.Fields(string(raw[bytes.LastIndexByte(raw, ')')+1:]))
		if len(fields) > 1 && fields[1] == strconv.Itoa(pid) {
			out = append(out, child)
		}
	}
	return out
}

// machineBusy is the machine's non-idle CPU seconds since boot, from /proc/stat.
func machineBusy() float64 {
	raw, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(raw), "\n")
	fields := strings.Fields(line)[1:]
	busy := 0.0
	for i, f := range fields {
		v, _ := strconv.ParseFloat(f, 64)
		if i == 3 || i == 4 || i >= 8 { // idle, iowait; guest times are already in user
			continue
		}
		busy += v
	}
	return busy / clockTicks
}

// loadAverage is the first field of /proc/loadavg.
func loadAverage() string {
	raw, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	return strings.Fields(string(raw))[0]
}
