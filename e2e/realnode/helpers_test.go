package realnode

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/datajobs/datajobs/internal/build/buildtest"
	"github.com/datajobs/datajobs/internal/devenv"
	"github.com/datajobs/datajobs/internal/httpapi"
	"github.com/datajobs/datajobs/internal/testenv"
)

const team = "realnode-team"

// service is one `datajobs serve` whose namespace's pods run on the real node, with the
// real VDK client pointed at it.
type service struct {
	base, ns string
	kube     kubernetes.Interface
	vdkEnv   []string
	home     string
}

// startService starts datajobs on a fresh database and a namespace that RealNodeNamespace
// sends to the real node, building images on the python 3.11 base image, with pip finding
// the wheels in wheels (a local index) for requirements.txt.
func startService(t *testing.T, wheels string, extraArgs ...string) *service {
	t.Helper()
	requireRealNode(t)
	dbURL, kubeconfig, ns := testenv.DatabaseURL(t), testenv.Kubeconfig(t), testenv.Namespace(t)
	kube := testenv.Clientset(t)
	require.NoError(t, devenv.RealNodeNamespace(t.Context(), kube, ns))
	index := httptest.NewServer(http.FileServer(http.Dir(wheels)))
	t.Cleanup(index.Close)
	bin, err := testenv.Binary()
	require.NoError(t, err)
	addr, adminAddr := testenv.FreeAddr(t), testenv.FreeAddr(t)
	// The pods reach the service through a forward on the node's gateway, as in datajobs dev.
	fwd, err := devenv.StartForward(net.JoinHostPort(os.Getenv(envGateway), "0"), addr, httpapi.JobsOnly)
	require.NoError(t, err)
	t.Cleanup(func() { _ = fwd.Close() })
	args := []string{
		"serve", "--listen", addr, "--admin-listen", adminAddr, "--auth-mode", "none",
		"--namespace", ns, "--log-format", "text", "--job-api-url", "http://" + fwd.Addr,
		"--secrets-key-file", testenv.SecretsKeyFile(t),
		"--image-registry", os.Getenv(envRegistry) + "/" + ns, "--registry-insecure",
		"--base-image", "3.11=" + os.Getenv(envPythonBase), "--pip-find-links", index.URL + "/",
		// Small requests: a 2-core node runs the suite's pods side by side.
		"--default-cpu-request", "50m", "--default-memory-request", "64Mi",
	}
	args = append(args, extraArgs...)
	env := append(os.Environ(), "DATAJOBS_DATABASE_URL="+dbURL, "DATAJOBS_KUBECONFIG="+kubeconfig)
	testenv.Start(t, bin, args, env, "http://"+addr+"/readyz")
	home := t.TempDir()
	vdkEnv := []string{
		"HOME=" + home, "VDK_BASE_CONFIG_FOLDER=" + home, "PATH=" + os.Getenv("PATH"),
		"VDK_CONTROL_SERVICE_REST_API_URL=http://" + addr,
		"VDK_CONTROL_HTTP_TOTAL_RETRIES=0", "PYTHONWARNINGS=ignore::UserWarning",
	}
	return &service{base: "http://" + addr, ns: ns, kube: kube, vdkEnv: vdkEnv, home: home}
}

// vdkcli is the real VDK client of the compatibility suite's virtualenv.
func vdkcli(t *testing.T) string {
	t.Helper()
	root, err := devenv.RepoRoot()
	require.NoError(t, err)
	bin := filepath.Join(root, ".cache/compat-venv/bin/vdkcli")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("the VDK client is not installed (%v): run make setup", err)
	}
	return bin
}

// vdk runs vdkcli with args, requires exit code 0 and returns what it printed.
func (s *service) vdk(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), vdkcli(t), args...)
	cmd.Env, cmd.Dir = s.vdkEnv, s.home
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "vdkcli %s:\n%s", strings.Join(args, " "), out)
	return string(out)
}

// configINI is a job's config.ini for the suite's team with python version py.
func configINI(py string) string {
	return "[owner]\nteam = " + team + "\n\n[job]\nschedule_cron = 0 0 1 1 *\npython_version = " + py + "\n"
}

// deploy creates job name and deploys a job folder with the given step files (and a
// python 3.11 config.ini unless they have one) through vdkcli, and waits until its
// CronJob runs the built image.
func (s *service) deploy(t *testing.T, name string, files map[string]string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.MkdirAll(dir, 0o755))
	if _, ok := files["config.ini"]; !ok {
		files["config.ini"] = configINI("3.11")
	}
	for f, body := range files {
		require.NoError(t, os.WriteFile(filepath.Join(dir, f), []byte(body), 0o644))
	}
	s.vdk(t, "create", "-n", name, "-t", team, "--cloud")
	s.vdk(t, "deploy", "-n", name, "-t", team, "-p", dir, "-r", "realnode e2e")
	s.waitBuilt(t, name)
}

// waitBuilt waits until job name's CronJob runs the image built from its sources.
func (s *service) waitBuilt(t *testing.T, name string) {
	t.Helper()
	require.Eventually(t, func() bool {
		cj, err := s.kube.BatchV1().CronJobs(s.ns).Get(t.Context(), name, metav1.GetOptions{})
		return err == nil && strings.Contains(cj.Spec.JobTemplate.Spec.Template.Spec.Containers[0].Image, "@sha256:")
	}, 3*time.Minute, 200*time.Millisecond, "the CronJob of %s runs the built image (deployment: %s)", name, s.deployment(t, name))
}

// getJSON reads the service's answer to GET path (200) into v.
func (s *service) getJSON(t *testing.T, path string, v any) {
	t.Helper()
	resp, err := http.Get(s.base + path) //nolint:noctx // a test's short read of a local server
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, "GET %s", path)
	require.NoError(t, json.NewDecoder(resp.Body).Decode(v))
}

func (s *service) deployment(t *testing.T, name string) string {
	resp, err := http.Get(s.base + "/data-jobs/for-team/" + team + "/jobs/" + name + "/deployments/production")
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	var body map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&body)
	return fmt.Sprint(body)
}

var executionID = regexp.MustCompile(`"execution_id":\s*"([^"]+)"`)

// start starts an execution with vdkcli and returns its id.
func (s *service) start(t *testing.T, name string) string {
	t.Helper()
	out := s.vdk(t, "execute", "--start", "-n", name, "-t", team, "-o", "json")
	m := executionID.FindStringSubmatch(out)
	require.NotNil(t, m, "vdkcli execute --start printed no execution id:\n%s", out)
	return m[1]
}

type execution struct {
	ID      string `json:"id"`
	Status  string `json:"status"`
	Message string `json:"message"`
	Type    string `json:"type"`
}

func (s *service) execution(t *testing.T, name, id string) execution {
	t.Helper()
	resp, err := http.Get(s.base + "/data-jobs/for-team/" + team + "/jobs/" + name + "/executions/" + id)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var e execution
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&e))
	return e
}

// waitStatus waits until the execution's status is one of want (finished ones are final)
// and returns it.
func (s *service) waitStatus(t *testing.T, name, id string, timeout time.Duration, want ...string) execution {
	t.Helper()
	var e execution
	require.Eventually(t, func() bool {
		e = s.execution(t, name, id)
		for _, w := range want {
			if e.Status == w {
				return true
			}
		}
		return false
	}, timeout, 200*time.Millisecond, "execution %s to be %v; last: %+v; pods: %s", id, want, &e, s.podsOf(t, id))
	return e
}

// logs reads an execution's log with vdkcli execute --logs.
func (s *service) logs(t *testing.T, name, id string) string {
	t.Helper()
	return s.vdk(t, "execute", "--logs", "-i", id, "-n", name, "-t", team)
}

// pods lists the pods of an execution's Job.
func (s *service) pods(t *testing.T, id string) []corev1.Pod {
	t.Helper()
	l, err := s.kube.CoreV1().Pods(s.ns).List(t.Context(), metav1.ListOptions{LabelSelector: "job-name=" + id})
	require.NoError(t, err)
	return l.Items
}

// podsOf describes an execution's pods, for failure messages.
func (s *service) podsOf(t *testing.T, id string) string {
	var b strings.Builder
	for _, p := range s.pods(t, id) {
		fmt.Fprintf(&b, "%s on %q: %s", p.Name, p.Spec.NodeName, p.Status.Phase)
		for _, c := range p.Status.ContainerStatuses {
			fmt.Fprintf(&b, " %+v", c.State)
		}
		b.WriteString("; ")
	}
	return b.String()
}

// wheel writes a small wheel of package pkg (its VALUE names it) into a new index folder.
func wheel(t *testing.T, pkg, version string) string {
	dir := t.TempDir()
	buildtest.Wheel(t, dir, pkg, version)
	return dir
}

func (s *service) ctx() context.Context { return context.Background() }

// setMemoryLimit deploys the job's current version again with a memory limit of mib MiB
// (the VDK client has no resource flags) and no retries, and waits until its CronJob
// carries it.
func (s *service) setMemoryLimit(name string, mib int64) error {
	return s.redeploy(name, fmt.Sprintf(`"retries":0,"resources":{"memory_request":%d,"memory_limit":%d}`, mib/2, mib), func(cj *batchv1.CronJob) bool {
		return cj.Spec.JobTemplate.Spec.Template.Spec.Containers[0].Resources.Limits.Memory().Value() == mib<<20
	})
}

// redeploy deploys the job's current version again with the body fields fields (a run
// policy, resources) and waits until its CronJob shows applied(cj).
func (s *service) redeploy(name, fields string, applied func(*batchv1.CronJob) bool) error {
	path := s.base + "/data-jobs/for-team/" + team + "/jobs/" + name + "/deployments"
	resp, err := http.Get(path + "/production")
	if err != nil {
		return err
	}
	var d struct {
		JobVersion string `json:"job_version"`
	}
	err = json.NewDecoder(resp.Body).Decode(&d)
	resp.Body.Close()
	if err != nil {
		return err
	}
	body := fmt.Sprintf(`{"job_version":%q,"enabled":true,%s}`, d.JobVersion, fields)
	resp, err = http.Post(path, "application/json", strings.NewReader(body))
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		return fmt.Errorf("deploy %s: %s", body, resp.Status)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		cj, err := s.kube.BatchV1().CronJobs(s.ns).Get(s.ctx(), name, metav1.GetOptions{})
		if err == nil && applied(cj) {
			return nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("the CronJob of %s does not carry %s", name, fields)
}

// withRetries is redeploy's check of a backoff limit.
func withRetries(n int32) func(*batchv1.CronJob) bool {
	return func(cj *batchv1.CronJob) bool {
		b := cj.Spec.JobTemplate.Spec.BackoffLimit
		return b != nil && *b == n
	}
}

// executionOrZero reads an execution, or returns a zero one while it is not recorded.
func (s *service) executionOrZero(name, id string) execution {
	var e execution
	resp, err := http.Get(s.base + "/data-jobs/for-team/" + team + "/jobs/" + name + "/executions/" + id)
	if err != nil {
		return e
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusOK {
		_ = json.NewDecoder(resp.Body).Decode(&e)
	}
	return e
}

// mailOnUserError makes address the job's contact on user errors, with execution
// notifications on, as a user edits the job's config through the API (GET, then PUT).
func (s *service) mailOnUserError(t *testing.T, name, address string) {
	t.Helper()
	url := s.base + "/data-jobs/for-team/" + team + "/jobs/" + name
	resp, err := http.Get(url) //nolint:noctx // a test's short read of a local server
	require.NoError(t, err)
	var body map[string]any
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&body))
	resp.Body.Close()
	cfg, _ := body["config"].(map[string]any)
	require.NotNil(t, cfg, "the job's config: %v", body)
	cfg["enable_execution_notifications"] = true
	contacts, _ := cfg["contacts"].(map[string]any)
	if contacts == nil {
		contacts = map[string]any{}
	}
	contacts["notified_on_job_failure_user_error"] = []string{address}
	cfg["contacts"] = contacts
	b, err := json.Marshal(body)
	require.NoError(t, err)
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPut, url, strings.NewReader(string(b)))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	put, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	put.Body.Close()
	require.Less(t, put.StatusCode, 300, "PUT %s: %s", url, put.Status)
}
