package console

import (
	"regexp"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
)

// rerunAndBackfill checks, as alice of team-a on the sales-forecast job of teamPanels
// (daily at 09:00 Europe/Sofia, its latest run recorded failed): the failed run's Re-run
// button starts a new run that links back to it, and the backfill form starts one run per
// schedule time of three days, which the job page then lists with their progress.
func rerunAndBackfill(t *testing.T, b *browser, base, shots string) {
	t.Helper()
	const jobPage = "/ui/teams/team-a/jobs/sales-forecast"
	b.do(chromedp.Navigate(base + jobPage))
	b.do(chromedp.WaitVisible(chromedp.CSS("#executions")))
	failed := strings.TrimSpace(b.text("#executions tbody tr th"))
	b.do(chromedp.Click(chromedp.CSS(`#executions tbody tr th a`)))
	b.do(chromedp.WaitVisible(chromedp.CSS(`button[type="submit"]`)))
	require.Contains(t, b.text("main"), "forecast failed", "the failed run's page")
	// The error first: the exception above the log and marked in it, the log box opened at
	// its end (its 300 lines of output above, out of view).
	require.Contains(t, b.text("#logs .log-error"), forecastError)
	require.Equal(t, forecastError, b.text("#logs pre.log mark"))
	b.waitFor(`(() => { const p = document.querySelector('#logs pre.log');
		return p.scrollTop > 0 && p.scrollTop + p.clientHeight >= p.scrollHeight - 2; })()`, "the log box at its end")
	b.shot(shots, "execution-failed")
	b.do(chromedp.Click(chromedp.CSS(`form[action$="/rerun"] button`)))
	b.do(chromedp.WaitVisible(chromedp.CSS("dialog#confirm")))
	require.Contains(t, b.text("dialog#confirm"), "same arguments")
	b.do(chromedp.Click(chromedp.CSS(`dialog#confirm button[value="ok"]`)))
	b.waitFor(`document.querySelector('#flash .alert.ok') !== null`, "the notice of the re-run")
	notice := b.text("#flash")
	require.Contains(t, notice, "a re-run of "+failed)
	rerun := regexp.MustCompile(`Started execution (\S+), a re-run`).FindStringSubmatch(notice)
	require.Len(t, rerun, 2, notice)

	b.do(chromedp.Navigate(base + jobPage + "/executions/" + rerun[1]))
	b.do(chromedp.WaitVisible(chromedp.CSS(`a[href$="/executions/` + failed + `"]`)))
	require.Contains(t, strings.ToLower(b.text("main")), "re-run of\n"+failed, "the re-run names the run it repeats")
	b.shot(shots, "execution-rerun")

	// Run with arguments, from the job page's head: a bad object is refused with the REST
	// API's message, a good one starts a run that has them.
	b.do(chromedp.Navigate(base + jobPage))
	b.waitFor(`document.querySelector('#executions .e-running, #executions .e-submitted') === null`, "the re-run ended")
	b.do(chromedp.Click(chromedp.CSS(`#run-new summary`)))
	b.do(chromedp.SendKeys(chromedp.CSS(`#run-args`), `{"day": ["2026-11-30"]}`))
	b.do(chromedp.Click(chromedp.CSS(`#run-new form button[type="submit"]`)))
	b.do(chromedp.Click(chromedp.CSS(`dialog#confirm button[value="ok"]`)))
	b.waitFor(`document.querySelector('#flash .alert.error') !== null`, "the refusal")
	require.Contains(t, b.text("#flash"), "a JSON object of strings, numbers and booleans")
	b.do(chromedp.SetValue(`#run-args`, `{"day": "2026-11-30", "dry_run": true}`))
	b.shot(shots, "job-run-args")
	b.do(chromedp.Click(chromedp.CSS(`#run-new form button[type="submit"]`)))
	b.do(chromedp.Click(chromedp.CSS(`dialog#confirm button[value="ok"]`)))
	b.waitFor(`document.querySelector('#flash .alert.ok') !== null`, "the notice of the run")
	require.Contains(t, b.text("#flash"), `with arguments {"day": "2026-11-30", "dry_run": true}`)
	b.waitFor(`document.querySelector('#executions .e-running, #executions .e-submitted') === null`, "the run ended")
	// Durations as people say them ("850 ms", "1.2 s", "11 s", "2 min 5 s"), never "11.000 s".
	durations := regexp.MustCompile(`^(\d+ ms|\d+(\.\d)? s|\d+ (min|h|d)( \d+ (s|min|h))?)$`)
	require.Regexp(t, durations, b.text(`#executions tbody tr td[data-label="Duration"]`))

	// Three days of 09:00 in Sofia (07:00 UTC in winter): three runs, one at a time, from
	// the Backfill button at the top of the page.
	b.do(chromedp.Click(chromedp.CSS(`#backfill-new summary`)))
	b.do(chromedp.SetValue(`#bf-from`, "2026-11-20T00:00"))
	b.do(chromedp.SetValue(`#bf-to`, "2026-11-22T23:59"))
	top := b.eval(`document.querySelector('#backfill-new form').getBoundingClientRect().bottom`)
	require.Less(t, top, 900.0, "the form is in the first screen, not 4,500 px down")
	b.shot(shots, "job-backfill-form")
	b.do(chromedp.Click(chromedp.CSS(`#backfill-new form button[type="submit"]`)))
	b.do(chromedp.WaitVisible(chromedp.CSS("dialog#confirm")))
	b.do(chromedp.Click(chromedp.CSS(`dialog#confirm button[value="ok"]`)))
	b.waitFor(`document.querySelector('#flash').innerText.includes('Started backfill')`, "the notice of the backfill")
	require.Contains(t, b.text("#flash"), "3 runs, at most 1 at once")
	b.waitFor(`document.querySelector('#backfills') && document.querySelector('#backfills').innerText.includes('3 succeeded')`,
		"kwok ends each run in turn, the panel follows")
	row := b.text("#backfills tbody tr")
	require.Contains(t, row, "finished")
	require.Contains(t, row, "of 3")
	require.Contains(t, row, "alice")
	// Its runs say they are the backfill's, with their logical times.
	b.waitFor(`document.querySelectorAll('#executions .k-backfill').length === 3`, "the backfill's three runs listed as such")
	runs := b.text("#executions tbody")
	for _, day := range []string{"2026-11-20T07:00:00Z", "2026-11-21T07:00:00Z", "2026-11-22T07:00:00Z"} {
		require.Contains(t, runs, day)
	}
	b.shot(shots, "job-backfill")
}
