package devenv_test

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/datajobs/datajobs/internal/build"
	"github.com/datajobs/datajobs/internal/devenv"
)

// requireRealNode skips without root or the node's runtime, unless the run requires the
// real node (hack/test.sh as root), when it fails.
func requireRealNode(t *testing.T) string {
	t.Helper()
	why := devenv.RealNodeUnavailable()
	bins := devenv.NodeBinaries()
	if why == "" && bins == "" {
		why = "the real node's runtime is not built: bash hack/node-bins/build.sh"
	}
	if why == "" && devenv.RegistryBinary() == "" {
		why = "the registry is not built: bash hack/registry/build.sh"
	}
	if why == "" && devenv.BaseImageLayout() == "" {
		why = "the python base image is not built: bash hack/base-image/build.sh"
	}
	if why != "" {
		if os.Getenv("DATAJOBS_TEST_REQUIRE_REAL_NODE") == "1" {
			t.Fatal(why)
		}
		t.Skip(why)
	}
	return bins
}

// hostState is what a real node must leave as it found it.
type hostState struct {
	sysctls map[string]string
	paths   map[string]bool
	mounts  int
}

var hostPaths = []string{
	"/run/containerd", "/var/lib/kubelet", "/var/lib/cni", "/var/log/containers", "/run/netns",
	"/opt/containerd", "/usr/libexec/kubernetes",
}

func readHost(t *testing.T, stateDir string) hostState {
	t.Helper()
	h := hostState{sysctls: map[string]string{}, paths: map[string]bool{}}
	for _, f := range []string{"vm/overcommit_memory", "vm/panic_on_oom", "kernel/panic", "kernel/panic_on_oops", "kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes", "net/ipv4/ip_forward"} {
		b, err := os.ReadFile("/proc/sys/" + f)
		require.NoError(t, err)
		h.sysctls[f] = strings.TrimSpace(string(b))
	}
	for _, p := range hostPaths {
		_, err := os.Stat(p)
		h.paths[p] = err == nil
	}
	b, err := os.ReadFile("/proc/self/mountinfo")
	require.NoError(t, err)
	h.mounts = strings.Count(string(b), stateDir) + strings.Count(string(b), "datajobs-node")
	return h
}

// TestARealNodeRunsAPodAndLeavesNothingOnTheHost guards the fence around the real node: a
// pod really runs (its print read back through the apiserver, which needs the kubelet's
// client certificates) and reaches a server on the host's loopback through a forward on
// the node's gateway (what jobs need to call the API), and once the environment stops no
// process, mount, cgroup, bridge, host path or sysctl change (ip_forward included, which
// the bridge plugin turns on) of the node is left.
func TestARealNodeRunsAPodAndLeavesNothingOnTheHost(t *testing.T) {
	t.Parallel()
	nodeBins := requireRealNode(t)
	dir := stateDir(t)
	before := readHost(t, dir)
	env, err := devenv.Start(t.Context(), devenv.Config{
		StateDir: dir, BinDir: binDir, Controllers: true, Fast: true, Node: devenv.NodeReal,
		NodeBinDir: nodeBins, RegistryBin: devenv.RegistryBinary(),
	})
	require.NoError(t, err)
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			assert.NoError(t, env.Stop())
		}
	})
	require.NotNil(t, env.Node)
	image, err := build.PushLayout(t.Context(), devenv.BaseImageLayout(), env.Registry.Addr+"/test/python:3.11")
	require.NoError(t, err)
	host := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "hello from the host") }))
	defer host.Close()
	fwd, err := devenv.StartForward(net.JoinHostPort(env.Node.Gateway, "0"), host.Listener.Addr().String(), nil)
	require.NoError(t, err)
	defer fwd.Close()

	cs := clientset(t, env)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "hello", Namespace: "default"},
		Spec: corev1.PodSpec{
			RestartPolicy:                corev1.RestartPolicyNever,
			AutomountServiceAccountToken: new(false),
			SecurityContext: &corev1.PodSecurityContext{
				RunAsNonRoot: new(true), RunAsUser: new(int64(1000)), RunAsGroup: new(int64(1000)),
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
			Containers: []corev1.Container{{
				Name: "hello", Image: image,
				Command: []string{"python3", "-c", "import os, urllib.request; print('hello from a real container, uid', os.getuid(), '-', " +
					"urllib.request.urlopen('http://" + fwd.Addr + "/', timeout=30).read().decode())"},
				Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{
					corev1.ResourceCPU: resource.MustParse("200m"), corev1.ResourceMemory: resource.MustParse("128Mi"),
				}},
				SecurityContext: &corev1.SecurityContext{
					AllowPrivilegeEscalation: new(false), Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
				},
			}},
		},
	}
	_, err = cs.CoreV1().Pods("default").Create(t.Context(), pod, metav1.CreateOptions{})
	require.NoError(t, err)
	var phase corev1.PodPhase
	require.Eventually(t, func() bool {
		p, err := cs.CoreV1().Pods("default").Get(t.Context(), "hello", metav1.GetOptions{})
		if err == nil {
			phase = p.Status.Phase
		}
		return phase == corev1.PodSucceeded || phase == corev1.PodFailed
	}, 2*time.Minute, 100*time.Millisecond)
	require.Equal(t, corev1.PodSucceeded, phase)
	logs, err := cs.CoreV1().Pods("default").GetLogs("hello", &corev1.PodLogOptions{}).Stream(t.Context())
	require.NoError(t, err)
	out, err := io.ReadAll(logs)
	logs.Close()
	require.NoError(t, err)
	require.Equal(t, "hello from a real container, uid 1000 - hello from the host\n", string(out))

	stopped = true
	require.NoError(t, env.Stop())
	after := readHost(t, dir)
	assert.Equal(t, before.sysctls, after.sysctls, "the kubelet's sysctls stayed in its namespace")
	assert.Equal(t, before.paths, after.paths, "no host path was created")
	assert.Equal(t, before.mounts, after.mounts, "no mount of the node is left")
	cgroups, _ := filepath.Glob("/sys/fs/cgroup/*/" + nodeCgroupOf(t, dir))
	assert.Empty(t, cgroups, "no cgroup of the node is left")
	_, err = net.InterfaceByName(env.Node.Bridge)
	require.Error(t, err, "the node's bridge %s is removed", env.Node.Bridge)
}

// nodeCgroupOf is the cgroup name of the node of a state folder, as node.go derives it,
// read back from the kubelet's configuration.
func nodeCgroupOf(t *testing.T, dir string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "node", "kubelet", "config.yaml"))
	require.NoError(t, err)
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "cgroupRoot: /"); ok {
			return v
		}
	}
	t.Fatal("no cgroupRoot in the kubelet's configuration")
	return ""
}
