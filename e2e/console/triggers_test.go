package console

import (
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/trigger"
)

// triggerLinks checks, as alice of team-a, a webhook trigger of a job of its own (no other
// step runs it, so no run of theirs keeps it busy) end to end: a signed event sent to its invocation URL starts a run (the leader's firer), the
// job page's trigger panel lists the event with a link to the run, and the run's page says
// which trigger event started it, linking back to that event's row (issue 42: before,
// the run said only "trigger/team-a/…/N" and the event named its run without a link).
func triggerLinks(t *testing.T, b *browser, base, tok, shots string) {
	t.Helper()
	const jobPage = "/ui/teams/team-a/jobs/orders-landed-report"
	api(t, base, tok, "POST", "/data-jobs/for-team/team-a/jobs", http.StatusCreated,
		`{"job_name":"orders-landed-report","description":"Reports on each orders file that lands.","config":{"schedule":{"schedule_cron":""}}}`)
	api(t, base, tok, "POST", "/data-jobs/for-team/team-a/jobs/orders-landed-report/deployments", http.StatusAccepted, `{"job_version":"5d2e7a0","enabled":true}`)
	var created struct {
		InvocationURL string `json:"invocation_url"`
		SigningSecret string `json:"signing_secret"`
	}
	apiJSON(t, base, tok, "POST", "/data-jobs/for-team/team-a/triggers", http.StatusCreated,
		`{"name":"orders-landed","target":{"job_name":"orders-landed-report"},"on":{"kind":"webhook"},"arguments":{"report":"daily"}}`, &created)
	require.True(t, strings.HasPrefix(created.InvocationURL, base+"/data-jobs/triggers/"), created.InvocationURL)

	// The event, signed as the sender would: no token, the signature of its secret.
	body := `{"object":"orders/2026-12-06.parquet"}`
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	req, err := http.NewRequestWithContext(t.Context(), "POST", created.InvocationURL, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set(trigger.TimestampHeader, ts)
	req.Header.Set(trigger.SignatureHeader, trigger.Sign([]byte(created.SigningSecret), ts, []byte(body)))
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusAccepted, resp.StatusCode)

	// The panel lists the event; once the firer started its run, the row links to it.
	b.do(chromedp.Navigate(base + jobPage))
	b.do(chromedp.WaitVisible(chromedp.CSS("#triggers")))
	require.Contains(t, b.text("#triggers"), "orders-landed")
	require.Contains(t, b.text("#triggers"), "a signed call")
	for deadline := time.Now().Add(2 * time.Minute); ; {
		b.do(chromedp.Reload())
		b.do(chromedp.WaitVisible(chromedp.CSS("#triggers")))
		if b.eval(`document.querySelectorAll('#triggers a[href*="/executions/"]').length`) == 1 {
			break
		}
		require.True(t, time.Now().Before(deadline), "the event's run within two minutes: %s", b.text("#triggers"))
		time.Sleep(time.Second)
	}
	require.Contains(t, b.text("#triggers tbody tr"), "started")
	event := strings.TrimSpace(b.text("#triggers tbody tr th"))
	b.shot(shots, "job-trigger-event")

	b.do(chromedp.Click(chromedp.CSS(`#triggers a[href*="/executions/"]`)))
	b.do(chromedp.WaitVisible(chromedp.CSS("#logs")))
	require.Contains(t, b.text("main"), "trigger/team-a/orders-landed/"+event)
	require.Contains(t, b.text("main"), `"report": "daily"`, "the trigger's arguments are the run's")
	b.shot(shots, "execution-triggered")

	b.do(chromedp.Click(chromedp.CSS(`a[href$="#trigger-event-` + event + `"]`)))
	b.waitFor(`location.pathname === '`+jobPage+`' && location.hash === '#trigger-event-`+event+`' && document.querySelector('#trigger-event-`+event+`') !== null`,
		"the job page at the event's row")
	// The row is in view below the sticky header, not under it.
	b.waitFor(`(() => { const r = document.querySelector('#trigger-event-`+event+`').getBoundingClientRect();
		return r.top >= document.querySelector('header').getBoundingClientRect().bottom && r.bottom <= innerHeight; })()`, "the event's row in view, below the header")
	b.shot(shots, "job-trigger-event-target")
}

// apiJSON calls the REST API as token's caller, wants the status want, and decodes the
// answer into out (unless nil).
func apiJSON(t *testing.T, base, token, method, path string, want int, body string, out any) {
	t.Helper()
	call(t, method, base+path, token, "application/json", strings.NewReader(body), want, out)
}

// call sends body, of contentType, to url as token's caller, wants the status want, and
// decodes the answer into out (unless nil).
func call(t *testing.T, method, url, token, contentType string, body io.Reader, want int, out any) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, body)
	require.NoError(t, err)
	req.Header.Set("Content-Type", contentType)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, want, resp.StatusCode, "%s %s", method, url)
	if out != nil {
		require.NoError(t, json.NewDecoder(resp.Body).Decode(out))
	}
}
