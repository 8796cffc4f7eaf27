package kube

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// ClusterConfig says how to reach the Kubernetes API server.
type ClusterConfig struct {
	// Kubeconfig is a kubeconfig path; empty means $KUBECONFIG, then the in-cluster config.
	Kubeconfig string
	// KubeconfigData, when set, is a kubeconfig's content (an execution target's Secret),
	// used instead of Kubeconfig.
	KubeconfigData []byte
	// QPS and Burst bound the client's request rate. Zero QPS means automatic: no
	// client-side limit when the apiserver protects itself with API Priority and Fairness
	// (detected at Connect, as Flux does), else FallbackThrottle. A negative QPS disables
	// the limit. Burst zero means twice the QPS.
	QPS   float32
	Burst int
	// UserAgent names this process in the apiserver's logs and audit.
	UserAgent string
}

// Cluster is a connection to one Kubernetes API server.
type Cluster struct {
	// Client is the typed client; its rate limit is that of ClusterConfig.
	Client kubernetes.Interface
	// Rest is the configuration Client was built from.
	Rest *rest.Config
}

// FallbackThrottle is the automatic client-side limit towards an apiserver without API
// Priority and Fairness (or one not reachable at start): Flux's and Argo CD's order of
// magnitude. client-go's own defaults (5/10) are far too low for a fleet of CronJobs.
var FallbackThrottle = struct {
	QPS   float32
	Burst int
}{QPS: 50, Burst: 100}

// Connect builds a client for the cluster. With an explicit throttle it does not contact
// the server: the service starts while the apiserver is down and says so in its /healthz
// detail. With the automatic one it asks /livez/ping once (bounded by ctx and 3 s)
// whether the apiserver runs API Priority and Fairness; if it cannot tell, it keeps
// FallbackThrottle.
func Connect(ctx context.Context, cfg ClusterConfig) (*Cluster, error) {
	path := cfg.Kubeconfig
	if path == "" {
		path = os.Getenv("KUBECONFIG")
	}
	var rc *rest.Config
	var err error
	switch {
	case len(cfg.KubeconfigData) > 0:
		rc, err = clientcmd.RESTConfigFromKubeConfig(cfg.KubeconfigData)
	case path != "":
		rc, err = clientcmd.BuildConfigFromFlags("", path)
	default:
		rc, err = rest.InClusterConfig()
	}
	if err != nil {
		return nil, fmt.Errorf("load kubernetes config: %w", err)
	}
	if cfg.UserAgent != "" {
		rc.UserAgent = cfg.UserAgent
	}
	qps, burst := cfg.QPS, cfg.Burst
	if qps == 0 {
		qps, burst = FallbackThrottle.QPS, FallbackThrottle.Burst
		if apf, err := PriorityAndFairness(ctx, rc); err == nil && apf {
			qps, burst = -1, 0
		}
	}
	if burst == 0 && qps > 0 {
		burst = int(2 * qps)
	}
	rc.QPS, rc.Burst = qps, burst
	rc.Wrap(stoppableWatchLists)
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("build kubernetes client: %w", err)
	}
	return &Cluster{Client: client, Rest: rc}, nil
}

// PriorityAndFairness reports whether the apiserver of rc runs API Priority and Fairness
// (GA since Kubernetes 1.29): it then classifies every request into a flow schema and
// priority level, and says so in the X-Kubernetes-PF-* headers of its answers. Such a
// server protects itself (and answers 429 with Retry-After, which client-go honours), so a
// client-side limit only slows a converge down.
func PriorityAndFairness(ctx context.Context, rc *rest.Config) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	client, err := rest.HTTPClientFor(rc)
	if err != nil {
		return false, fmt.Errorf("build kubernetes http client: %w", err)
	}
	host, err := url.Parse(rc.Host)
	if err != nil {
		return false, fmt.Errorf("kubernetes api server address %q: %w", rc.Host, err)
	}
	if host.Scheme == "" { // a bare host:port, as rest.Config allows
		host, _ = url.Parse("https://" + rc.Host)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, host.JoinPath("/livez/ping").String(), nil)
	if err != nil {
		return false, fmt.Errorf("kubernetes api server livez/ping: %w", err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return false, fmt.Errorf("kubernetes api server livez/ping: %w", err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
	return resp.Header.Get("X-Kubernetes-PF-FlowSchema-UID") != "" ||
		resp.Header.Get("X-Kubernetes-PF-PriorityLevel-UID") != "", nil
}

// Ping asks the apiserver's /readyz, so readiness reflects the server, not just the socket.
func (c *Cluster) Ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	body, err := c.Client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
	if err != nil {
		return fmt.Errorf("kubernetes api server readyz: %w", err)
	}
	if string(body) != "ok" {
		return fmt.Errorf("kubernetes api server readyz: %s", body)
	}
	return nil
}

// EnsureNamespace creates the namespace if it does not exist yet. Production namespaces
// belong to the operator; `datajobs dev` uses this to be ready out of the box.
func (c *Cluster) EnsureNamespace(ctx context.Context, name string) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	_, err := c.Client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create namespace %s: %w", name, err)
	}
	return nil
}

// KubeconfigFromSecret reads the kubeconfig in key `kubeconfig` of the Secret name in
// namespace: how an execution target names another cluster (docs/targets.md).
func KubeconfigFromSecret(ctx context.Context, client kubernetes.Interface, namespace, name string) ([]byte, error) {
	secret, err := client.CoreV1().Secrets(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("read Secret %s/%s: %w", namespace, name, err)
	}
	data := secret.Data["kubeconfig"]
	if len(data) == 0 {
		return nil, fmt.Errorf("the Secret %s/%s has no key kubeconfig", namespace, name)
	}
	return data, nil
}
