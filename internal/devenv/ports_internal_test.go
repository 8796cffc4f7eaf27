package devenv

import (
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestEtcdAndTheAPIServerThatLostTheirPickedPortsStartOnOthers is the environment's side
// of the port race (TestAComponentWhosePickedPortWasTakenStartsOnAnother): etcd's client
// port and the apiserver's port are taken after the pick; both start on others, the
// apiserver reaches etcd on its new port, and the kubeconfig names the apiserver's.
func TestEtcdAndTheAPIServerThatLostTheirPickedPortsStartOnOthers(t *testing.T) {
	t.Parallel()
	root, err := RepoRoot()
	require.NoError(t, err)
	bin := filepath.Join(root, ".cache", "k8s-bin")
	if !isFile(filepath.Join(bin, "kube-apiserver")) {
		t.Skip("the Kubernetes binaries are not built: bash hack/k8s-bins/build.sh (the package's TestMain builds them)")
	}
	dir := t.TempDir()
	var p ports
	require.NoError(t, p.assign())
	for _, port := range []*int{&p.EtcdClient, &p.APIServer} {
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(*port))
		require.NoError(t, err)
		t.Cleanup(func() { l.Close() })
	}
	taken := p
	e := &Env{StateDir: dir, BinDir: bin, logger: slog.New(slog.DiscardHandler)}
	t.Cleanup(func() { assert.NoError(t, e.Stop()) })
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "logs"), 0o755))
	require.NoError(t, e.startKubernetes(t.Context(), Config{BinDir: bin, Kubernetes: true, Fast: true}, &p))
	for _, c := range []string{"etcd", "kube-apiserver"} {
		assert.True(t, logSince(e.logPath(c), 0, addrInUse), "%s's first start lost its port", c)
	}
	assert.NotEqual(t, taken.EtcdClient, p.EtcdClient)
	assert.NotEqual(t, taken.APIServer, p.APIServer)
	assert.Equal(t, "https://127.0.0.1:"+strconv.Itoa(p.APIServer), e.APIServerURL)
	cs, err := e.clientset() // from the kubeconfig written for the new port
	require.NoError(t, err)
	_, err = cs.CoreV1().Namespaces().Get(t.Context(), "default", metav1.GetOptions{})
	require.NoError(t, err, "the apiserver serves, from etcd on its new port")
}
