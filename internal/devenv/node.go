package devenv

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// A real node: a kubelet and containerd (with Debian's runc and the CNI bridge plugin) on
// this machine, in one private mount namespace, so that pods run for real
// (docs/test-environment.md). It needs root: the kubelet refuses any other uid, and cgroup
// v1 has no delegation for a rootless one. Everything it touches is fenced in:
//   - its processes and every mount they make (container root file systems, shm, netns,
//     volumes) live in the namespace, which the kernel drops with its last process;
//   - the sysctls the kubelet "fixes" at start are private copies bind-mounted in it;
//   - the host paths the kubelet and containerd hard-code (/run/containerd/s,
//     /var/lib/kubelet/device-plugins, /var/log/containers, /var/lib/cni) are on
//     tmpfs-backed overlays of /run, /var/lib and /var/log, seen only inside;
//   - its cgroups are one subtree per hierarchy, named after the state folder;
//   - its pods' network is a bridge of its own, named after the state folder too (nodenet.go).
// It is stopped by PID, namespace and cgroup, never by name (Node.Stop, sweep).

// NodeKind selects the nodes the pods of an environment run on.
type NodeKind string

const (
	// NodeKwok is one fake node run by kwok: pods "run" at once, no root needed.
	NodeKwok NodeKind = "kwok"
	// NodeReal is one real node and no fake one: every pod runs for real.
	NodeReal NodeKind = "real"
	// NodeBoth runs the fake node for every pod, and beside it the real node, tainted,
	// for the pods of namespaces that ask for it (RealNodeNamespace): the fast suites
	// stay on kwok, the real-node suite gets real pods.
	NodeBoth NodeKind = "both"
)

const (
	// RealNodeName is the real node's name: its address, because the kubelet refuses a
	// loopback --node-ip but takes an IP as hostname for the InternalIP.
	RealNodeName = "127.0.0.1"
	// RealNodeLabel (value "real") marks the real node.
	RealNodeLabel = "datajobs.dev/node"
	// RealNodeTaint (effect NoSchedule) keeps pods off the real node beside kwok.
	RealNodeTaint = "datajobs.dev/real-node"
	// PauseImageRepo is the sandbox image's repository in the environment's registry.
	PauseImageRepo = "datajobs-dev/pause:3.10"
)

// nodeSysctls are the /proc/sys files the node would change on the host: those the
// kubelet sets at start (setupKernelTunables), and ip_forward, which the CNI bridge plugin
// turns on for a gateway (pods reach the gateway's own address without it).
var nodeSysctls = []string{
	"vm/overcommit_memory", "vm/panic_on_oom", "kernel/panic", "kernel/panic_on_oops",
	"kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes", "net/ipv4/ip_forward",
}

// RealNodeUnavailable says why this process cannot run a real node, or "" when it can.
func RealNodeUnavailable() string {
	if os.Geteuid() != 0 {
		return "a real node needs root (the kubelet refuses other users; cgroup v1 cannot delegate to a rootless one)"
	}
	if err := syscall.Access("/sys/fs/cgroup/pids", 2); err != nil {
		return "a real node needs writable cgroup v1 hierarchies under /sys/fs/cgroup: " + err.Error()
	}
	return ""
}

// Node is a running real node.
type Node struct {
	// Gateway is the host's address on the pods' bridge: the one address of this machine
	// that the node's pods reach (Forward a service's port there for them).
	Gateway string
	// Bridge is the bridge's name.
	Bridge string

	dir    string // <state>/node
	cgroup string // the subtree's name in every hierarchy
	net    nodeNet
	proc   *Process
}

// nodeDirs are the host folders the node's processes must not change, overlaid in its
// namespace; the state folder may not be under one of them.
var nodeDirs = []string{"/run", "/var/lib", "/var/log"}

// startNode starts the real node and waits until it is Ready. The registry must run: the
// sandbox image is pushed to it first.
func (e *Env) startNode(ctx context.Context, cfg Config, p ports, keys pki) error {
	if why := RealNodeUnavailable(); why != "" {
		return errors.New(why)
	}
	if e.Registry == nil {
		return errors.New("a real node pulls its images from the environment's registry: build it with `bash " + registryScript + "`")
	}
	for _, d := range nodeDirs {
		if strings.HasPrefix(e.StateDir+"/", d+"/") {
			return fmt.Errorf("the state folder %s of a real node may not be under %s, which the node overlays", e.StateDir, d)
		}
	}
	sum := sha256.Sum256([]byte(e.StateDir))
	hash := hex.EncodeToString(sum[:6])
	n := &Node{dir: filepath.Join(e.StateDir, "node"), cgroup: "datajobs-node-" + hash}
	if err := n.sweep(); err != nil { // what a killed run left
		return err
	}
	// No pod survived the sweep: the addresses a killed run's pods held are free again.
	if err := os.RemoveAll(filepath.Join(n.dir, "cni", "ipam")); err != nil {
		return fmt.Errorf("real node: %w", err)
	}
	if err := os.MkdirAll(n.dir, 0o755); err != nil {
		return fmt.Errorf("real node: %w", err)
	}
	var err error
	if n.net, err = setUpNodeNet(e.StateDir, hash); err != nil {
		return err
	}
	n.Gateway, n.Bridge = n.net.gateway.String(), n.net.bridge
	e.mu.Lock()
	e.Node = n // from here on, Stop removes the bridge
	e.mu.Unlock()
	pause, err := pushPause(ctx, cfg.NodeBinDir, e.Registry.Addr+"/"+PauseImageRepo)
	if err != nil {
		return err
	}
	if err := keys.ensureNode(); err != nil {
		return err
	}
	files := nodeFiles{
		dir: n.dir, cgroup: n.cgroup, binDir: cfg.NodeBinDir, kubeBin: cfg.BinDir, keys: keys,
		registry: e.Registry.Addr, pause: pause, kubelet: p.Kubelet, healthz: p.KubeletHealthz,
		apiserver: e.APIServerURL, taint: cfg.Node == NodeBoth, logs: filepath.Join(e.StateDir, "logs"), net: n.net,
	}
	script, err := files.write()
	if err != nil {
		return err
	}
	if err := n.makeCgroups(); err != nil {
		return err
	}
	cs, err := e.clientset()
	if err != nil {
		return err
	}
	// The script's log is the kubelet's: its output is what a failed start needs.
	n.proc = newProcess("real-node", filepath.Join(e.StateDir, "logs", "kubelet.log"), processSpec{
		path: "bash", args: []string{script}, dir: n.dir, unshareMount: true,
		ready: func(ctx context.Context) error {
			node, err := cs.CoreV1().Nodes().Get(ctx, RealNodeName, metav1.GetOptions{})
			if err != nil || !nodeReady(node) {
				return fmt.Errorf("node %s not Ready yet; containerd's log: %s: %w", RealNodeName, filepath.Join(files.logs, "containerd.log"), err)
			}
			return nil
		},
	}, e.logger)
	return n.proc.Start(ctx)
}

// cgroupDirs are the node's subtree in every cgroup hierarchy: the v1 ones, and the
// unified (v2) one of a hybrid host, where the kubelet's runc makes its cgroups too.
func (n *Node) cgroupDirs() []string {
	roots, _ := filepath.Glob("/sys/fs/cgroup/*")
	dirs := make([]string, len(roots))
	for i, r := range roots {
		dirs[i] = filepath.Join(r, n.cgroup)
	}
	return dirs
}

// makeCgroups creates the subtree the kubelet's cgroupRoot names. cpuset needs its CPUs
// and memory nodes copied from the parent before a process may join.
func (n *Node) makeCgroups() error {
	for _, d := range n.cgroupDirs() {
		if strings.HasPrefix(d, "/sys/fs/cgroup/unified/") {
			continue // the kubelet's cgroupRoot must exist in the v1 hierarchies only
		}
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("real node cgroup: %w", err)
		}
	}
	for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
		b, err := os.ReadFile(filepath.Join("/sys/fs/cgroup/cpuset", f))
		if err != nil {
			continue // no cpuset hierarchy
		}
		if err := os.WriteFile(filepath.Join("/sys/fs/cgroup/cpuset", n.cgroup, f), b, 0o644); err != nil {
			return fmt.Errorf("real node cgroup: %w", err)
		}
	}
	return nil
}

// Stop stops the kubelet (SIGTERM first, so that it restarts no container), then kills
// every process of the node and removes its cgroups.
func (n *Node) Stop() error {
	if n.proc != nil {
		n.proc.expectExit()
	}
	if pid := n.pidInNamespace("kubelet.pid"); pid > 0 {
		_ = syscall.Kill(pid, syscall.SIGTERM)
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline) && syscall.Kill(pid, 0) == nil; {
			time.Sleep(50 * time.Millisecond)
		}
	}
	err := n.sweep()
	if n.proc != nil {
		err = errors.Join(err, n.proc.Stop())
	}
	return errors.Join(err, n.net.remove())
}

// pidInNamespace reads a PID file the node script wrote and returns the PID if that
// process is still in the node's namespace (a PID may have been reused), else 0.
func (n *Node) pidInNamespace(file string) int {
	b, err := os.ReadFile(filepath.Join(n.dir, file))
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	ns := n.namespace()
	if err != nil || pid <= 0 || ns == "" {
		return 0
	}
	if mnt, _ := os.Readlink(fmt.Sprintf("/proc/%d/ns/mnt", pid)); mnt != ns {
		return 0
	}
	return pid
}

// namespace is the node's mount namespace as the script recorded it ("mnt:[…]"), or ""
// when unknown or when it is this process's own (then nothing may be killed by it).
func (n *Node) namespace() string {
	b, err := os.ReadFile(filepath.Join(n.dir, "mntns"))
	if err != nil {
		return ""
	}
	ns := strings.TrimSpace(string(b))
	own, _ := os.Readlink("/proc/self/ns/mnt")
	init, _ := os.Readlink("/proc/1/ns/mnt")
	if ns == "" || ns == own || ns == init {
		return ""
	}
	return ns
}

// sweep kills, in rounds, every process in the node's cgroups (the containers) and in its
// mount namespace (containerd, the shims, the kubelet, the script), then removes the
// cgroups. The kernel drops the namespace's mounts with its last process. It is safe on
// a node that is not running and is how a killed run's leftovers are removed.
func (n *Node) sweep() error {
	ns := n.namespace()
	for range 5 {
		pids := n.cgroupPIDs()
		if ns != "" {
			pids = append(pids, n.ownPIDsInNamespace(ns)...)
		}
		if len(pids) == 0 {
			break
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(200 * time.Millisecond)
	}
	var err error
	for try := 0; try < 20; try++ {
		if err = n.removeCgroups(); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond) // killed processes are still being reaped
	}
	if err == nil && ns != "" {
		_ = os.Remove(filepath.Join(n.dir, "mntns"))
	}
	return err
}

// cgroupPIDs lists every process in the node's cgroup subtrees.
func (n *Node) cgroupPIDs() []int {
	var pids []int
	for _, d := range n.cgroupDirs() {
		_ = filepath.WalkDir(d, func(p string, de os.DirEntry, err error) error {
			if err != nil || de.Name() != "cgroup.procs" {
				return nil
			}
			b, _ := os.ReadFile(p)
			for _, f := range strings.Fields(string(b)) {
				if pid, err := strconv.Atoi(f); err == nil && pid > 0 {
					pids = append(pids, pid)
				}
			}
			return nil
		})
	}
	return pids
}

// ownPIDsInNamespace lists the processes whose mount namespace is ns, if it is this node's:
// one of them (the script, containerd or a shim) names the node's folder on its command
// line. A namespace id recorded by a killed run may have been reused by the kernel since,
// for another program's namespace: its processes are left alone.
func (n *Node) ownPIDsInNamespace(ns string) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	own := false
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if mnt, _ := os.Readlink("/proc/" + e.Name() + "/ns/mnt"); mnt == ns {
			pids = append(pids, pid)
			cmdline, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
			own = own || strings.Contains(string(cmdline), n.dir+"/")
		}
	}
	if !own {
		return nil
	}
	return pids
}

// removeCgroups removes the node's cgroup subtrees, deepest first.
func (n *Node) removeCgroups() error {
	var errs []error
	for _, root := range n.cgroupDirs() {
		var dirs []string
		_ = filepath.WalkDir(root, func(p string, de os.DirEntry, err error) error {
			if err == nil && de.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		for i := len(dirs) - 1; i >= 0; i-- {
			if err := syscall.Rmdir(dirs[i]); err != nil && !errors.Is(err, syscall.ENOENT) {
				errs = append(errs, fmt.Errorf("remove cgroup %s: %w", dirs[i], err))
			}
		}
	}
	return errors.Join(errs...)
}

// RealNodeNamespace creates namespace ns, or annotates it, so that its pods run on the
// real node beside kwok (NodeBoth): the apiserver's PodNodeSelector admission gives them
// the real node's label as node selector, PodTolerationRestriction the toleration of its
// taint. Pods of every other namespace keep going to kwok's fake node.
func RealNodeNamespace(ctx context.Context, cs kubernetes.Interface, ns string) error {
	annotations := map[string]string{
		"scheduler.alpha.kubernetes.io/node-selector":      RealNodeLabel + "=real",
		"scheduler.alpha.kubernetes.io/defaultTolerations": `[{"key":"` + RealNodeTaint + `","operator":"Exists","effect":"NoSchedule"}]`,
	}
	obj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Annotations: annotations}}
	_, err := cs.CoreV1().Namespaces().Create(ctx, obj, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		cur, gerr := cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		if gerr != nil {
			return fmt.Errorf("real node namespace %s: %w", ns, gerr)
		}
		if cur.Annotations == nil {
			cur.Annotations = map[string]string{}
		}
		maps.Copy(cur.Annotations, annotations)
		_, err = cs.CoreV1().Namespaces().Update(ctx, cur, metav1.UpdateOptions{})
	}
	if err != nil {
		return fmt.Errorf("real node namespace %s: %w", ns, err)
	}
	return nil
}
