package deploytest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/releaseutil"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/yaml"

	"github.com/datajobs/datajobs/internal/testenv"
)

// chartDir is the chart under test.
const chartDir = "../helm/datajobs"

// values parses a YAML document of chart values.
func values(t testing.TB, doc string) map[string]any {
	t.Helper()
	v := map[string]any{}
	require.NoError(t, yaml.Unmarshal([]byte(doc), &v))
	return v
}

// render renders the chart as `helm install release --namespace ns` would, schema
// validation included, and returns its objects (the `helm test` hook among them), in
// file order.
func render(t testing.TB, ns string, vals map[string]any) []*unstructured.Unstructured {
	t.Helper()
	objs, err := renderErr(ns, vals)
	require.NoError(t, err)
	return objs
}

func renderErr(ns string, vals map[string]any) ([]*unstructured.Unstructured, error) {
	ch, err := loader.Load(chartDir)
	if err != nil {
		return nil, err
	}
	rv, err := chartutil.ToRenderValues(ch, vals, chartutil.ReleaseOptions{Name: "dj", Namespace: ns, IsInstall: true, Revision: 1}, nil)
	if err != nil {
		return nil, err
	}
	files, err := engine.Render(ch, rv)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	slices.Sort(names)
	var out []*unstructured.Unstructured
	for _, name := range names {
		if !strings.HasSuffix(name, ".yaml") {
			continue // NOTES.txt, helpers
		}
		manifests := releaseutil.SplitManifests(files[name])
		keys := make([]string, 0, len(manifests))
		for k := range manifests {
			keys = append(keys, k)
		}
		sort.Sort(releaseutil.BySplitManifestsOrder(keys))
		for _, k := range keys {
			doc := strings.TrimSpace(manifests[k])
			if doc == "" || strings.Trim(doc, "-\n ") == "" {
				continue
			}
			u := &unstructured.Unstructured{}
			if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
				return nil, fmt.Errorf("%s: %w\n%s", name, err, doc)
			}
			if len(u.Object) == 0 {
				continue
			}
			out = append(out, u)
		}
	}
	return out, nil
}

// find returns the rendered object of that kind and name suffix, failing when absent.
func find(t testing.TB, objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == kind && (name == "" || o.GetName() == name) {
			return o
		}
	}
	require.Failf(t, "object not rendered", "%s %s", kind, name)
	return nil
}

// into converts a rendered object into its typed form.
func into[T any](t testing.TB, u *unstructured.Unstructured) *T {
	t.Helper()
	var v T
	require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(u.Object, &v, true))
	return &v
}

// installCRDs installs the Prometheus Operator's ServiceMonitor and PrometheusRule CRDs
// (copied from prometheus-operator v0.85.0, example/prometheus-operator-crd, into
// testdata/crds) once per test binary and waits until they are established, so that those
// objects are validated by the apiserver against the operator's own schemas.
func installCRDs(t *testing.T) {
	t.Helper()
	crdOnce.Do(func() { crdErr = applyCRDs(t.Context(), testenv.RestConfig(t)) })
	require.NoError(t, crdErr)
}

var (
	crdOnce sync.Once
	crdErr  error
)

func applyCRDs(ctx context.Context, cfg *rest.Config) error {
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	files, err := filepath.Glob("testdata/crds/*.yaml")
	if err != nil {
		return err
	}
	if len(files) == 0 {
		return errors.New("no CRDs in testdata/crds")
	}
	crdRes := apiextensionsv1.SchemeGroupVersion.WithResource("customresourcedefinitions")
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(b, &u.Object); err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
		if _, err := dyn.Resource(crdRes).Apply(ctx, u.GetName(), u, metav1.ApplyOptions{FieldManager: "deploytest", Force: true}); err != nil {
			return fmt.Errorf("apply %s: %w", u.GetName(), err)
		}
		err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			got, err := dyn.Resource(crdRes).Get(ctx, u.GetName(), metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			crd := &apiextensionsv1.CustomResourceDefinition{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(got.Object, crd); err != nil {
				return false, err
			}
			for _, c := range crd.Status.Conditions {
				if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			return fmt.Errorf("crd %s established: %w", u.GetName(), err)
		}
	}
	return nil
}

// ensureNamespace creates a namespace the chart renders when it does not exist yet (and
// deletes it at the end), so that the objects in it can be dry-run applied: a dry run of
// the Namespace itself stores nothing.
func ensureNamespace(t *testing.T, o *unstructured.Unstructured) {
	t.Helper()
	ns := &corev1.Namespace{}
	require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, ns))
	cs := testenv.Clientset(t)
	ctx := context.WithoutCancel(t.Context())
	_, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return
	}
	require.NoError(t, err)
	t.Cleanup(func() { _ = cs.CoreV1().Namespaces().Delete(ctx, ns.Name, metav1.DeleteOptions{}) })
}

// dryRunApply sends every object to the apiserver as a server-side apply with dryRun=All:
// admission and validation run, nothing is stored.
func dryRunApply(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	cfg := testenv.RestConfig(t)
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	require.NoError(t, err)
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	dyn, err := dynamic.NewForConfig(cfg)
	require.NoError(t, err)
	for _, o := range objs {
		if o.GetKind() == "Namespace" {
			ensureNamespace(t, o)
		}
	}
	for _, o := range objs {
		gvk := o.GroupVersionKind()
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		require.NoError(t, err, "%s %s", gvk, o.GetName())
		var ri dynamic.ResourceInterface = dyn.Resource(m.Resource)
		if m.Scope.Name() == "namespace" {
			ri = dyn.Resource(m.Resource).Namespace(o.GetNamespace())
		}
		_, err = ri.Apply(t.Context(), o.GetName(), o, metav1.ApplyOptions{FieldManager: "deploytest", DryRun: []string{metav1.DryRunAll}, Force: true})
		require.NoError(t, err, "dry-run apply %s %s/%s", o.GetKind(), o.GetNamespace(), o.GetName())
	}
}
