package console

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/testzip"
)

// forecastStep is the job's code, with markup that the files page must show as text.
const forecastStep = "def run(job_input):\n    # <b>not bold</b>\n    job_input.execute_query(\"SELECT 1\")\n"

// teamPanels checks, as alice of team-a, a job deployed with its own run policy, sources
// and secrets: the run policy with the next runs in its time zone, the secret names (never
// the value), the deploy's notification, the deployed version's files, and the team's
// health page after a failed run.
func teamPanels(t *testing.T, b *browser, dbURL, base, tok, shots string) {
	t.Helper()
	const job = "/data-jobs/for-team/team-a/jobs/sales-forecast"
	api(t, base, tok, "POST", "/data-jobs/for-team/team-a/jobs", http.StatusCreated,
		`{"job_name":"sales-forecast","description":"Forecasts next week's sales.","config":{"schedule":{"schedule_cron":"0 9 * * *"},
		  "contacts":{"notified_on_job_deploy":["forecast-team@example.com"],"notified_on_job_failure_user_error":["forecast-team@example.com"]}}}`)
	version := uploadSources(t, base+job+"/sources", tok, map[string]string{
		"sales-forecast/config.ini":       "[owner]\nteam = team-a\n\n[job]\nschedule_cron = 0 9 * * *\n",
		"sales-forecast/10_forecast.py":   forecastStep,
		"sales-forecast/requirements.txt": "pandas==2.2.3\n",
	})
	api(t, base, tok, "POST", job+"/deployments", http.StatusAccepted,
		fmt.Sprintf(`{"job_version":%q,"enabled":true,"retries":0,"time_zone":"Europe/Sofia","catch_up":2}`, version))
	const password = "correct-horse-battery-staple"
	api(t, base, tok, "PUT", job+"/deployments/release/secrets", http.StatusAccepted, `{"warehouse_password":"`+password+`","api_token":"`+password+`"}`)

	b.do(chromedp.Navigate(base + "/ui/teams/team-a/jobs/sales-forecast"))
	b.waitFor(`document.querySelector('#deployment .s-synced') !== null`, "synced")
	b.do(chromedp.Reload()) // the panels below are not polled
	b.do(chromedp.WaitVisible(chromedp.CSS("#policy")))
	policy := b.text("#policy")
	require.Contains(t, policy, "Europe/Sofia")
	require.Contains(t, policy, "09:00 Europe/Sofia", "the next runs on Sofia's clock")
	require.Regexp(t, `(06|07):00:00 UTC`, policy, "and in UTC beside them")
	require.Contains(t, policy, "default", "the fields the deployment does not set are marked")
	require.Contains(t, b.text("#secrets"), "warehouse_password")
	require.Contains(t, b.text("#secrets"), "api_token")
	require.NotContains(t, b.text("body"), password, "a secret value is never in the page")
	b.waitFor(`document.querySelector('#notifications').innerText.includes('deploy succeeded')`, "the deploy's event")
	require.Contains(t, b.text("#notifications"), "forecast-team@example.com")
	b.shot(shots, "job-policy")

	// The deployed version's files, and one of them, escaped.
	b.do(chromedp.Click(chromedp.CSS(`a[href="/ui/teams/team-a/jobs/sales-forecast/sources"]`)))
	b.do(chromedp.WaitVisible(chromedp.CSS("#files")))
	require.Contains(t, b.text("main"), version)
	b.do(chromedp.Click(chromedp.CSS(`#files a[href$="10_forecast.py"]`)))
	b.do(chromedp.WaitVisible(chromedp.CSS("pre.source")))
	require.Equal(t, strings.TrimSpace(forecastStep), strings.TrimSpace(b.text("pre.source")), "the file as written, markup as text")
	b.shot(shots, "files")

	// A run, which kwok's stages end succeeded within milliseconds (no kubelet write wins
	// that race); then it is recorded failed as the tracker records an exit code 1, the one
	// failure kwok cannot produce here, so that the team's health has a failing job.
	b.do(chromedp.Navigate(base + "/ui/teams/team-a/jobs/sales-forecast"))
	b.do(chromedp.Click(chromedp.CSS(`#deployment button[hx-post$="/run"]`)))
	b.do(chromedp.Click(chromedp.CSS(`dialog#confirm button[value="ok"]`)))
	b.waitFor(`document.querySelector('#executions .e-succeeded') !== null`, "the run ended")
	id := strings.TrimSpace(b.text("#executions tbody tr th"))
	sql(t, dbURL, `UPDATE data_job_execution SET status = 'user_error', exit_code = 1, termination_reason = 'Error', message = 'forecast failed' WHERE id = $1`, id)
	sql(t, dbURL, `UPDATE data_job SET last_execution_status = 'user_error' WHERE name = 'sales-forecast'`)
	failedLog(t, dbURL, id)
	b.do(chromedp.Navigate(base + "/ui/")) // the list links the health of alice's teams
	b.do(chromedp.Click(chromedp.CSS(`.page-head a[href="/ui/teams/team-a/health"]`)))
	b.do(chromedp.WaitVisible(chromedp.CSS("#by-status")))
	require.Contains(t, b.text("#failing"), "sales-forecast")
	require.Contains(t, b.text("#runs"), "succeeded", "ingest-orders' run of today")
	require.Contains(t, b.text("#runs"), "user error")
	require.NotContains(t, b.text("main"), "payroll-of-b")
	b.shot(shots, "health")
}

// uploadSources uploads a job directory zipped as vdk deploy does and returns its version.
func uploadSources(t *testing.T, url, tok string, files map[string]string) string {
	t.Helper()
	var v struct {
		VersionSHA string `json:"version_sha"`
	}
	call(t, http.MethodPost, url, tok, "application/octet-stream", bytes.NewReader(testzip.Dir(t, files)), http.StatusOK, &v)
	require.NotEmpty(t, v.VersionSHA)
	return v.VersionSHA
}

// sql writes the database as the leader would.
func sql(t *testing.T, dbURL, query string, args ...any) {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), dbURL)
	require.NoError(t, err)
	defer conn.Close(context.WithoutCancel(t.Context()))
	_, err = conn.Exec(t.Context(), query, args...)
	require.NoError(t, err)
}

// failedLog writes, once the leader has kept the run's log (kwok's one line), the log of
// a user error over it: 300 lines of output, the traceback, then vdk-core's summary.
func failedLog(t *testing.T, dbURL, id string) {
	t.Helper()
	require.Eventually(t, func() bool {
		conn, err := pgx.Connect(t.Context(), dbURL)
		require.NoError(t, err)
		defer conn.Close(context.WithoutCancel(t.Context()))
		var kept bool
		err = conn.QueryRow(t.Context(), `SELECT NOT pending FROM data_job_execution_log WHERE execution_id = $1`, id).Scan(&kept)
		return err == nil && kept
	}, time.Minute, 200*time.Millisecond, "the leader keeps the run's log")
	var log strings.Builder
	for i := range 300 {
		fmt.Fprintf(&log, "2026-12-01 09:00:%02d INFO  forecast.step  reading partition %d of 300\n", i%60, i+1)
	}
	log.WriteString("Traceback (most recent call last):\n  File \"10_forecast.py\", line 3, in run\n    job_input.execute_query(\"SELECT 1\")\n" +
		forecastError + "\nWhat happened: Data Job sales-forecast failed.\nWhy it happened: user error.\n")
	sql(t, dbURL, `UPDATE data_job_execution_log SET logs = $2 WHERE execution_id = $1`, id, log.String())
}

// forecastError is the exception that ends the failed run's log.
const forecastError = "ValueError: no sales rows for 2026-11-30"
