package devenv

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// kwok is the kubelet of the fake Node for the apiserver's pods/log too: the apiserver
// dials the Node's InternalIP and kubelet port (kwok's server, HTTPS with a certificate of
// the environment's CA) and kwok answers with a file. Which file: a `Logs` object of
// kwok.x-k8s.io (CRD installed here) names the file of one pod, so a test can make a
// pod print what it wants; every other pod serves DefaultPodLog (a ClusterLogs in kwok's
// configuration). Files are in the CRI log format (see WriteCRILog).

// kwokLogsCRD is kwok v0.8.0's kustomize/crd/bases/kwok.x-k8s.io_logs.yaml.
//
//go:embed kwok-logs-crd.yaml
var kwokLogsCRD []byte

// KwokLogsResource is kwok's namespaced Logs resource: the log file of one pod.
var KwokLogsResource = schema.GroupVersionResource{Group: "kwok.x-k8s.io", Version: "v1alpha1", Resource: "logs"}

// KwokHandsOffAnnotation on a pod makes kwok leave its status alone (it still serves
// its log): the test writes the pod's status as a kubelet would, for as long as it wants.
const KwokHandsOffAnnotation = "datajobs.test/kubelet"

// KwokHandsOffValue is the value of KwokHandsOffAnnotation.
const KwokHandsOffValue = "test"

// DefaultPodLogLine is the line every pod of the fake Node prints unless a Logs object
// gives it another file.
const DefaultPodLogLine = "kwok: this pod ran on the fake node kwok-node-0, which runs no container; this line is its log."

// kwokLogArgs prepares the log serving of kwok: the default log file, the configuration
// naming it, the CRD of per-pod Logs. It returns kwok's extra arguments.
func (e *Env) kwokLogArgs(ctx context.Context, keys pki) ([]string, error) {
	dir := filepath.Join(e.StateDir, "kwok-logs")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("kwok logs: %w", err)
	}
	defaultLog := filepath.Join(dir, "default.log")
	if err := WriteCRILog(defaultLog, time.Now(), DefaultPodLogLine); err != nil {
		return nil, err
	}
	config, err := json.Marshal(map[string]any{
		"apiVersion": "kwok.x-k8s.io/v1alpha1", "kind": "ClusterLogs",
		"metadata": map[string]any{"name": "datajobs-default"},
		"spec":     map[string]any{"logs": []any{map[string]any{"logsFile": defaultLog}}},
	})
	if err != nil {
		return nil, fmt.Errorf("kwok logs: %w", err)
	}
	configPath := filepath.Join(dir, "kwok-logs.yaml")
	if err := os.WriteFile(configPath, config, 0o644); err != nil { // JSON is YAML
		return nil, fmt.Errorf("kwok logs: %w", err)
	}
	if err := e.installKwokLogsCRD(ctx); err != nil {
		return nil, err
	}
	return []string{
		"-c", configPath, "--enable-crds=Logs",
		"--node-ip=127.0.0.1",
		"--tls-cert-file=" + keys.servingCert(), "--tls-private-key-file=" + keys.servingKey(),
		"--disregard-status-with-annotation-selector=" + KwokHandsOffAnnotation + "=" + KwokHandsOffValue,
	}, nil
}

// apiserverKubeletArgs make the apiserver reach kwok as the fake Node's kubelet: by its
// InternalIP, verifying kwok's certificate with the environment's CA.
func apiserverKubeletArgs(keys pki) []string {
	return []string{
		"--kubelet-preferred-address-types=InternalIP",
		"--kubelet-certificate-authority=" + keys.caCert(),
		"--kubelet-client-certificate=" + keys.adminCert(), "--kubelet-client-key=" + keys.adminKey(),
	}
}

// installKwokLogsCRD creates the Logs CRD (if absent) and waits until it is served.
func (e *Env) installKwokLogsCRD(ctx context.Context) error {
	rc, err := e.RestConfig()
	if err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(rc)
	if err != nil {
		return fmt.Errorf("kwok logs crd: %w", err)
	}
	var crd unstructured.Unstructured
	if err := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(kwokLogsCRD), 4096).Decode(&crd.Object); err != nil {
		return fmt.Errorf("kwok logs crd: %w", err)
	}
	crds := dyn.Resource(schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"})
	if _, err := crds.Create(ctx, &crd, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create kwok logs crd: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		_, err := dyn.Resource(KwokLogsResource).Namespace("default").List(ctx, metav1.ListOptions{Limit: 1})
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("kwok logs crd not served: %w", err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// pointFakeNodeAtKwok sets the fake Node's address and kubelet port to kwok's server. kwok
// sets them when it initialises a new Node; a Node kept in the state folder from an earlier
// run has the ports of that run.
func pointFakeNodeAtKwok(ctx context.Context, cs kubernetes.Interface, port int) error {
	patch, err := json.Marshal(map[string]any{"status": map[string]any{
		"addresses":       []any{map[string]any{"type": "InternalIP", "address": "127.0.0.1"}},
		"daemonEndpoints": map[string]any{"kubeletEndpoint": map[string]any{"Port": port}},
	}})
	if err != nil {
		return err
	}
	if _, err := cs.CoreV1().Nodes().Patch(ctx, FakeNodeName, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
		return fmt.Errorf("point fake node at kwok: %w", err)
	}
	return nil
}

// WriteCRILog writes lines as a container log file in the CRI format that kwok (like the
// kubelet) serves: one stdout line each, stamped at. Writing it again replaces it, so a
// test can make a running pod print more.
func WriteCRILog(path string, at time.Time, lines ...string) error {
	var b strings.Builder
	for _, l := range lines {
		fmt.Fprintf(&b, "%s stdout F %s\n", at.UTC().Format(time.RFC3339Nano), l)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(b.String()), 0o644); err != nil {
		return fmt.Errorf("write pod log: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write pod log: %w", err)
	}
	return nil
}

// ServePodLog makes kwok serve the file path as the log of every container of the pod,
// through a Logs object named after the pod.
func ServePodLog(ctx context.Context, rc *rest.Config, pod *corev1.Pod, path string) error {
	dyn, err := dynamic.NewForConfig(rc)
	if err != nil {
		return fmt.Errorf("serve pod log: %w", err)
	}
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kwok.x-k8s.io/v1alpha1", "kind": "Logs",
		"metadata": map[string]any{"name": pod.Name, "namespace": pod.Namespace},
		"spec":     map[string]any{"logs": []any{map[string]any{"logsFile": path}}},
	}}
	if _, err := dyn.Resource(KwokLogsResource).Namespace(pod.Namespace).Create(ctx, obj, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("serve pod log of %s: %w", pod.Name, err)
	}
	return nil
}
