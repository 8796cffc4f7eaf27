package devenv

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
)

// ports are the loopback ports of the environment. They are saved in the state folder and
// reused on the next start when still free, so that a kubeconfig or database URL copied
// from one `datajobs dev` run usually keeps working in the next.
type ports struct {
	Postgres          int `json:"postgres"`
	EtcdClient        int `json:"etcd_client"`
	EtcdPeer          int `json:"etcd_peer"`
	APIServer         int `json:"apiserver"`
	ControllerManager int `json:"controller_manager"`
	Scheduler         int `json:"scheduler"`
	Kwok              int `json:"kwok"`
	Registry          int `json:"registry"`
	Kubelet           int `json:"kubelet"`
	KubeletHealthz    int `json:"kubelet_healthz"`
	MailpitSMTP       int `json:"mailpit_smtp"`
	MailpitHTTP       int `json:"mailpit_http"`
}

func loadPorts(path string) (ports, error) {
	var p ports
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return p, nil
	}
	if err != nil {
		return p, fmt.Errorf("read ports: %w", err)
	}
	if err := json.Unmarshal(b, &p); err != nil {
		return ports{}, nil // a damaged file only costs new ports
	}
	return p, nil
}

func (p *ports) save(path string) error {
	b, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		return fmt.Errorf("encode ports: %w", err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write ports: %w", err)
	}
	return nil
}

// assign keeps each saved port that is still free and picks a new free one for the others.
func (p *ports) assign() error {
	taken := map[int]bool{}
	for _, port := range []*int{&p.Postgres, &p.EtcdClient, &p.EtcdPeer, &p.APIServer, &p.ControllerManager, &p.Scheduler, &p.Kwok, &p.Registry, &p.Kubelet, &p.KubeletHealthz, &p.MailpitSMTP, &p.MailpitHTTP} {
		if *port != 0 && !taken[*port] && portFree(*port) {
			taken[*port] = true
			continue
		}
		for {
			free, err := freePort()
			if err != nil {
				return err
			}
			if !taken[free] {
				*port = free
				taken[free] = true
				break
			}
		}
	}
	return nil
}

// freePort picks a free loopback port below the kernel's ephemeral range, so that the
// port stays free until the child binds it: a port the kernel handed out (":0") is in that
// range, and so is the local port of every outgoing connection, which under a loaded test
// run took a scheduler's port in the seconds between the pick and the bind ("bind: address
// already in use"). Another environment picking at random from the same range is the only
// remaining contender; the pick checks the port is free, and a failed start says so.
func freePort() (int, error) {
	low := ephemeralLow()
	for range 100 {
		port := belowEphemeralFloor + rand.IntN(low-belowEphemeralFloor)
		if portFree(port) {
			return port, nil
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// belowEphemeralFloor is the lowest port freePort picks: above the well-known and most
// registered services' ports.
const belowEphemeralFloor = 20000

// ephemeralLow is the first port of the kernel's ephemeral range (Linux's default 32768
// when it cannot be read, or when the range leaves too little room below it).
func ephemeralLow() int {
	const linuxDefault = 32768
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return linuxDefault
	}
	fields := strings.Fields(string(b))
	if len(fields) == 0 {
		return linuxDefault
	}
	low, err := strconv.Atoi(fields[0])
	if err != nil || low < belowEphemeralFloor+1000 {
		return linuxDefault
	}
	return low
}

func portFree(port int) bool {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return false
	}
	l.Close()
	return true
}
