package devenv

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// FakeNodeName is the kwok-managed Node that Pods are scheduled to when controllers run.
const FakeNodeName = "kwok-node-0"

// kwokNodeAnnotation marks the Nodes that kwok pretends to be the kubelet of.
const kwokNodeAnnotation = "kwok.x-k8s.io/node"

// startKubernetes starts etcd and kube-apiserver, writes the kubeconfig, and, with
// controllers, kube-controller-manager, kube-scheduler and (unless the only node is the
// real one) kwok and the fake Node. Each started process is recorded in e as soon as it
// runs, so that e.Stop cleans up after a failure half-way.
func (e *Env) startKubernetes(ctx context.Context, cfg Config, p *ports) error {
	keys := pki{dir: filepath.Join(e.StateDir, "pki")}
	if err := keys.ensure(); err != nil {
		return err
	}
	e.Kubeconfig = filepath.Join(e.StateDir, "kubeconfig")
	verified, err := tlsClient(keys)
	if err != nil {
		return err
	}
	if err := e.startControlPlane(ctx, cfg, p, keys, verified); err != nil || !cfg.Controllers {
		return err
	}
	if err := e.startControllers(ctx, cfg, p, keys, verified); err != nil || cfg.Node == NodeReal {
		return err
	}
	return e.startKwok(ctx, p, keys)
}

// controlProcess is the control-plane component name: cfg.BinDir's binary of that name,
// run in the state folder with a log of its own, on the picked ports that configure uses.
func (e *Env) controlProcess(cfg Config, name string, picked []*int, configure func(*processSpec) error) *Process {
	return newProcess(name, e.logPath(name), processSpec{
		path: filepath.Join(cfg.BinDir, name), dir: e.StateDir, picked: picked, configure: configure,
	}, e.logger)
}

func (e *Env) logPath(name string) string { return filepath.Join(e.StateDir, "logs", name+".log") }

// plainHTTP checks the components that serve plain HTTP on loopback (etcd, kwok).
var plainHTTP = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}

// startControlPlane starts etcd and kube-apiserver. The apiserver authorizes nodes by
// their identity (Node, NodeRestriction) and lets a namespace choose its pods' node
// (PodNodeSelector, PodTolerationRestriction: RealNodeNamespace).
func (e *Env) startControlPlane(ctx context.Context, cfg Config, p *ports, keys pki, verified *http.Client) error {
	etcdClient := func() string { return "http://127.0.0.1:" + strconv.Itoa(p.EtcdClient) }
	e.Etcd = e.controlProcess(cfg, "etcd", []*int{&p.EtcdClient, &p.EtcdPeer}, func(s *processSpec) error {
		peer := "http://127.0.0.1:" + strconv.Itoa(p.EtcdPeer)
		s.args = []string{
			"--name=default", "--data-dir=" + filepath.Join(e.StateDir, "etcd"),
			"--listen-client-urls=" + etcdClient(), "--advertise-client-urls=" + etcdClient(),
			"--listen-peer-urls=" + peer, "--initial-advertise-peer-urls=" + peer,
			"--initial-cluster=default=" + peer, "--log-level=warn",
		}
		if cfg.Fast {
			s.args = append(s.args, "--unsafe-no-fsync")
		}
		s.ready = httpReady(plainHTTP, etcdClient()+"/health")
		return nil
	})
	if err := e.Etcd.Start(ctx); err != nil {
		return err
	}
	e.APIServer = e.controlProcess(cfg, "kube-apiserver", []*int{&p.APIServer}, func(s *processSpec) error {
		s.args = apiserverArgs(etcdClient(), p.APIServer, keys)
		e.APIServerURL = "https://127.0.0.1:" + strconv.Itoa(p.APIServer)
		s.ready = httpReady(verified, e.APIServerURL+"/readyz")
		return writeKubeconfig(e.Kubeconfig, e.APIServerURL, keys)
	})
	return e.APIServer.Start(ctx)
}

// apiserverArgs are kube-apiserver's flags.
func apiserverArgs(etcd string, port int, keys pki) []string {
	return append([]string{
		"--etcd-servers=" + etcd,
		"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", "--secure-port=" + strconv.Itoa(port),
		// Required with a loopback advertise address: the endpoint reconciler refuses it.
		"--endpoint-reconciler-type=none",
		"--tls-cert-file=" + keys.servingCert(), "--tls-private-key-file=" + keys.servingKey(),
		"--client-ca-file=" + keys.caCert(),
		"--service-cluster-ip-range=10.0.0.0/24",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + keys.saPub(), "--service-account-signing-key-file=" + keys.saKey(),
		"--authorization-mode=Node,RBAC",
		"--enable-admission-plugins=NodeRestriction,PodNodeSelector,PodTolerationRestriction",
		"--profiling=false",
	}, apiserverKubeletArgs(keys)...)
}

// startControllers starts kube-controller-manager and kube-scheduler. The controller
// manager's flex-volume folder is in the state folder: its default is under /usr/libexec.
func (e *Env) startControllers(ctx context.Context, cfg Config, p *ports, keys pki, verified *http.Client) error {
	common := []string{
		"--kubeconfig=" + e.Kubeconfig, "--authentication-kubeconfig=" + e.Kubeconfig, "--authorization-kubeconfig=" + e.Kubeconfig,
		"--bind-address=127.0.0.1", "--leader-elect=false",
		"--tls-cert-file=" + keys.servingCert(), "--tls-private-key-file=" + keys.servingKey(),
	}
	e.ControllerManager = e.controlProcess(cfg, "kube-controller-manager", []*int{&p.ControllerManager}, func(s *processSpec) error {
		s.args = slices.Concat(common, []string{
			"--secure-port=" + strconv.Itoa(p.ControllerManager),
			"--service-account-private-key-file=" + keys.saKey(), "--root-ca-file=" + keys.caCert(),
			"--cluster-signing-cert-file=" + keys.caCert(), "--cluster-signing-key-file=" + keys.caKey(),
			"--use-service-account-credentials=false", "--controllers=*",
			"--flex-volume-plugin-dir=" + filepath.Join(e.StateDir, "kcm-flex-volume"),
		}, fastControllerArgs(cfg))
		s.ready = httpReady(verified, "https://127.0.0.1:"+strconv.Itoa(p.ControllerManager)+"/healthz")
		return nil
	})
	if err := e.ControllerManager.Start(ctx); err != nil {
		return err
	}
	e.Scheduler = e.controlProcess(cfg, "kube-scheduler", []*int{&p.Scheduler}, func(s *processSpec) error {
		s.args = slices.Concat(common, []string{"--secure-port=" + strconv.Itoa(p.Scheduler)})
		s.ready = httpReady(verified, "https://127.0.0.1:"+strconv.Itoa(p.Scheduler)+"/healthz")
		return nil
	})
	return e.Scheduler.Start(ctx)
}

// startKwok starts kwok and registers its fake Node.
func (e *Env) startKwok(ctx context.Context, p *ports, keys pki) error {
	logArgs, err := e.kwokLogArgs(ctx, keys)
	if err != nil {
		return err
	}
	bin := func(name string) string { return filepath.Join(e.BinDir, name) }
	e.Kwok = newProcess("kwok", e.logPath("kwok"), processSpec{
		path: bin("kwok"), dir: e.StateDir,
		// kwok reads ~/.kwok; keep it inside the state folder.
		env:    append(os.Environ(), "HOME="+filepath.Join(e.StateDir, "kwok-home")),
		picked: []*int{&p.Kwok},
		configure: func(s *processSpec) error {
			kwokAddr := "127.0.0.1:" + strconv.Itoa(p.Kwok)
			s.args = append([]string{
				"--kubeconfig=" + e.Kubeconfig, "-c", bin("kwok-stages.yaml"),
				"--manage-all-nodes=false", "--manage-nodes-with-annotation-selector=" + kwokNodeAnnotation + "=fake",
				"--cidr=10.244.0.0/24", "--server-address=" + kwokAddr, "--node-port=" + strconv.Itoa(p.Kwok),
			}, logArgs...)
			s.ready = httpReady(plainHTTP, "http://"+kwokAddr+"/healthz")
			return nil
		},
	}, e.logger)
	if err := e.Kwok.Start(ctx); err != nil {
		return err
	}
	return e.ensureFakeNode(ctx, p.Kwok)
}

// ensureFakeNode registers the kwok Node (if it is not there from a previous run) and
// waits until kwok has made it Ready, so that Pods can be scheduled at once.
func (e *Env) ensureFakeNode(ctx context.Context, kwokPort int) error {
	cs, err := e.clientset()
	if err != nil {
		return fmt.Errorf("fake node: %w", err)
	}
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("64"),
		corev1.ResourceMemory: resource.MustParse("256Gi"),
		corev1.ResourcePods:   resource.MustParse("500"),
		// Job pods carry an ephemeral-storage limit (and so a request): without capacity
		// the scheduler finds the fake node "Insufficient ephemeral-storage".
		corev1.ResourceEphemeralStorage: resource.MustParse("2Ti"),
	}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        FakeNodeName,
			Annotations: map[string]string{kwokNodeAnnotation: "fake", "node.alpha.kubernetes.io/ttl": "0"},
			Labels: map[string]string{
				"kubernetes.io/hostname": FakeNodeName, "kubernetes.io/os": "linux",
				"kubernetes.io/arch": "amd64", "type": "kwok",
			},
		},
		Status: corev1.NodeStatus{Capacity: capacity, Allocatable: capacity},
	}
	if _, err := cs.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create fake node: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		n, err := cs.CoreV1().Nodes().Get(ctx, FakeNodeName, metav1.GetOptions{})
		if err == nil && nodeReady(n) {
			return pointFakeNodeAtKwok(ctx, cs, kwokPort)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("fake node %s not ready (is kwok running? see %s): %w", FakeNodeName, e.Kwok.LogPath, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// RestConfig returns a client configuration for the environment's kube-apiserver, as the
// admin user (group system:masters).
func (e *Env) RestConfig() (*rest.Config, error) {
	if e.Kubeconfig == "" {
		return nil, errors.New("devenv: this environment runs no Kubernetes (Config.Kubernetes is false)")
	}
	rc, err := clientcmd.BuildConfigFromFlags("", e.Kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("load kubeconfig %s: %w", e.Kubeconfig, err)
	}
	return rc, nil
}

// clientset is a client of the environment's kube-apiserver, as the admin user.
func (e *Env) clientset() (*kubernetes.Clientset, error) {
	rc, err := e.RestConfig()
	if err != nil {
		return nil, err
	}
	return kubernetes.NewForConfig(rc)
}

// writeKubeconfig writes the admin's kubeconfig with everything embedded, so that it can
// be copied.
func writeKubeconfig(path, server string, keys pki) error {
	return writeKubeconfigAs(path, server, keys, keys.adminCert(), keys.adminKey())
}

// writeKubeconfigAs writes a kubeconfig for the client certificate certPath and its key.
func writeKubeconfigAs(path, server string, keys pki, certPath, keyPath string) error {
	read := func(p string) ([]byte, error) {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("kubeconfig: %w", err)
		}
		return b, nil
	}
	ca, err := read(keys.caCert())
	if err != nil {
		return err
	}
	cert, err := read(certPath)
	if err != nil {
		return err
	}
	key, err := read(keyPath)
	if err != nil {
		return err
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["datajobs-dev"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: ca}
	cfg.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: cert, ClientKeyData: key}
	cfg.Contexts["datajobs-dev"] = &clientcmdapi.Context{Cluster: "datajobs-dev", AuthInfo: "admin", Namespace: "default"}
	cfg.CurrentContext = "datajobs-dev"
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return fmt.Errorf("write kubeconfig: %w", err)
	}
	return nil
}

// tlsClient trusts the environment's CA and presents the admin certificate. Keep-alives
// are off so that no idle connection (and its goroutines) outlives a check.
func tlsClient(keys pki) (*http.Client, error) {
	caPEM, err := os.ReadFile(keys.caCert())
	if err != nil {
		return nil, fmt.Errorf("pki: %w", err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	cert, err := tls.LoadX509KeyPair(keys.adminCert(), keys.adminKey())
	if err != nil {
		return nil, fmt.Errorf("pki: load admin certificate: %w", err)
	}
	return &http.Client{Transport: &http.Transport{
		DisableKeepAlives: true,
		TLSClientConfig:   &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
	}}, nil
}

// httpReady checks that GET url answers 200.
func httpReady(client *http.Client, url string) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET %s: %s: %s", url, resp.Status, body)
		}
		return nil
	}
}
