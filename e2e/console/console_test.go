// Package console drives the web console in a real browser (headless Chromium, through
// chromedp) against `datajobs serve` in auth mode oidc on the test environment: Ory Hydra
// signs people in, the synchronizer projects deployments into CronJobs, and the test moves
// the pods of executions as a kubelet would.
package console

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/fetch"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/datajobs/datajobs/internal/devenv"
	"github.com/datajobs/datajobs/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m, testenv.WithControllers(), testenv.WithOIDC()) }

// chromium is the browser of the tests: Debian's chromium, installed by hack/setup.sh.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("DATAJOBS_TEST_REQUIRE_OIDC") == "1" {
		t.Fatal("no chromium although hack/setup.sh installs it (apt-get install chromium)")
	}
	t.Skip("no chromium on PATH: apt-get install chromium (hack/setup.sh does) to run the browser test")
	return ""
}

// screenshots is where the test writes its screenshots: $DATAJOBS_UI_SCREENSHOTS, or a
// temporary folder.
func screenshots(t *testing.T) string {
	t.Helper()
	if d := os.Getenv("DATAJOBS_UI_SCREENSHOTS"); d != "" {
		require.NoError(t, os.MkdirAll(d, 0o755))
		return d
	}
	return t.TempDir()
}

func TestConsoleInABrowser(t *testing.T) {
	chrome := chromium(t)
	shots := screenshots(t)
	p := testenv.OIDC(t)
	dbURL, kubeconfig, ns := testenv.DatabaseURL(t), testenv.Kubeconfig(t), testenv.Namespace(t)
	client := testenv.Clientset(t)

	addr := testenv.FreeAddr(t)
	base := "http://" + addr
	clientID := fmt.Sprintf("console-%d", time.Now().UnixNano())
	p.NewBrowserClient(t, clientID, base+"/ui/callback")
	serve(t, dbURL, kubeconfig, ns, addr,
		"--auth-mode", "oidc", "--oidc-issuer-url", p.IssuerURL, "--oidc-username-claim", "username",
		"--ui-oidc-client-id", clientID, "--ui-public-url", base, "--resync-interval", "30s",
		"--secrets-key-file", testenv.SecretsKeyFile(t))

	// Jobs of team-a (some deployed) and one of team-b, made through the REST API.
	tokA, tokB := p.ClientToken(t, "bot-a", "team-a"), p.ClientToken(t, "bot-b", "team-b")
	jobs := []struct{ name, schedule, version string }{
		{"ingest-orders", "*/15 * * * *", "3f9c2e1"},
		{"ingest-payments", "0 * * * *", "a71d0b4"},
		{"ingest-clicks", "30 2 * * *", ""},
		{"daily-revenue-report", "0 6 * * 1-5", "v2.4.0"},
		{"weekly-churn-model", "0 3 * * 1", "9be04aa"},
		{"customer-dedup", "45 1 1 * *", ""},
	}
	for _, j := range jobs {
		api(t, base, tokA, "POST", "/data-jobs/for-team/team-a/jobs", http.StatusCreated,
			fmt.Sprintf(`{"job_name":%q,"description":"Loads %s into the warehouse.","config":{"schedule":{"schedule_cron":%q},"contacts":{"notified_on_job_failure_user_error":["data-eng@example.com"]}}}`,
				j.name, strings.ReplaceAll(j.name, "-", " "), j.schedule))
		if j.version != "" {
			api(t, base, tokA, "POST", "/data-jobs/for-team/team-a/jobs/"+j.name+"/deployments", http.StatusAccepted,
				fmt.Sprintf(`{"job_version":%q,"enabled":true}`, j.version))
		}
	}
	api(t, base, tokA, "PUT", "/data-jobs/for-team/team-a/jobs/ingest-orders/deployments/release/properties", http.StatusNoContent,
		`{"source_table":"orders","batch_size":5000}`)
	api(t, base, tokB, "POST", "/data-jobs/for-team/team-b/jobs", http.StatusCreated,
		`{"job_name":"payroll-of-b","description":"Team b's payroll.","config":{"schedule":{"schedule_cron":"0 0 * * *"}}}`)
	api(t, base, tokB, "POST", "/data-jobs/for-team/team-b/jobs/payroll-of-b/deployments", http.StatusAccepted, `{"job_version":"b1","enabled":true}`)

	b := newBrowser(t, chrome, p)
	b.user, b.teams = "alice", []string{"team-a"}

	// The list, after signing in through Hydra.
	b.do(chromedp.Navigate(base + "/ui/"))
	b.do(chromedp.WaitVisible(chromedp.CSS("table.jobs")))
	b.waitFor(`document.querySelectorAll('table.jobs .s-synced').length === 4`, "every deployed job synced")
	list := b.text("main")
	for _, j := range jobs {
		require.Contains(t, list, j.name)
	}
	require.Contains(t, list, "every 15 minutes")
	require.Contains(t, list, "weekdays at 06:00 UTC")
	require.Contains(t, b.text("header"), "alice")
	require.NotContains(t, list, "payroll-of-b", "a user of team-a never sees team-b's job")
	b.shot(shots, "jobs-list")

	// Search: the table follows what is typed, from the server.
	b.do(chromedp.SendKeys(chromedp.CSS("#q"), "ingest"))
	b.waitFor(`document.querySelectorAll('table.jobs tbody tr').length === 3`, "three ingest jobs")
	require.NotContains(t, b.text("table.jobs"), "weekly-churn-model")
	require.Contains(t, b.location(), "q=ingest", "the search is in the address")
	b.shot(shots, "jobs-search")

	// Filter by deployment status: the server's SQL drops the ingest job that is not
	// deployed, and the filter is in the address, so a reload keeps it.
	b.do(chromedp.SendKeys(chromedp.CSS("#status"), "synced")) // the keyboard picks the option, as a user does
	b.waitFor(`location.search.includes('status=synced') && document.querySelectorAll('table.jobs tbody tr').length === 2`, "the two synced ingest jobs")
	b.do(chromedp.Reload())
	b.do(chromedp.WaitVisible(chromedp.CSS("table.jobs")))
	table := b.text("table.jobs")
	require.Contains(t, table, "ingest-orders")
	require.Contains(t, table, "ingest-payments")
	require.NotContains(t, table, "ingest-clicks", "not deployed, so not synced")
	require.Equal(t, 2, strings.Count(table, "synced"), "one synced pill per row")
	require.Contains(t, b.text("#jobtable .count"), "1–2 of 2 jobs")
	b.shot(shots, "jobs-status")

	// The job page: desired next to actual, the plan, properties, no executions yet.
	b.do(chromedp.Click(chromedp.CSS(`a[href="/ui/teams/team-a/jobs/ingest-orders"]`)))
	b.do(chromedp.WaitVisible(chromedp.CSS("#deployment")))
	b.waitFor(`document.querySelector('#deployment .s-synced') && document.querySelector('table.diff .same')`, "synced and identical")
	dep := b.text("#deployment")
	require.Contains(t, dep, "Desired next to actual")
	require.Contains(t, dep, "3f9c2e1")
	plan := b.text("#deployment .plan dd")
	require.Regexp(t, `^(create|unchanged|record) .+`, plan, "the synchronizer's latest plan for the job, with its reason")
	require.Contains(t, b.text("main"), `"source_table": "orders"`)
	b.shot(shots, "job")

	// Disable: the status and the CronJob change.
	require.False(t, *cronJob(t, client, ns, "ingest-orders").Spec.Suspend)
	b.do(chromedp.Click(chromedp.CSS(`#deployment button[hx-post$="/disable"]`)))
	b.do(chromedp.WaitVisible(chromedp.CSS("dialog#confirm")))
	require.Contains(t, b.text("dialog#confirm"), "Its CronJob is suspended")
	b.shot(shots, "confirm")
	b.do(chromedp.Click(chromedp.CSS(`dialog#confirm button[value="ok"]`)))
	b.waitFor(`document.querySelector('#flash .alert.ok') !== null`, "the notice of the action")
	b.waitFor(`document.querySelector('#deployment button[hx-post$="/enable"]') && document.querySelector('#deployment .s-synced') && document.querySelector('table.diff .same')`,
		"disabled, synced again")
	require.Eventually(t, func() bool { return *cronJob(t, client, ns, "ingest-orders").Spec.Suspend }, time.Minute, 200*time.Millisecond, "the CronJob is suspended")
	require.Contains(t, b.text("table.diff"), "no")
	b.shot(shots, "job-disabled")

	// Run now: the execution appears, runs and succeeds as the kubelet moves its pod.
	b.do(chromedp.Click(chromedp.CSS(`#deployment button[hx-post$="/run"]`)))
	b.do(chromedp.Click(chromedp.CSS(`dialog#confirm button[value="ok"]`)))
	b.waitFor(`document.querySelectorAll('#executions tbody tr').length === 1`, "the execution is listed")
	id := strings.TrimSpace(b.text("#executions tbody tr th"))
	require.True(t, strings.HasPrefix(id, "ingest-orders-"), id)
	pod := jobPod(t, client, ns, id)
	// kwok's stages move the pods of Jobs too; the test's kubelet writes lose no race
	// with them (a conflict is read again, a finished pod left alone).
	kubelet(t, client, pod, corev1.PodRunning, running())
	b.waitFor(`document.querySelector('#executions .e-running, #executions .e-succeeded') !== null`, "running")
	b.shot(shots, "execution-running")
	kubelet(t, client, pod, corev1.PodSucceeded, terminated(0, "Completed"))
	b.waitFor(`document.querySelector('#executions .e-succeeded') !== null`, "succeeded")
	row := b.text("#executions tbody tr")
	require.Contains(t, row, "manual")
	require.Contains(t, row, "manual/console/alice")
	b.shot(shots, "job-executions")

	// Its page and logs: what the pod printed (kwok serves every pod of its node this line).
	b.do(chromedp.Click(chromedp.CSS(`#executions tbody tr th a`)))
	b.do(chromedp.WaitVisible(chromedp.CSS("#logs")))
	require.Contains(t, b.text("#logs"), "succeeded")
	require.Contains(t, b.text("main"), "manual/console/alice")
	b.do(chromedp.Click(chromedp.CSS(`#logs a.button`)))
	b.waitFor(`location.search === '?all=1' && document.querySelector('#logs') !== null`, "the whole log")
	require.Contains(t, b.text("#logs"), "complete")
	b.waitFor(fmt.Sprintf(`document.querySelector('#logs').innerText.includes(%q)`, devenv.DefaultPodLogLine), "the pod's log line")
	b.shot(shots, "execution")

	// The team's webhooks: one added (its secret shown once), then deleted behind the
	// confirmation.
	b.do(chromedp.Navigate(base + "/ui/teams/team-a/webhooks"))
	b.do(chromedp.WaitVisible(chromedp.CSS("form.stack")))
	require.Contains(t, b.text("main"), "No webhooks")
	b.do(chromedp.SendKeys(chromedp.CSS("#hook-name"), "on-call"))
	b.do(chromedp.SendKeys(chromedp.CSS("#hook-url"), "https://hooks.example.com/datajobs"))
	b.do(chromedp.Click(chromedp.CSS(`form.stack button[type="submit"]`)))
	b.do(chromedp.WaitVisible(chromedp.CSS("#new-secret")))
	require.Regexp(t, `^whsec_[A-Za-z0-9+/]+=*$`, strings.TrimSpace(b.text("#new-secret pre")))
	require.Contains(t, b.text("#webhooks"), "https://hooks.example.com/datajobs")
	b.shot(shots, "webhooks-added")
	b.do(chromedp.Click(chromedp.CSS(`#webhooks button.danger`)))
	b.do(chromedp.WaitVisible(chromedp.CSS("dialog#confirm")))
	require.Contains(t, b.text("dialog#confirm"), "Delete the webhook on-call?")
	b.do(chromedp.Click(chromedp.CSS(`dialog#confirm button[value="ok"]`)))
	b.waitFor(`document.querySelector('#webhooks') === null && document.querySelector('#new-secret') === null && document.body.innerText.includes('No webhooks')`, "the webhook deleted, the secret gone")

	teamPanels(t, b, dbURL, base, tokA, shots)
	rerunAndBackfill(t, b, base, shots)
	pipelinePages(t, b, dbURL, base, tokA, shots)
	triggerLinks(t, b, base, tokA, shots)

	// Team isolation: team-b's job is refused by address, and no search finds it.
	b.do(chromedp.Navigate(base + "/ui/teams/team-b/jobs/payroll-of-b"))
	b.do(chromedp.WaitVisible(chromedp.CSS(".alert.error")))
	require.Contains(t, b.text("main"), "not a member of team team-b")
	require.NotContains(t, b.text("main"), "payroll")
	b.do(chromedp.Navigate(base + "/ui/?q=*of-b*"))
	b.do(chromedp.WaitVisible(chromedp.CSS("#jobtable")))
	require.Contains(t, b.text("#jobtable"), "No jobs match.")

	// A phone.
	b.do(chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2), chromedp.EmulateMobile))
	b.do(chromedp.Navigate(base + "/ui/"))
	b.do(chromedp.WaitVisible(chromedp.CSS("table.jobs")))
	b.shot(shots, "jobs-phone")
	t.Logf("screenshots in %s", shots)
}

// browser is a headless Chromium tab. It plays the identity provider's login and consent
// apps: Hydra sends the browser to testenv.LoginAppURL, where the test intercepts the
// request, accepts the challenge for user through Hydra's admin API, and answers with the
// redirect Hydra gives back.
type browser struct {
	t     *testing.T
	ctx   context.Context
	p     *testenv.OIDCProvider
	user  string
	teams []string
}

func newBrowser(t *testing.T, path string, p *testenv.OIDCProvider) *browser {
	t.Helper()
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path), chromedp.NoSandbox, chromedp.WindowSize(1280, 900),
		chromedp.Flag("explicitly-allowed-ports", "1"), chromedp.Flag("disable-gpu", true),
	)...)
	ctx, cancel := chromedp.NewContext(actx)
	b := &browser{t: t, ctx: ctx, p: p}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
		wg.Wait()
	})
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate("about:blank")))
	paused := chromedp.Events(ctx, fetch.RequestPaused)
	wg.Go(func() {
		for ev, err := range paused {
			if err != nil {
				return
			}
			b.loginApp(ev)
		}
	})
	_, err := chromedp.Call(ctx, fetch.Enable, fetch.EnableParams{Patterns: []*fetch.RequestPattern{{URLPattern: testenv.LoginAppURL + "*"}}})
	require.NoError(t, err)
	return b
}

// loginApp answers a request to the login or consent app.
func (b *browser) loginApp(ev fetch.EventRequestPaused) {
	u, err := url.Parse(ev.Request.URL)
	if err != nil {
		return
	}
	q := u.Query()
	var next string
	if c := q.Get("login_challenge"); c != "" {
		next = b.p.AcceptLogin(b.t, c, b.user)
	} else {
		next = b.p.AcceptConsent(b.t, q.Get("consent_challenge"), b.user, b.teams...)
	}
	_, _ = chromedp.Call(b.ctx, fetch.FulfillRequest, fetch.FulfillRequestParams{
		RequestID: ev.RequestID, ResponseCode: http.StatusFound,
		ResponseHeaders: []*fetch.HeaderEntry{{Name: "Location", Value: next}},
	})
}

func (b *browser) do(a chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 2*time.Minute)
	defer cancel()
	require.NoError(b.t, chromedp.Do(ctx, a))
}

// waitFor waits until the JavaScript expression is true in the page, across a
// navigation (which ends the page's JavaScript context under a poll: "Cannot find context
// with specified id", or "Inspected target navigated or closed" when the page navigates
// itself, as htmx does on HX-Redirect).
func (b *browser) waitFor(expr, what string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 2*time.Minute)
	defer cancel()
	for {
		_, err := chromedp.Run(ctx, chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingInterval(100*time.Millisecond)))
		if err == nil {
			return
		}
		navigated := strings.Contains(err.Error(), "context") || strings.Contains(err.Error(), "navigated")
		if ctx.Err() != nil || !navigated {
			require.NoError(b.t, err, "waiting for %s", what)
			return
		}
	}
}

func (b *browser) text(sel string) string {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, time.Minute)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel), chromedp.NodeVisible))
	require.NoError(b.t, err, "text of %s", sel)
	return s
}

// eval is the number the JavaScript expression gives in the page.
func (b *browser) eval(expr string) float64 {
	b.t.Helper()
	v, err := chromedp.Run(b.ctx, chromedp.Evaluate[float64](expr))
	require.NoError(b.t, err, "evaluate %s", expr)
	return v
}

func (b *browser) location() string {
	b.t.Helper()
	s, err := chromedp.Run(b.ctx, chromedp.Location())
	require.NoError(b.t, err)
	return s
}

func (b *browser) shot(dir, name string) {
	b.t.Helper()
	png, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100))
	require.NoError(b.t, err)
	require.NoError(b.t, os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644))
}

// serve runs `datajobs serve` until the test ends.
func serve(t *testing.T, dbURL, kubeconfig, ns, addr string, args ...string) {
	t.Helper()
	bin, err := testenv.Binary()
	require.NoError(t, err)
	// The jobs deploy tags nobody pushed: images unchecked (--verify-prebuilt-images=false).
	serve := []string{
		"serve", "--listen", addr, "--admin-listen", testenv.FreeAddr(t), "--namespace", ns, "--log-format", "text",
		"--verify-prebuilt-images=false",
	}
	env := append(os.Environ(), "DATAJOBS_DATABASE_URL="+dbURL, "DATAJOBS_KUBECONFIG="+kubeconfig)
	testenv.Start(t, bin, append(serve, args...), env, "http://"+addr+"/readyz")
}

func api(t *testing.T, base, token, method, path string, want int, body string) {
	t.Helper()
	apiJSON(t, base, token, method, path, want, body, nil)
}

func cronJob(t *testing.T, client kubernetes.Interface, ns, name string) *batchv1.CronJob {
	t.Helper()
	cj, err := client.BatchV1().CronJobs(ns).Get(t.Context(), name, metav1.GetOptions{})
	require.NoError(t, err)
	return cj
}

// jobPod waits for the pod the Job controller makes for the execution's Job.
func jobPod(t *testing.T, client kubernetes.Interface, ns, jobName string) *corev1.Pod {
	t.Helper()
	var pod *corev1.Pod
	require.Eventually(t, func() bool {
		pods, err := client.CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{LabelSelector: "batch.kubernetes.io/job-name=" + jobName})
		if err != nil || len(pods.Items) == 0 {
			return false
		}
		pod = &pods.Items[0]
		return true
	}, 2*time.Minute, 200*time.Millisecond, "a pod for %s", jobName)
	return pod
}

// kubelet writes the pod's status as a kubelet would, unless the pod has finished.
func kubelet(t *testing.T, client kubernetes.Interface, p *corev1.Pod, phase corev1.PodPhase, state corev1.ContainerState) {
	t.Helper()
	require.Eventually(t, func() bool {
		err := devenv.SetPodStatus(t.Context(), client, p, phase, "", state)
		return err == nil || errors.Is(err, devenv.ErrPodFinished)
	}, time.Minute, 100*time.Millisecond, "pod %s to %s", p.Name, phase)
}

func running() corev1.ContainerState {
	return corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}}
}

func terminated(code int32, reason string) corev1.ContainerState {
	now := metav1.Now()
	return corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Reason: reason, StartedAt: now, FinishedAt: now}}
}
