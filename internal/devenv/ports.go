package devenv

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"strconv"
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
	for _, port := range []*int{&p.Postgres, &p.EtcdClient, &p.EtcdPeer, &p.APIServer, &p.ControllerManager, &p.Scheduler, &p.Kwok, &p.Registry, &p.Kubelet, &p.KubeletHealthz} {
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

// freePort asks the kernel for a free loopback port. Another process may take it before
// the child binds it; the window is small and a failed start says so.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func portFree(port int) bool {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return false
	}
	l.Close()
	return true
}
