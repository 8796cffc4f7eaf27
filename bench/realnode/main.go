// Command realnode benchmarks executions on the real node (docs/test-environment.md): one
// job, whose step prints a line, built on the python 3.11 + vdk-core base image, started
// -runs times one after the other through the API of a `datajobs serve` started here. Per
// run it records, from the start request: the first time a watch sees the pod Running,
// and the first time the API reports the execution finished (polled every 20 ms); p50 and
// p99 of both. It needs the environment of hack/with-env.sh as root (a real node):
//
//	bash hack/with-env.sh .cache/bin/datajobs go run ./bench/realnode
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/datajobs/datajobs/bench/internal/stats"
	"github.com/datajobs/datajobs/internal/build/buildtest"
	"github.com/datajobs/datajobs/internal/devenv"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench/realnode:", err)
		os.Exit(1)
	}
}

const (
	team = "bench"
	job  = "bench-realnode"
)

func run() error {
	runs := flag.Int("runs", 50, "executions, one after the other")
	flag.Parse()
	ctx := context.Background()
	admin, kubeconfig := os.Getenv("DATAJOBS_TEST_DATABASE_URL"), os.Getenv("DATAJOBS_TEST_KUBECONFIG")
	registry, base := os.Getenv("DATAJOBS_TEST_REGISTRY"), os.Getenv("DATAJOBS_TEST_PYTHON_BASE_IMAGE")
	if admin == "" || kubeconfig == "" || registry == "" || base == "" || os.Getenv("DATAJOBS_TEST_REAL_NODE") == "" {
		return errors.New("run it as root under hack/with-env.sh: it needs the environment's database, cluster, registry, python base image and real node")
	}
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	kube, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return err
	}
	suffix := randomHex(4)
	ns := "bench-realnode-" + suffix
	if err := devenv.RealNodeNamespace(ctx, kube, ns); err != nil {
		return err
	}
	defer kube.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) //nolint:errcheck // best effort
	dbName := "bench_realnode_" + suffix
	if err := devenv.CreateDatabase(ctx, admin, dbName, ""); err != nil {
		return err
	}
	defer devenv.DropDatabase(context.Background(), admin, dbName) //nolint:errcheck // best effort
	u, _ := url.Parse(admin)
	u.Path = "/" + dbName
	api, stop, err := serve(u.String(), kubeconfig, ns, registry, base)
	if err != nil {
		return err
	}
	defer stop()
	if err := deploy(ctx, api, kube, ns); err != nil {
		return err
	}
	var toRunning, toFinished []time.Duration
	for i := range *runs {
		r, f, err := once(ctx, api, kube, ns)
		if err != nil {
			return fmt.Errorf("run %d: %w", i+1, err)
		}
		toRunning, toFinished = append(toRunning, r), append(toFinished, f)
	}
	pr, pf := stats.Percentiles(toRunning, 50, 99), stats.Percentiles(toFinished, 50, 99)
	fmt.Printf("%d runs: start -> pod Running p50 %v p99 %v; start -> execution finished p50 %v p99 %v\n",
		*runs, pr[0].Round(time.Millisecond), pr[1].Round(time.Millisecond), pf[0].Round(time.Millisecond), pf[1].Round(time.Millisecond))
	return nil
}

// serve starts `datajobs serve` (the binary make setup built) for namespace ns and returns
// its base URL.
func serve(dbURL, kubeconfig, ns, registry, base string) (string, func(), error) {
	root, err := devenv.RepoRoot()
	if err != nil {
		return "", nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	addr := l.Addr().String()
	l.Close()
	cmd := exec.Command(filepath.Join(root, ".cache/bin/datajobs"), "serve", "--listen", addr, "--admin-listen", "127.0.0.1:0",
		"--auth-mode", "none", "--namespace", ns, "--log-format", "text", "--log-level", "warn",
		"--image-registry", registry+"/"+ns, "--registry-insecure", "--base-image", "3.11="+base,
		"--default-cpu-request", "50m", "--default-memory-request", "64Mi")
	cmd.Env = append(os.Environ(), "DATAJOBS_DATABASE_URL="+dbURL, "DATAJOBS_KUBECONFIG="+kubeconfig)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return "", nil, err
	}
	stop := func() { _ = cmd.Process.Signal(syscall.SIGTERM); _ = cmd.Wait() }
	api := "http://" + addr
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		if resp, err := http.Get(api + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return api, stop, nil
			}
		}
		if time.Now().After(deadline) {
			stop()
			return "", nil, errors.New("datajobs serve not ready in a minute")
		}
	}
}

// deploy creates the job, uploads its sources and deploys them, and waits until its
// CronJob runs the built image.
func deploy(ctx context.Context, api string, kube kubernetes.Interface, ns string) error {
	jobs := api + "/data-jobs/for-team/" + team + "/jobs"
	if err := post(jobs, "application/json", fmt.Sprintf(`{"job_name":%q,"team":%q,"config":{"schedule":{"schedule_cron":"0 0 1 1 *"}}}`, job, team), nil); err != nil {
		return err
	}
	archive, err := buildtest.Zip(job, map[string]string{
		"config.ini":  "[owner]\nteam = " + team + "\n",
		"10_hello.py": "def run(job_input):\n    print('hello from the real node', flush=True)\n",
	})
	if err != nil {
		return err
	}
	var v struct {
		Version string `json:"version_sha"`
	}
	if err := post(jobs+"/"+job+"/sources?reason=bench", "application/octet-stream", string(archive), &v); err != nil {
		return err
	}
	if err := post(jobs+"/"+job+"/deployments", "application/json", fmt.Sprintf(`{"job_version":%q,"python_version":"3.11","enabled":true}`, v.Version), nil); err != nil {
		return err
	}
	for deadline := time.Now().Add(5 * time.Minute); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		cj, err := kube.BatchV1().CronJobs(ns).Get(ctx, job, metav1.GetOptions{})
		if err == nil && strings.Contains(cj.Spec.JobTemplate.Spec.Template.Spec.Containers[0].Image, "@sha256:") {
			return nil
		}
	}
	return errors.New("the job's image was not built in 5 minutes")
}

// once starts one execution and returns the times to its pod Running and to the API
// reporting it finished (it must succeed).
func once(ctx context.Context, api string, kube kubernetes.Interface, ns string) (time.Duration, time.Duration, error) {
	w, err := kube.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, 0, err
	}
	defer w.Stop()
	began := time.Now()
	var e struct {
		ID     string `json:"id"`
		Status string `json:"status"`
	}
	if err := post(api+"/data-jobs/for-team/"+team+"/jobs/"+job+"/deployments/production/executions", "application/json", `{"started_by":"bench"}`, &e); err != nil {
		return 0, 0, err
	}
	running := make(chan time.Duration, 1)
	go func() {
		for ev := range w.ResultChan() {
			if p, ok := ev.Object.(*corev1.Pod); ok && ev.Type != watch.Deleted && p.Labels["job-name"] == e.ID && p.Status.Phase != corev1.PodPending {
				running <- time.Since(began)
				return
			}
		}
	}()
	for deadline := time.Now().Add(3 * time.Minute); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if err := get(api+"/data-jobs/for-team/"+team+"/jobs/"+job+"/executions/"+e.ID, &e); err != nil {
			return 0, 0, err
		}
		switch e.Status {
		case "succeeded":
			finished := time.Since(began)
			select {
			case r := <-running:
				return r, finished, nil
			case <-time.After(5 * time.Second):
				return 0, 0, fmt.Errorf("execution %s succeeded, but its pod was never seen Running", e.ID)
			}
		case "user_error", "platform_error", "cancelled", "skipped":
			return 0, 0, fmt.Errorf("execution %s ended %s", e.ID, e.Status)
		}
	}
	return 0, 0, fmt.Errorf("execution %s not finished in 3 minutes", e.ID)
}

func post(url, contentType, body string, out any) error {
	resp, err := http.Post(url, contentType, strings.NewReader(body))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		return fmt.Errorf("POST %s: %s", url, resp.Status)
	}
	if out != nil {
		return json.NewDecoder(resp.Body).Decode(out)
	}
	return nil
}

func get(url string, out any) error {
	resp, err := http.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
