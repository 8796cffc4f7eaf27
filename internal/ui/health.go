package ui

import (
	"net/http"
	"slices"

	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/service"
)

type countRow struct {
	Status string
	Count  int
	// Href lists the jobs of this status (the jobs list filtered).
	Href string
}

type healthJobRow struct {
	Name, Href, Status string
	At                 *when
}

type lateRow struct {
	Name, Href string
	Due        zonedTime
	Delay      string
}

type healthData struct {
	Team                        string
	Jobs                        int
	ByStatus                    []countRow
	Failing                     []healthJobRow
	FailingMore                 int
	Late                        []lateRow
	Scheduled, ScheduledChecked int
	Runs                        []countRow
	RunsTotal                   int
	Window                      string
}

// statusOrder is the order of the deployment statuses on the health page: what needs
// attention first.
var statusOrder = []string{"platform_error", "user_error", "pending", "building", "deleting", "synced", string(job.NotDeployed)}

// runOrder is the order of the run outcomes on the health page.
var runOrder = []string{"platform_error", "user_error", "skipped", "cancelled", "running", "submitted", "succeeded"}

// healthPage is a team's jobs at a glance: by deployment status, the failing ones, the late
// ones (a schedule time more than the job's delay ago with no run started since: computed
// from what is stored) and the runs of the last 24 hours by outcome.
func (c *Console) healthPage(w http.ResponseWriter, r *http.Request, s session) error {
	team := r.PathValue("team")
	h, err := c.svc.TeamHealth(r.Context(), team)
	if err != nil {
		return err
	}
	now := c.cfg.Now()
	d := healthData{
		Team: team, Jobs: h.Jobs, Scheduled: h.ScheduledTotal, ScheduledChecked: len(h.Scheduled),
		FailingMore: h.FailingTotal - len(h.Failing), Window: span(service.HealthWindow),
	}
	d.ByStatus = ordered(h.ByStatus, statusOrder, func(st string) string {
		q := listQuery{Team: team, Sort: "name"}
		if st == string(job.NotDeployed) {
			q.Deployment = st
		} else {
			q.Status = st
		}
		return q.URL()
	})
	d.Runs = ordered(h.Runs, runOrder, nil)
	for _, rc := range d.Runs {
		d.RunsTotal += rc.Count
	}
	for _, f := range h.Failing {
		d.Failing = append(d.Failing, healthJobRow{Name: f.Name, Href: jobURL(team, f.Name), Status: f.LastStatus, At: c.when(f.LastEnd)})
	}
	for _, l := range h.Late {
		d.Late = append(d.Late, lateRow{Name: l.Name, Href: jobURL(team, l.Name), Due: zoned(now, l.Due, l.TimeZone), Delay: span(l.Delay)})
	}
	c.renderPage(w, r, http.StatusOK, "health", page{Title: team + " · health", Session: s, Nav: "jobs", Body: d})
	return nil
}

// ordered is the non-zero counts of m in the order of keys, then any other key sorted.
func ordered(m map[string]int, keys []string, href func(string) string) []countRow {
	var out []countRow
	add := func(k string) {
		if n := m[k]; n > 0 {
			row := countRow{Status: k, Count: n}
			if href != nil {
				row.Href = href(k)
			}
			out = append(out, row)
		}
	}
	for _, k := range keys {
		add(k)
	}
	var rest []string
	for k := range m {
		if !slices.Contains(keys, k) {
			rest = append(rest, k)
		}
	}
	slices.Sort(rest)
	for _, k := range rest {
		add(k)
	}
	return out
}
