package deploytest

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/datajobs/datajobs/internal/devenv"
	"github.com/datajobs/datajobs/internal/image"
	"github.com/datajobs/datajobs/internal/kube"
	"github.com/datajobs/datajobs/internal/secrets"
	"github.com/datajobs/datajobs/internal/testenv"
)

// testImage is the image the tests build: TestImage... checks it, and the other tests run
// the binary it holds.
var testImage = image.Config{
	Version: "v9.9.9-test", Revision: "0123456789abcdef0123456789abcdef01234567",
	Created: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC),
}

// buildImage builds testImage (a second call is a Go build cache hit).
func buildImage(ctx context.Context) (v1.Image, error) {
	root, err := devenv.RepoRoot()
	if err != nil {
		return nil, err
	}
	cfg := testImage
	cfg.Dir = root
	return image.Build(ctx, cfg)
}

// binary is the datajobs binary of the image, written out once per test binary: the
// tests run what the chart's pods run.
var binary = sync.OnceValues(func() (string, error) {
	img, err := buildImage(context.Background())
	if err != nil {
		return "", err
	}
	files, err := imageFiles(img)
	if err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp("", "datajobs-deploytest-")
	if err != nil {
		return "", err
	}
	out := filepath.Join(dir, "datajobs")
	return out, os.WriteFile(out, []byte(files[strings.TrimPrefix(image.BinaryPath, "/")]), 0o755)
})

// install is the chart rendered for a release namespace and a jobs namespace, with its
// RBAC created for real in the test cluster (minus the Role rule dropped, when >= 0).
type install struct {
	release, jobs string
	// objs are the rendered objects of the chart.
	objs       []*unstructured.Unstructured
	deployment *appsv1.Deployment
	role       *rbacv1.Role
	// kubeconfig uses only a token of the chart's ServiceAccount.
	kubeconfig string
	// client is a client with that token.
	client    kubernetes.Interface
	apiPort   int
	adminPort int
}

// installRBAC renders the chart with auth mode none (the API is not under test here), a
// prune guard that lets one orphan go, job versions deployed without a registry look-up
// (the tests deploy versions no registry holds), creates its ServiceAccount, Role (changed by
// edit, when not nil) and RoleBinding, and mints a token for the ServiceAccount.
func installRBAC(t *testing.T, edit func(*rbacv1.Role)) *install {
	t.Helper()
	return installRBACWith(t, edit, "")
}

// installRBACWith is installRBAC with more values (a YAML document of top-level keys the
// others do not set); the Roles and RoleBindings it renders in other namespaces (local
// execution targets') are created as they are.
func installRBACWith(t *testing.T, edit func(*rbacv1.Role), more string) *install {
	t.Helper()
	in := &install{release: testenv.Namespace(t), jobs: testenv.Namespace(t), apiPort: freePort(t), adminPort: freePort(t)}
	objs := render(t, in.release, values(t, fmt.Sprintf(`
jobsNamespace: %s
database: {existingSecret: datajobs-database}
auth: {mode: none}
service: {targetPort: %d}
adminService: {targetPort: %d}
logFormat: text
config: {prune-max-fraction: 1, max-cpu: "200", verify-prebuilt-images: false}
`, in.jobs, in.apiPort, in.adminPort)+more))
	in.objs = objs
	admin := testenv.Clientset(t)
	ctx := t.Context()
	in.role = into[rbacv1.Role](t, find(t, objs, "Role", ""))
	rb := into[rbacv1.RoleBinding](t, find(t, objs, "RoleBinding", ""))
	for _, o := range objs {
		if o.GetNamespace() == in.jobs {
			continue
		}
		switch o.GetKind() {
		case "Role":
			_, err := admin.RbacV1().Roles(o.GetNamespace()).Create(ctx, into[rbacv1.Role](t, o), metav1.CreateOptions{})
			require.NoError(t, err)
		case "RoleBinding":
			_, err := admin.RbacV1().RoleBindings(o.GetNamespace()).Create(ctx, into[rbacv1.RoleBinding](t, o), metav1.CreateOptions{})
			require.NoError(t, err)
		}
	}
	in.deployment = into[appsv1.Deployment](t, find(t, objs, "Deployment", ""))
	sa := into[corev1.ServiceAccount](t, find(t, objs, "ServiceAccount", in.deployment.Spec.Template.Spec.ServiceAccountName))
	// The job pods' ServiceAccount, in the jobs namespace: the apiserver admits no job pod without it.
	jobSA := into[corev1.ServiceAccount](t, find(t, objs, "ServiceAccount", kube.DefaultJobServiceAccount))
	if edit != nil {
		edit(in.role)
	}
	_, err := admin.CoreV1().ServiceAccounts(in.release).Create(ctx, sa, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = admin.CoreV1().ServiceAccounts(in.jobs).Create(ctx, jobSA, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = admin.RbacV1().Roles(in.jobs).Create(ctx, in.role, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = admin.RbacV1().RoleBindings(in.jobs).Create(ctx, rb, metav1.CreateOptions{})
	require.NoError(t, err)

	tok, err := admin.CoreV1().ServiceAccounts(in.release).CreateToken(ctx, sa.Name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: new(int64(3600))},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	rc := testenv.RestConfig(t)
	ca := rc.CAData
	if len(ca) == 0 {
		ca, err = os.ReadFile(rc.CAFile)
		require.NoError(t, err)
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["test"] = &clientcmdapi.Cluster{Server: rc.Host, CertificateAuthorityData: ca}
	cfg.AuthInfos["datajobs"] = &clientcmdapi.AuthInfo{Token: tok.Status.Token}
	cfg.Contexts["datajobs"] = &clientcmdapi.Context{Cluster: "test", AuthInfo: "datajobs", Namespace: in.jobs}
	cfg.CurrentContext = "datajobs"
	in.kubeconfig = filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, clientcmd.WriteToFile(*cfg, in.kubeconfig))
	restCfg, err := clientcmd.BuildConfigFromFlags("", in.kubeconfig)
	require.NoError(t, err)
	in.client, err = kubernetes.NewForConfig(restCfg)
	require.NoError(t, err)
	return in
}

// fence puts the jobs namespace behind the chart's fence: the Pod Security labels of the
// rendered Namespace and the admission policies (the service's Jobs and CronJobs, the teams'
// pods), for real.
func (in *install) fence(t *testing.T) {
	t.Helper()
	ns := into[corev1.Namespace](t, find(t, in.objs, "Namespace", in.jobs))
	admin := testenv.Clientset(t)
	live, err := admin.CoreV1().Namespaces().Get(t.Context(), in.jobs, metav1.GetOptions{})
	require.NoError(t, err)
	maps.Copy(live.Labels, ns.Labels)
	_, err = admin.CoreV1().Namespaces().Update(t.Context(), live, metav1.UpdateOptions{})
	require.NoError(t, err)
	installAdmissionPolicy(t, in.objs, in.client, in.jobs)
	createPodPolicies(t, in.objs)
}

// service is one `datajobs serve` process configured like the chart's pod.
type service struct {
	*testenv.Process
	base string
}

// serve runs `datajobs serve` (the image's entrypoint) with the environment of the
// rendered container, resolved as the kubelet would: the database URL from the Secret
// reference, the pod IP as 127.0.0.1, $(VAR) references expanded; and the token
// kubeconfig in place of the in-cluster config. It returns once /readyz answers 200.
func (in *install) serve(t *testing.T, extraEnv ...string) *service {
	t.Helper()
	bin, err := binary()
	require.NoError(t, err)
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "DATAJOBS_") && !strings.HasPrefix(kv, "KUBECONFIG=") {
			env = append(env, kv)
		}
	}
	dbURL := testenv.DatabaseURL(t)
	vars := map[string]string{}
	for _, e := range in.deployment.Spec.Template.Spec.Containers[0].Env {
		v := e.Value
		switch {
		case e.ValueFrom == nil:
			v = regexp.MustCompile(`\$\(([A-Z_]+)\)`).ReplaceAllStringFunc(v, func(ref string) string { return vars[ref[2:len(ref)-1]] })
		case e.ValueFrom.SecretKeyRef != nil:
			require.Equal(t, "DATAJOBS_DATABASE_URL", e.Name)
			v = dbURL
		case e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "status.podIP":
			v = "127.0.0.1"
		default:
			require.Failf(t, "unexpected env source", "%s", e.Name)
		}
		vars[e.Name] = v
		env = append(env, e.Name+"="+v)
	}
	env = append(env, "DATAJOBS_KUBECONFIG="+in.kubeconfig)
	// The chart listens on every interface; auth mode none (these tests do not test the
	// API's authentication) is refused there, so this process listens on loopback only.
	env = append(env, "DATAJOBS_LISTEN=127.0.0.1:"+strconv.Itoa(in.apiPort))
	// A keyring of its own, as the chart's secrets.existingSecret mounts one: team OAuth
	// credentials can then be set, and the synchronizer writes their Secrets.
	keyFile := filepath.Join(t.TempDir(), "keys.json")
	_, err = secrets.AddKey(keyFile)
	require.NoError(t, err)
	env = append(env, "DATAJOBS_SECRETS_KEY_FILE="+keyFile)
	env = append(env, extraEnv...)
	base := "http://127.0.0.1:" + strconv.Itoa(in.apiPort)
	s := &service{Process: testenv.Start(t, bin, []string{"serve"}, env, base+"/readyz"), base: base}
	admin, err := http.Get("http://127.0.0.1:" + strconv.Itoa(in.adminPort) + "/metrics")
	require.NoError(t, err, "the admin listener is on the pod IP")
	admin.Body.Close()
	return s
}

// do sends a request to the API and returns the status and body.
func (s *service) do(t *testing.T, method, path, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, s.base+path, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

func (s *service) must(t *testing.T, want int, method, path, body string) string {
	t.Helper()
	code, b := s.do(t, method, path, body)
	require.Equal(t, want, code, "%s %s: %s", method, path, b)
	return b
}

const team = "/data-jobs/for-team/team-a"

// createJob creates a job and deploys its version v1.
func (s *service) createJob(t *testing.T, name string) {
	t.Helper()
	s.must(t, http.StatusCreated, http.MethodPost, team+"/jobs",
		fmt.Sprintf(`{"job_name":%q,"team":"team-a","description":"deploytest","config":{"schedule":{"schedule_cron":"0 * * * *"}}}`, name))
	s.deploy(t, name, "v1")
}

// keepDatabaseNonEmpty creates a job that is never deployed: on a database without any
// job the synchronizer deletes no CronJob (the mass-prune guard), and the tests delete
// their last deployed job.
func (s *service) keepDatabaseNonEmpty(t *testing.T) {
	t.Helper()
	s.must(t, http.StatusCreated, http.MethodPost, team+"/jobs",
		`{"job_name":"keeper-job","team":"team-a","description":"deploytest","config":{"schedule":{"schedule_cron":"0 * * * *"}}}`)
}

// deploy deploys a version asking more CPU than any fake node has (the service allows it:
// max-cpu 200), so the pods of its executions stay pending and the executions under way:
// kwok would otherwise run them to success at once.
func (s *service) deploy(t *testing.T, name, version string) {
	t.Helper()
	s.must(t, http.StatusAccepted, http.MethodPost, team+"/jobs/"+name+"/deployments",
		fmt.Sprintf(`{"job_version":%q,"enabled":true,"resources":{"cpu_request":100,"cpu_limit":100}}`, version))
}

// setTeamCredentials sets the OAuth credentials of team-a, which the synchronizer puts
// into the team's Secret for its job pods.
func (s *service) setTeamCredentials(t *testing.T, clientSecret string) {
	t.Helper()
	s.must(t, http.StatusAccepted, http.MethodPut, "/data-jobs/teams/team-a/oauth-credentials",
		fmt.Sprintf(`{"clientId":"deploytest","clientSecret":%q}`, clientSecret))
}

// teamSecret is team-a's OAuth Secret in ns, nil when there is none.
func teamSecret(t *testing.T, c kubernetes.Interface, ns string) *corev1.Secret {
	t.Helper()
	s, err := c.CoreV1().Secrets(ns).Get(context.WithoutCancel(t.Context()), kube.TeamOAuthSecretName("team-a"), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	require.NoError(t, err)
	return s
}

// startExecution starts the job's deployment and returns the execution ID.
func (s *service) startExecution(t *testing.T, name string) string {
	t.Helper()
	body := s.must(t, http.StatusAccepted, http.MethodPost, team+"/jobs/"+name+"/deployments/production/executions", `{"started_by":"deploytest"}`)
	m := regexp.MustCompile(`"id"\s*:\s*"([^"]+)"`).FindStringSubmatch(body)
	require.NotNil(t, m, body)
	return m[1]
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}
