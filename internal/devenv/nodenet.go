package devenv

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
)

// The real node's pod network (docs/test-environment.md, "Pod network"): a bridge of the
// node's own on the host, made before the node starts, with the first address of a /24
// of its own. The CNI bridge plugin plugs each pod's veth into it and gives the pod an
// address of that /24 and a default route through the bridge's address, the gateway: the
// one address of the host that pods reach, where the environment forwards what they must
// call (Forward). Nothing is masqueraded or forwarded beyond it: the host's ip_forward is
// a private copy in the node's namespace (nodeSysctls), so the plugin's "enable
// forwarding" changes nothing on the host.
//
// Several environments run side by side (test binaries, sessions): each bridge is named
// after its state folder, as the node's cgroups are, and the /24 is chosen under a
// host-wide lock among those no interface of the host uses. The bridge carries its state
// folder as alias: a start removes the bridges whose environment is gone (its folder's
// lock is free), so a killed run leaves nothing for long.

// nodeNet is the real node's pod network.
type nodeNet struct {
	bridge  string     // "dj-" and the state folder's hash: at most 15 bytes, as Linux allows
	subnet  *net.IPNet // a /24 of nodeNetRange
	gateway net.IP     // the subnet's first address, the bridge's on the host
}

const (
	// nodeNetRange holds the pod subnets: 10.244.0.0/16, as the pod CIDR of kubeadm's
	// examples; one /24 per environment.
	nodeNetPrefix = "10.244."
	// bridgeAliasPrefix starts the alias of a node's bridge; the state folder follows.
	bridgeAliasPrefix = "datajobs-node "
	// nodeNetLockPath serialises the choice of subnets between environments.
	nodeNetLockPath = "/run/lock/datajobs-node-net.lock"
)

// setUpNodeNet makes the node's bridge, first removing the bridges of environments that
// are gone (its own of a killed run included), and returns the network.
func setUpNodeNet(stateDir, hash string) (nodeNet, error) {
	if _, err := exec.LookPath("ip"); err != nil {
		return nodeNet{}, errors.New("a real node makes its pod bridge with iproute2's ip, which is not on PATH: apt-get install iproute2")
	}
	unlock, err := lockFile(nodeNetLockPath)
	if err != nil {
		return nodeNet{}, err
	}
	defer unlock()
	n := nodeNet{bridge: "dj-" + hash[:12]}
	if err := removeStaleBridges(n.bridge); err != nil {
		return nodeNet{}, err
	}
	if n.subnet, err = freeSubnet(hash); err != nil {
		return nodeNet{}, err
	}
	n.gateway = n.subnet.IP.To4()
	n.gateway = net.IPv4(n.gateway[0], n.gateway[1], n.gateway[2], 1).To4()
	gw := &net.IPNet{IP: n.gateway, Mask: n.subnet.Mask}
	steps := [][]string{
		{"link", "add", "name", n.bridge, "type", "bridge"},
		{"link", "set", "dev", n.bridge, "alias", bridgeAliasPrefix + stateDir},
		{"addr", "add", gw.String(), "dev", n.bridge},
		{"link", "set", "dev", n.bridge, "up"},
	}
	for _, s := range steps {
		if err := ipCommand(s...); err != nil {
			return nodeNet{}, errors.Join(err, ipCommand("link", "del", "dev", n.bridge))
		}
	}
	return n, nil
}

// remove deletes the bridge; the pods' veths went with their network namespaces.
func (n nodeNet) remove() error {
	if n.bridge == "" || !linkExists(n.bridge) {
		return nil
	}
	return ipCommand("link", "del", "dev", n.bridge)
}

// removeStaleBridges deletes own (a killed run's bridge of this state folder) and every
// node bridge whose state folder is gone or not locked by a running environment.
func removeStaleBridges(own string) error {
	links, err := net.Interfaces()
	if err != nil {
		return fmt.Errorf("real node network: %w", err)
	}
	var errs []error
	for _, l := range links {
		if !strings.HasPrefix(l.Name, "dj-") {
			continue
		}
		alias, _ := os.ReadFile(filepath.Join("/sys/class/net", l.Name, "ifalias"))
		dir, ok := strings.CutPrefix(strings.TrimSpace(string(alias)), bridgeAliasPrefix)
		if !ok {
			continue // not a node's bridge
		}
		if l.Name == own || !stateDirInUse(dir) {
			errs = append(errs, ipCommand("link", "del", "dev", l.Name))
		}
	}
	return errors.Join(errs...)
}

// stateDirInUse reports whether a running environment holds the state folder's lock.
func stateDirInUse(dir string) bool {
	f, err := os.Open(filepath.Join(dir, "lock"))
	if err != nil {
		return false // the folder is gone
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB); err != nil {
		return true
	}
	_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	return false
}

// freeSubnet returns the first /24 of nodeNetRange, from the one the hash points at, that
// no address of the host's interfaces is in: the same one at every start while it is
// free, so that a dev environment's job API URL does not move.
func freeSubnet(hash string) (*net.IPNet, error) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil, fmt.Errorf("real node network: %w", err)
	}
	var start int
	_, _ = fmt.Sscanf(hash[:2], "%x", &start)
	for i := range 254 {
		third := 1 + (start+i)%254
		_, subnet, _ := net.ParseCIDR(fmt.Sprintf("%s%d.0/24", nodeNetPrefix, third))
		if !overlaps(subnet, addrs) {
			return subnet, nil
		}
	}
	return nil, fmt.Errorf("real node network: every /24 of %s0.0/16 is in use by an interface of this host", nodeNetPrefix)
}

func overlaps(subnet *net.IPNet, addrs []net.Addr) bool {
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok && (subnet.Contains(ipn.IP) || ipn.Contains(subnet.IP)) {
			return true
		}
	}
	return false
}

func linkExists(name string) bool {
	_, err := net.InterfaceByName(name)
	return err == nil
}

func ipCommand(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("real node network: ip %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// lockFile takes an exclusive flock on path, waiting for it, and returns its release.
func lockFile(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return func() { f.Close() }, nil
}
