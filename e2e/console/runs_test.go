package console

import (
	"regexp"
	"strings"
	"testing"
	"time"

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

	// Three days of 09:00 in Sofia (07:00 UTC in winter): three runs, one at a time.
	b.do(chromedp.Navigate(base + jobPage))
	b.do(chromedp.WaitVisible(chromedp.CSS("#backfills")))
	b.do(chromedp.Click(chromedp.CSS(`#backfills summary`)))
	b.do(chromedp.SetValue(`#bf-from`, "2026-11-20T00:00"))
	b.do(chromedp.SetValue(`#bf-to`, "2026-11-22T23:59"))
	b.do(chromedp.Click(chromedp.CSS(`#backfills form button[type="submit"]`)))
	b.do(chromedp.WaitVisible(chromedp.CSS("dialog#confirm")))
	b.do(chromedp.Click(chromedp.CSS(`dialog#confirm button[value="ok"]`)))
	b.waitFor(`document.querySelector('#flash .alert.ok') !== null`, "the notice of the backfill")
	require.Contains(t, b.text("#flash"), "3 runs, at most 1 at once")
	require.Eventually(t, func() bool {
		b.do(chromedp.Reload()) // the panel is not polled
		b.do(chromedp.WaitVisible(chromedp.CSS("#backfills table.backfills")))
		return strings.Contains(b.text("#backfills"), "3 succeeded")
	}, 2*time.Minute, time.Second, "kwok ends each run in turn")
	row := b.text("#backfills tbody tr")
	require.Contains(t, row, "finished")
	require.Contains(t, row, "of 3")
	require.Contains(t, row, "alice")
	b.shot(shots, "job-backfill")
}
