package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/datajobs/datajobs/internal/build/buildtest"
	"github.com/datajobs/datajobs/internal/store"
	"github.com/datajobs/datajobs/internal/testenv"
)

// stallingLinks serves a folder of wheels as a pip --find-links page, but holds the first
// request for the page until released: a build is then known to be in progress.
type stallingLinks struct {
	dir     string
	hit     chan struct{}
	release chan struct{}
	once    sync.Once
}

func (s *stallingLinks) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/" {
		s.once.Do(func() { close(s.hit) })
		select {
		case <-s.release:
		case <-r.Context().Done():
			return
		}
		entries, _ := os.ReadDir(s.dir)
		fmt.Fprint(w, "<html><body>")
		for _, e := range entries {
			fmt.Fprintf(w, "<a href=%q>%s</a>\n", e.Name(), e.Name())
		}
		fmt.Fprint(w, "</body></html>")
		return
	}
	http.ServeFile(w, r, filepath.Join(s.dir, filepath.Base(r.URL.Path)))
}

func (r *replica) upload(t *testing.T, name string, archive []byte) string {
	t.Helper()
	resp, err := http.Post(r.base+"/data-jobs/for-team/team-a/jobs/"+name+"/sources?reason=e2e", "application/octet-stream", strings.NewReader(string(archive)))
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var body struct {
		VersionSHA string `json:"version_sha"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&body))
	return body.VersionSHA
}

func (r *replica) deploymentStatus(t *testing.T, name string) string {
	t.Helper()
	resp, err := http.Get(r.base + "/data-jobs/for-team/team-a/jobs/" + name + "/deployments/production")
	require.NoError(t, err)
	defer resp.Body.Close()
	var body struct {
		Status string `json:"status"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&body))
	return body.Status
}

// builds reads a replica's datajobs_build_builds_total{result="ok"}.
func (r *replica) builds(t *testing.T) string {
	t.Helper()
	resp, err := http.Get(r.admin + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	m := regexp.MustCompile(`(?m)^datajobs_build_builds_total\{result="ok"\} (\S+)$`).FindSubmatch(b)
	if m == nil {
		return "0"
	}
	return string(m[1])
}

func TestLeaderKilledMidBuildTheNewLeaderFinishesItOnce(t *testing.T) {
	t.Parallel()
	dbURL, kubeconfig, ns := testenv.DatabaseURL(t), testenv.Kubeconfig(t), testenv.Namespace(t)
	registry := testenv.Registry(t)
	base := buildtest.PushBase(t, registry)
	links := &stallingLinks{dir: t.TempDir(), hit: make(chan struct{}), release: make(chan struct{})}
	buildtest.Wheel(t, links.dir, "tinypkg", "1.0")
	srv := httptest.NewServer(links)
	defer srv.Close()
	defer func() {
		select {
		case <-links.release:
		default:
			close(links.release)
		}
	}()
	prefix := registry + "/" + ns
	args := []string{
		"--image-registry", prefix, "--registry-insecure", "--base-image", "3.11=" + base,
		"--pip-index-url", (&url.URL{Scheme: "file", Path: t.TempDir()}).String(), "--pip-find-links", srv.URL + "/",
	}
	a := startReplica(t, dbURL, kubeconfig, ns, args...)
	b := startReplica(t, dbURL, kubeconfig, ns, args...)
	db, err := store.Open(t.Context(), store.Config{URL: dbURL})
	require.NoError(t, err)
	defer db.Close()
	var holder string
	require.Eventually(t, func() bool {
		h, _, expires, err := db.LeaseHolder(t.Context(), store.SyncLeaseName)
		holder = h
		return err == nil && h != "" && expires.After(time.Now())
	}, time.Minute, 100*time.Millisecond)
	leader, follower := a, b
	if strings.Contains(holder, fmt.Sprintf("-%d-", b.Cmd.Process.Pid)) {
		leader, follower = b, a
	}

	require.Equal(t, http.StatusCreated, follower.do(t, http.MethodPost, "/data-jobs/for-team/team-a/jobs",
		`{"job_name":"built-e2e","team":"team-a","config":{"schedule":{"schedule_cron":"0 * * * *"}}}`))
	v := follower.upload(t, "built-e2e", buildtest.Sources(t, "built-e2e", map[string]string{
		"config.ini": "[owner]\nteam = team-a\n", "requirements.txt": "tinypkg==1.0\n",
	}))
	require.Equal(t, http.StatusAccepted, follower.do(t, http.MethodPost, "/data-jobs/for-team/team-a/jobs/built-e2e/deployments",
		fmt.Sprintf(`{"job_version":%q,"python_version":"3.11","enabled":true}`, v)))

	select {
	case <-links.hit: // pip of the leader's build is waiting for the wheel page
	case <-time.After(2 * time.Minute):
		t.Fatal("the leader never started the build")
	}
	require.Eventually(t, func() bool { return follower.deploymentStatus(t, "built-e2e") == "building" },
		30*time.Second, 50*time.Millisecond, "the deployment shows building")
	require.NoError(t, leader.Cmd.Process.Signal(syscall.SIGKILL))
	close(links.release)

	client := testenv.Clientset(t)
	var image string
	require.Eventually(t, func() bool {
		cj, err := client.BatchV1().CronJobs(ns).Get(t.Context(), "built-e2e", metav1.GetOptions{})
		if err != nil {
			return false
		}
		image = cj.Spec.JobTemplate.Spec.Template.Spec.Containers[0].Image
		return true
	}, 2*time.Minute, 100*time.Millisecond, "the new leader builds the image and creates the CronJob")
	assert.True(t, strings.HasPrefix(image, prefix+"/built-e2e@sha256:"), image)
	require.Eventually(t, func() bool { return follower.deploymentStatus(t, "built-e2e") == "synced" }, 30*time.Second, 50*time.Millisecond)
	assert.Equal(t, "1", follower.builds(t), "the new leader built it once")
}
