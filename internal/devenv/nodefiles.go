package devenv

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/datajobs/datajobs/internal/build"
)

// nodeFiles writes the configuration of a real node (see node.go) under dir.
type nodeFiles struct {
	dir, cgroup      string
	binDir, kubeBin  string // hack/node-bins and hack/k8s-bins outputs
	keys             pki
	registry, pause  string // registry host:port; sandbox image by digest
	kubelet, healthz int    // the kubelet's ports
	apiserver, logs  string
	taint            bool // beside kwok: tainted, for RealNodeNamespace's pods only
	net              nodeNet
}

func (f nodeFiles) path(parts ...string) string {
	return filepath.Join(append([]string{f.dir}, parts...)...)
}

// write writes every file and returns the path of the script to run in the namespace.
func (f nodeFiles) write() (string, error) {
	kubeconfig := f.path("kubelet.kubeconfig")
	files := map[string]string{
		f.path("containerd", "config.toml"):                       f.containerdConfig(),
		f.path("containerd", "certs.d", f.registry, "hosts.toml"): f.hostsTOML(),
		f.path("cni", "net.d", "10-datajobs.conflist"):            f.cniConfig(),
		f.path("kubelet", "config.yaml"):                          f.kubeletConfig(),
		f.path("node.sh"):                                         f.script(kubeconfig),
	}
	for p, content := range files {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return "", fmt.Errorf("real node: %w", err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			return "", fmt.Errorf("real node: %w", err)
		}
	}
	if err := writeKubeconfigAs(kubeconfig, f.apiserver, f.keys, f.keys.nodeCert(), f.keys.nodeKey()); err != nil {
		return "", err
	}
	return f.path("node.sh"), nil
}

// containerdConfig is containerd 2.x's configuration (version 4): every path in the state
// folder, plain-HTTP pulls from the loopback registry, no NRI, and oom_score_adj left
// alone (this machine has no CAP_SYS_RESOURCE: a negative score fails every sandbox).
func (f nodeFiles) containerdConfig() string {
	c := f.path("containerd")
	return fmt.Sprintf(`version = 4
root = %[1]q
state = %[2]q
[plugins."io.containerd.server.v1.grpc"]
  address = %[3]q
[plugins."io.containerd.server.v1.ttrpc"]
  address = %[4]q
[plugins."io.containerd.nri.v1.nri"]
  disable = true
[plugins."io.containerd.internal.v1.opt"]
  path = %[5]q
[plugins."io.containerd.cri.v1.runtime"]
  netns_mounts_under_state_dir = true
  restrict_oom_score_adj = true
  [plugins."io.containerd.cri.v1.runtime".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
        BinaryName = %[6]q
        SystemdCgroup = false
  [plugins."io.containerd.cri.v1.runtime".cni]
    bin_dirs = [%[7]q]
    conf_dir = %[8]q
[plugins."io.containerd.cri.v1.images"]
  snapshotter = "overlayfs"
  [plugins."io.containerd.cri.v1.images".pinned_images]
    sandbox = %[9]q
  [plugins."io.containerd.cri.v1.images".registry]
    config_path = %[10]q
[plugins."io.containerd.grpc.v1.cri"]
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
`, filepath.Join(c, "root"), filepath.Join(c, "state"), f.socket(), f.socket()+".ttrpc", filepath.Join(c, "opt"),
		filepath.Join(f.binDir, "runc"), filepath.Join(f.binDir, "cni"), f.path("cni", "net.d"), f.pause,
		filepath.Join(c, "certs.d"))
}

// socket is containerd's socket, and kubeletRoot the kubelet's root folder, which holds
// its sockets: both at their usual host paths, which exist only inside the node's mount
// namespace (on its overlays), because a unix socket's path must fit in 108 bytes and a
// state folder's need not.
func (f nodeFiles) socket() string { return "/run/containerd/containerd.sock" }

const kubeletRoot = "/var/lib/kubelet"

func (f nodeFiles) hostsTOML() string {
	return fmt.Sprintf("server = \"http://%[1]s\"\n[host.\"http://%[1]s\"]\n  capabilities = [\"pull\", \"resolve\"]\n", f.registry)
}

// cniConfig plugs each pod's eth0 into the node's bridge (nodenet.go), with an address of
// its /24 and a default route through the gateway, the bridge's address on the host: the
// pods reach that address and nothing else (no masquerade, no forwarding on the host).
func (f nodeFiles) cniConfig() string {
	return fmt.Sprintf(`{"cniVersion": "1.0.0", "name": "datajobs-node", "plugins": [
  {"type": "bridge", "bridge": %q, "isGateway": true, "ipMasq": false,
   "ipam": {"type": "host-local", "ranges": [[{"subnet": %q, "gateway": %q}]], "routes": [{"dst": "0.0.0.0/0"}], "dataDir": %q}}]}
`, f.net.bridge, f.net.subnet.String(), f.net.gateway.String(), f.path("cni", "ipam"))
}

func (f nodeFiles) kubeletConfig() string {
	taints := ""
	if f.taint {
		taints = fmt.Sprintf("registerWithTaints:\n- {key: %s, value: \"true\", effect: NoSchedule}\n", RealNodeTaint)
	}
	k := f.path("kubelet")
	return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: /%s
containerRuntimeEndpoint: unix://%s
address: 127.0.0.1
port: %d
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: %d
tlsCertFile: %s
tlsPrivateKeyFile: %s
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
  x509: {clientCAFile: %s}
authorization: {mode: AlwaysAllow}
podLogsDir: %s
makeIPTablesUtilChains: false
serializeImagePulls: false
maxPods: 50
evictionHard: {memory.available: "100Mi", nodefs.available: "1%%", imagefs.available: "1%%"}
imageGCHighThresholdPercent: 99
imageGCLowThresholdPercent: 98
volumePluginDir: %s
rotateCertificates: false
%s`, f.cgroup, f.socket(), f.kubelet, f.healthz, f.keys.servingCert(), f.keys.servingKey(), f.keys.caCert(),
		filepath.Join(k, "pod-logs"), filepath.Join(k, "volume-plugins"), taints)
}

// script is the node's process, run in a new private mount namespace (processSpec.
// unshareMount): it records the namespace, fences the host in, starts containerd, waits
// for its socket and runs the kubelet.
func (f nodeFiles) script(kubeconfig string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "set -euo pipefail\ncd %q\nreadlink /proc/self/ns/mnt > mntns\nmkdir -p sysctl overlay\n", f.dir)
	for _, s := range nodeSysctls {
		n := "sysctl/" + strings.ReplaceAll(s, "/", "_")
		fmt.Fprintf(&b, "cat /proc/sys/%[1]s > %[2]s && mount --bind %[2]s /proc/sys/%[1]s\n", s, n)
	}
	b.WriteString("mount -t tmpfs datajobs-node overlay\n")
	for i, d := range nodeDirs {
		fmt.Fprintf(&b, "mkdir -p overlay/%[1]d/upper overlay/%[1]d/work && mount -t overlay datajobs-node -o lowerdir=%[2]s,upperdir=overlay/%[1]d/upper,workdir=overlay/%[1]d/work %[2]s\n", i, d)
	}
	labels := RealNodeLabel + "=real"
	fmt.Fprintf(&b, `export PATH=%[1]s:$PATH
containerd --config %[2]s >> %[3]s/containerd.log 2>&1 &
echo $! > containerd.pid
for _ in $(seq 600); do [ -S %[4]s ] && break; kill -0 $! 2>/dev/null || { echo "containerd exited; see %[3]s/containerd.log"; exit 1; }; sleep 0.1; done
%[5]s/kubelet --config=%[6]s --kubeconfig=%[7]s --hostname-override=%[8]s --node-labels=%[9]s \
  --root-dir=%[10]s --cert-dir=%[11]s --v=1 &
echo $! > kubelet.pid
wait
`, f.binDir, f.path("containerd", "config.toml"), f.logs, f.socket(), f.kubeBin, f.path("kubelet", "config.yaml"),
		kubeconfig, RealNodeName, labels, kubeletRoot, f.path("kubelet", "pki"))
	return b.String()
}

// pushPause pushes the sandbox image (hack/pause, built by hack/node-bins) and returns it
// by digest.
func pushPause(ctx context.Context, binDir, ref string) (string, error) {
	scratch, err := os.MkdirTemp("", "datajobs-pause")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(scratch)
	root := filepath.Join(scratch, "root")
	if err := os.MkdirAll(root, 0o755); err != nil {
		return "", err
	}
	b, err := os.ReadFile(filepath.Join(binDir, "pause"))
	if err != nil {
		return "", fmt.Errorf("pause image: %w (build it with `bash %s`)", err, nodeBinScript)
	}
	if err := os.WriteFile(filepath.Join(root, "pause"), b, 0o755); err != nil {
		return "", err
	}
	img, err := build.ImageFromDirs(scratch, v1.Config{Entrypoint: []string{"/pause"}}, root)
	if err != nil {
		return "", fmt.Errorf("pause image: %w", err)
	}
	return build.PushImage(ctx, ref, img)
}

// nodeBinScript builds the node's runtime into nodeBinRepo.
const (
	nodeBinScript = "hack/node-bins/build.sh"
	nodeBinRepo   = ".cache/node-bin"
)

// NodeBinaries returns the folder of the real node's runtime built in the checkout, or ""
// when it has not been built.
func NodeBinaries() string {
	return builtInCheckout(nodeBinRepo, "containerd", "containerd-shim-runc-v2", "runc", "pause", "cni/bridge")
}
