package kube

import (
	"context"
	"fmt"
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
	// QPS and Burst bound the client's request rate (client-go's own defaults, 5/10, are far
	// too low for a fleet of CronJobs).
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

// Connect builds a client for the cluster. It does not contact the server: the service
// starts while the apiserver is down and says so in its /healthz detail.
func Connect(cfg ClusterConfig) (*Cluster, error) {
	path := cfg.Kubeconfig
	if path == "" {
		path = os.Getenv("KUBECONFIG")
	}
	var rc *rest.Config
	var err error
	if path != "" {
		rc, err = clientcmd.BuildConfigFromFlags("", path)
	} else {
		rc, err = rest.InClusterConfig()
	}
	if err != nil {
		return nil, fmt.Errorf("load kubernetes config: %w", err)
	}
	rc.QPS, rc.Burst = cfg.QPS, cfg.Burst
	if cfg.UserAgent != "" {
		rc.UserAgent = cfg.UserAgent
	}
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("build kubernetes client: %w", err)
	}
	return &Cluster{Client: client, Rest: rc}, nil
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
