package deploytest

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	"github.com/datajobs/datajobs/internal/cli"
	"github.com/datajobs/datajobs/internal/testenv"
)

// ciValues reads one of the chart's ci/*-values.yaml files.
func ciValues(t *testing.T, name string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(chartDir + "/ci/" + name + "-values.yaml")
	require.NoError(t, err)
	return values(t, string(b))
}

// `helm lint` (the SDK's linter: Chart.yaml, values against the schema, templates,
// rendered YAML) has nothing to say with the values of ci/, not even information.
func TestChartLintsClean(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"default", "full"} {
		linter := lint.All(chartDir, ciValues(t, name), "datajobs", false)
		require.Empty(t, linter.Messages, "%s values", name)
		require.Less(t, linter.HighestSeverity, support.InfoSev)
	}
}

// The default install: 2 replicas with the probes, security settings, spread and grace
// period of the issue, a PodDisruptionBudget, the Role in the jobs namespace (a namespace
// of its own), two Services, GOMEMLIMIT under the memory limit, and every object accepted
// by the apiserver.
func TestDefaultValuesRenderAnInstallTheAPIServerAccepts(t *testing.T) {
	t.Parallel()
	ns := testenv.Namespace(t)
	objs := render(t, ns, ciValues(t, "default"))
	dryRunApply(t, objs)

	d := into[appsv1.Deployment](t, find(t, objs, "Deployment", "dj-datajobs"))
	require.Equal(t, int32(2), *d.Spec.Replicas)
	pod := d.Spec.Template.Spec
	c := pod.Containers[0]
	require.Equal(t, "/readyz", c.ReadinessProbe.HTTPGet.Path)
	require.Equal(t, "/healthz", c.LivenessProbe.HTTPGet.Path)
	require.Equal(t, intstr.FromString("http"), c.ReadinessProbe.HTTPGet.Port)
	require.True(t, *pod.SecurityContext.RunAsNonRoot)
	require.Equal(t, corev1.SeccompProfileTypeRuntimeDefault, pod.SecurityContext.SeccompProfile.Type)
	require.True(t, *c.SecurityContext.ReadOnlyRootFilesystem)
	require.False(t, *c.SecurityContext.AllowPrivilegeEscalation)
	require.Equal(t, []corev1.Capability{"ALL"}, c.SecurityContext.Capabilities.Drop)
	require.NotEmpty(t, c.Resources.Requests)
	require.Len(t, pod.TopologySpreadConstraints, 2)
	require.Equal(t, "kubernetes.io/hostname", pod.TopologySpreadConstraints[0].TopologyKey)
	require.GreaterOrEqual(t, *pod.TerminationGracePeriodSeconds, int64(25), "the 20 s shutdown and the lease release fit")
	require.Equal(t, "dj-datajobs", pod.ServiceAccountName)
	require.Equal(t, "ghcr.io/datajobs/datajobs:0.1.0", c.Image)
	require.Empty(t, c.Command, "the image's entrypoint is datajobs serve")
	require.Empty(t, c.Args)

	env := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		env[e.Name] = e
	}
	require.Equal(t, "[$(POD_IP)]:8093", env["DATAJOBS_ADMIN_LISTEN"].Value, "the admin listener is on the pod IP, for Prometheus")
	require.Equal(t, "datajobs-database", env["DATAJOBS_DATABASE_URL"].ValueFrom.SecretKeyRef.Name)
	require.Equal(t, ns+"-jobs", env["DATAJOBS_NAMESPACE"].Value, "CronJobs go to a namespace of their own by default")
	require.Equal(t, "858993459", env["GOMEMLIMIT"].Value, "80 % of the 1Gi memory limit")

	pdb := into[policyv1.PodDisruptionBudget](t, find(t, objs, "PodDisruptionBudget", ""))
	require.Equal(t, intstr.FromInt32(1), *pdb.Spec.MinAvailable)
	role := into[rbacv1.Role](t, find(t, objs, "Role", ""))
	require.Equal(t, ns+"-jobs", role.Namespace)
	find(t, objs, "Service", "dj-datajobs")
	admin := into[corev1.Service](t, find(t, objs, "Service", "dj-datajobs-admin"))
	require.Equal(t, intstr.FromString("admin"), admin.Spec.Ports[0].TargetPort)
	hook := find(t, objs, "Pod", "dj-datajobs-test-readyz")
	require.Equal(t, "test", hook.GetAnnotations()["helm.sh/hook"])
	require.Contains(t, strings.Join(into[corev1.Pod](t, hook).Spec.Containers[0].Command, " "), "/readyz")
	for _, kind := range []string{"ClusterRole", "ClusterRoleBinding", "ServiceMonitor", "PrometheusRule", "Ingress"} {
		for _, o := range objs {
			require.NotEqual(t, kind, o.GetKind(), "not rendered by default")
		}
	}
	// Issue 41, L8: the service's own NetworkPolicy was off by default, and anything in
	// the cluster (a job pod of any team) reached the admin port: metrics, profiles, the
	// sync commands. It is on by default: the API port open, the admin port to Prometheus.
	np := into[networkingv1.NetworkPolicy](t, find(t, objs, "NetworkPolicy", "dj-datajobs"))
	require.Equal(t, ns, np.Namespace)
	require.Equal(t, d.Spec.Selector.MatchLabels, np.Spec.PodSelector.MatchLabels, "it selects the service's pods")
	require.Equal(t, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}, np.Spec.PolicyTypes)
	require.Len(t, np.Spec.Ingress, 2)
	require.Equal(t, intstr.FromString("http"), *np.Spec.Ingress[0].Ports[0].Port)
	require.Empty(t, np.Spec.Ingress[0].From, "the API port is open")
	require.Equal(t, intstr.FromString("admin"), *np.Spec.Ingress[1].Ports[0].Port)
	require.Equal(t, []networkingv1.NetworkPolicyPeer{{
		PodSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/name": "prometheus"}},
		NamespaceSelector: &metav1.LabelSelector{},
	}}, np.Spec.Ingress[1].From, "the admin port only to Prometheus")
}

// The documented combinations (README "Examples"): everything on with the jobs in another
// namespace; no ServiceAccount or RBAC of the chart's own; authentication off; a local
// execution target whose namespace the chart makes, and a kubeconfig Secret.
func TestDocumentedCombinationsAreAcceptedByTheAPIServer(t *testing.T) {
	t.Parallel()
	installCRDs(t)
	for name, tc := range map[string]struct {
		values string
		// target: a local target in namespace <jobs>-b, made by the chart.
		target bool
		check  func(t *testing.T, release, jobs string, objs []*unstructured.Unstructured)
	}{
		"ci/full-values.yaml: monitoring, network policy, ingress, builds, jobs in their own namespace": {
			values: "full",
			check: func(t *testing.T, release, jobs string, objs []*unstructured.Unstructured) {
				role := into[rbacv1.Role](t, find(t, objs, "Role", ""))
				require.Equal(t, jobs, role.Namespace)
				rb := into[rbacv1.RoleBinding](t, find(t, objs, "RoleBinding", ""))
				require.Equal(t, jobs, rb.Namespace)
				require.Equal(t, release, rb.Subjects[0].Namespace, "the ServiceAccount stays in the release namespace")
				d := into[appsv1.Deployment](t, find(t, objs, "Deployment", ""))
				env := map[string]string{}
				for _, e := range d.Spec.Template.Spec.Containers[0].Env {
					env[e.Name] = e.Value
					if e.Name == "DATAJOBS_AUTHZ_WEBHOOK_URL" {
						require.Equal(t, corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "datajobs-authz"}, Key: "url"}, *e.ValueFrom.SecretKeyRef)
					}
				}
				require.Contains(t, env, "DATAJOBS_AUTHZ_WEBHOOK_URL")
				require.Equal(t, jobs, env["DATAJOBS_NAMESPACE"])
				require.Equal(t, "3.11=registry.example.com/python-vdk:3.11,3.12=registry.example.com/python-vdk:3.12", env["DATAJOBS_BASE_IMAGE"])
				require.Equal(t, "/etc/datajobs/registry/config.json", env["DATAJOBS_REGISTRY_AUTH_FILE"])
				require.Equal(t, "/etc/datajobs/secrets/keys.json", env["DATAJOBS_SECRETS_KEY_FILE"], "the keyring Secret is mounted as the key file")
				require.Equal(t, "https://a.example.com/simple,https://b.example.com/simple", env["DATAJOBS_PIP_EXTRA_INDEX_URL"])
				require.Equal(t, "16", env["DATAJOBS_SYNC_WORKERS"])
				require.Contains(t, d.Spec.Template.Spec.Containers[0].Image, "@sha256:")
				rule := find(t, objs, "PrometheusRule", "")
				text, err := yaml.Marshal(rule.Object)
				require.NoError(t, err)
				for _, alert := range []string{"DatajobsNoLeader", "DatajobsSyncLagHigh", "DatajobsDeploymentsPlatformError", "DatajobsBuildFailures"} {
					require.Contains(t, string(text), alert)
				}
				find(t, objs, "ServiceMonitor", "")
				find(t, objs, "NetworkPolicy", "dj-datajobs")
				find(t, objs, "Ingress", "")
			},
		},
		"an existing ServiceAccount, RBAC managed elsewhere, no PodDisruptionBudget, auth none": {
			values: `serviceAccount: {create: false, name: datajobs-existing}
rbac: {create: false}
podDisruptionBudget: {enabled: false}
auth: {mode: none}
replicaCount: 1
database: {existingSecret: db}`,
			check: func(t *testing.T, _, _ string, objs []*unstructured.Unstructured) {
				for _, o := range objs {
					require.NotContains(t, []string{"ServiceAccount", "Role", "RoleBinding", "PodDisruptionBudget"}, o.GetKind())
				}
				d := into[appsv1.Deployment](t, find(t, objs, "Deployment", ""))
				require.Equal(t, "datajobs-existing", d.Spec.Template.Spec.ServiceAccountName)
			},
		},
		"a local execution target made by the chart, a kubeconfig Secret": {
			values: "database: {existingSecret: db}\nauth: {mode: none}\ntargetKubeconfigSecrets: [eu-kubeconfig]",
			target: true,
			check: func(t *testing.T, _, jobs string, objs []*unstructured.Unstructured) {
				kinds := map[string]bool{}
				for _, o := range objs {
					if o.GetNamespace() == jobs+"-b" || o.GetKind() == "Namespace" && o.GetName() == jobs+"-b" {
						kinds[o.GetKind()] = true
					}
				}
				require.Equal(t, map[string]bool{"Namespace": true, "Role": true, "RoleBinding": true, "NetworkPolicy": true}, kinds)
			},
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			release, jobs := testenv.Namespace(t), testenv.Namespace(t)
			var vals map[string]any
			if tc.values == "full" {
				vals = ciValues(t, "full")
			} else {
				vals = values(t, tc.values)
			}
			vals["jobsNamespace"] = jobs
			if tc.target {
				vals["targets"] = []any{map[string]any{"name": "team-b", "namespace": jobs + "-b", "createNamespace": true}}
			}
			objs := render(t, release, vals)
			dryRunApply(t, objs)
			tc.check(t, release, jobs, objs)
		})
	}
}

// Values the chart cannot work with are refused at install, with the reason.
func TestChartRefusesValuesItCannotWorkWith(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct{ values, want string }{
		"no database Secret":                {`auth: {mode: none}`, "database.existingSecret is required"},
		"oidc without an issuer":            {`database: {existingSecret: db}`, "auth.oidc.issuerURLs is required"},
		"a flag serve does not have":        {"database: {existingSecret: db}\nauth: {mode: none}\nconfig: {no-such-flag: 1}", "no-such-flag"},
		"a flag with a value of a type":     {"database: {existingSecret: db}\nauth: {mode: none}\nconfig: {sync-workers: many}", "sync-workers"},
		"a flag with its own value":         {"database: {existingSecret: db}\nauth: {mode: none}\nconfig: {namespace: x}", "namespace"},
		"a flag in config and secretConfig": {"database: {existingSecret: db}\nauth: {mode: none}\nconfig: {sync-workers: 2}\nsecretConfig: {sync-workers: {name: s, key: k}}", "sync-workers is set in both"},
		"a secret flag without its key":     {"database: {existingSecret: db}\nauth: {mode: none}\nsecretConfig: {authz-webhook-url: {name: s}}", "key"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := renderErr("default", values(t, tc.values))
			require.ErrorContains(t, err, tc.want)
		})
	}
}

// Every flag of `datajobs serve` can be set from values: rendering a value for each
// (config for most, dedicated keys for the rest) gives the container the environment
// variable the command reads for it.
func TestEveryServeFlagIsReachableThroughValues(t *testing.T) {
	t.Parallel()
	config := map[string]any{}
	for _, f := range cli.ServeEnv() {
		if _, own := dedicated[f.Name]; !own {
			config[f.Name] = sampleValue(f)
		}
	}
	vals := ciValues(t, "full")
	vals["config"] = config
	delete(vals, "secretConfig")
	vals["extraEnv"] = []any{map[string]any{"name": "DATAJOBS_KUBECONFIG", "value": "/etc/kube/config"}}
	objs := render(t, "default", vals)
	d := into[appsv1.Deployment](t, find(t, objs, "Deployment", ""))
	set := map[string]bool{}
	for _, e := range d.Spec.Template.Spec.Containers[0].Env {
		require.False(t, set[e.Name], "%s is set twice", e.Name)
		set[e.Name] = true
	}
	for _, f := range cli.ServeEnv() {
		require.True(t, set[f.Env], "--%s (%s) is not reachable from values", f.Name, f.Env)
	}
}

// Issue 22, item 3: without GOMEMLIMIT the Go runtime does not know the container's
// memory limit, so garbage it could have collected pushes the replica (the leader among
// them) over the limit and the kernel kills it. The chart sets it to goMemLimitPercent of
// resources.limits.memory in each quantity form, and none when the share is 0.
func TestGOMEMLIMITFollowsTheMemoryLimit(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct{ values, want string }{
		"binary units":  {"resources: {limits: {memory: 2Gi}}", "1717986918"},
		"decimal units": {"resources: {limits: {memory: 1G}}", "800000000"},
		"bytes":         {"resources: {limits: {memory: 1000}}", "800"},
		"another share": {"resources: {limits: {memory: 1Gi}}\ngoMemLimitPercent: 90", "966367641"},
		"turned off":    {"goMemLimitPercent: 0", ""},
	} {
		t.Run(name, func(t *testing.T) {
			vals := values(t, "database: {existingSecret: db}\nauth: {mode: none}\n"+tc.values)
			d := into[appsv1.Deployment](t, find(t, render(t, "default", vals), "Deployment", ""))
			got := ""
			for _, e := range d.Spec.Template.Spec.Containers[0].Env {
				if e.Name == "GOMEMLIMIT" {
					got = e.Value
				}
			}
			require.Equal(t, tc.want, got)
		})
	}
	_, err := renderErr("default", values(t, "database: {existingSecret: db}\nauth: {mode: none}\nresources: {limits: {memory: 1.5Gi}}"))
	require.ErrorContains(t, err, "resources.limits.memory")
}
