package ui

import (
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/datajobs/datajobs/internal/auth"
	"github.com/datajobs/datajobs/internal/job"
)

// listQuery is what the jobs list shows, from its URL: every filter, the sort and the
// page are parameters, so a view can be bookmarked and shared.
type listQuery struct {
	// Search matches job names: with *, a glob over the whole name (as the GraphQL
	// jobName filter); without, the text anywhere in the name.
	Search string
	// Team is one team, or all of the caller's when empty.
	Team string
	// Status is a deployment's sync status (job.SyncStatuses).
	Status string
	// Deployment is enabled, disabled or not_deployed.
	Deployment string
	// LastStatus is the status of the last execution.
	LastStatus string
	// Sort is a key of sortFields; Desc reverses it.
	Sort string
	Desc bool
	Page int
}

// sortFields are the orders the list offers, by URL key.
var sortFields = map[string]job.ListField{
	"name": job.FieldName, "team": job.FieldTeam, "next_run": job.FieldDeploymentNextRun,
	"last_run": job.FieldLastExecutionTime, "last_status": job.FieldLastExecutionStatus, "enabled": job.FieldDeploymentEnabled,
	"status": job.FieldSyncStatus,
}

var deploymentFilters = []string{string(job.DeploymentEnabled), string(job.DeploymentDisabled), string(job.NotDeployed)}

func parseListQuery(v url.Values) listQuery {
	q := listQuery{
		Search: strings.TrimSpace(v.Get("q")), Team: strings.ToLower(strings.TrimSpace(v.Get("team"))), Status: v.Get("status"),
		Deployment: v.Get("deployment"), LastStatus: v.Get("last"), Sort: v.Get("sort"), Desc: v.Get("dir") == "desc",
	}
	if !slices.Contains(deploymentFilters, q.Deployment) {
		q.Deployment = ""
	}
	if !slices.Contains(job.SyncStatuses(), q.Status) {
		q.Status = ""
	}
	if !slices.Contains(job.ExecutionStatuses(), q.LastStatus) {
		q.LastStatus = ""
	}
	if _, ok := sortFields[q.Sort]; !ok {
		q.Sort = "name"
	}
	q.Page, _ = strconv.Atoi(v.Get("page"))
	q.Page = min(max(q.Page, 1), 100_000)
	return q
}

// values is the URL query of q, page and sort overridable, for links.
func (q listQuery) values() url.Values {
	v := url.Values{}
	set := func(k, s string) {
		if s != "" {
			v.Set(k, s)
		}
	}
	set("q", q.Search)
	set("team", q.Team)
	set("status", q.Status)
	set("deployment", q.Deployment)
	set("last", q.LastStatus)
	if q.Sort != "name" {
		v.Set("sort", q.Sort)
	}
	if q.Desc {
		v.Set("dir", "desc")
	}
	if q.Page > 1 {
		v.Set("page", strconv.Itoa(q.Page))
	}
	return v
}

// URL is the list's address for q.
func (q listQuery) URL() string {
	if e := q.values().Encode(); e != "" {
		return Prefix + "?" + e
	}
	return Prefix
}

// PageURL is the address of page n of the same view.
func (q listQuery) PageURL(n int) string { q.Page = n; return q.URL() }

// SortURL is the address of the view sorted by key: a second click reverses the order.
func (q listQuery) SortURL(key string) string {
	q.Desc = q.Sort == key && !q.Desc
	q.Sort, q.Page = key, 1
	return q.URL()
}

// SortState is the aria-sort of the column key.
func (q listQuery) SortState(key string) string {
	switch {
	case q.Sort != key:
		return "none"
	case q.Desc:
		return "descending"
	default:
		return "ascending"
	}
}

// glob is the name pattern of the search.
func (q listQuery) glob() string {
	if q.Search == "" || strings.Contains(q.Search, "*") {
		return q.Search
	}
	return "*" + q.Search + "*"
}

// jobRow is one line of the jobs list.
type jobRow struct {
	Name, Team, Href string
	Status           string // a job.SyncStatus, or "" when not deployed (job.Listed.Status)
	Deployed         bool
	Enabled          bool
	Version          string
	Schedule         string
	ScheduleWords    string
	// Next is the deployment's next run, in its run policy's time zone.
	Next       *zonedTime
	LastStatus string
	LastTime   *when
}

type listData struct {
	Query      listQuery
	Rows       []jobRow
	Total      int
	From, To   int
	Pages      int
	Teams      []string // the caller's teams, for the team filter; empty for admins
	Statuses   []string
	Sync       []string
	Deployment []string
	CSRF       string
}

// jobsList is the jobs list: a page, or (polled by htmx) its table.
func (c *Console) jobsList(w http.ResponseWriter, r *http.Request, s session) error {
	q := parseListQuery(r.URL.Query())
	data, err := c.listJobs(r, s, q)
	if err != nil {
		return err
	}
	if isFragment(r) {
		c.render(w, r, http.StatusOK, "jobtable", data)
		return nil
	}
	c.renderPage(w, r, http.StatusOK, "jobs", page{Title: "Jobs", Session: s, Nav: "jobs", Body: data})
	return nil
}

// listJobs reads a page of the jobs s may see: the teams auth.VisibleTeams leaves (the
// webhook asked about each, as GraphQL does; issue 41, M2: the list showed the jobs of
// teams the webhook denies).
func (c *Console) listJobs(r *http.Request, s session, q listQuery) (listData, error) {
	now := c.cfg.Now()
	visible, err := auth.VisibleTeams(r.Context(), s.identity(), c.cfg.Webhook, c.svc.Teams)
	if err != nil {
		return listData{}, err
	}
	filter := job.ListFilter{
		Visible: visible, NameGlob: q.glob(), TeamGlob: q.Team,
		Status: job.SyncStatus(q.Status), Deployment: job.DeploymentState(q.Deployment), LastExecutionStatus: q.LastStatus,
	}
	size := c.cfg.PageSize
	page, err := c.svc.ListJobs(r.Context(), job.ListRequest{
		Filter: filter, Sort: []job.SortKey{{Field: sortFields[q.Sort], Desc: q.Desc}},
		Offset: (q.Page - 1) * size, Limit: size, Count: true, WithDeployments: true, At: now,
	})
	if err != nil {
		return listData{}, err
	}
	d := listData{
		Query: q, Total: page.Total, Pages: max(1, (page.Total+size-1)/size),
		Statuses: job.ExecutionStatuses(), Sync: job.SyncStatuses(), Deployment: deploymentFilters, CSRF: s.CSRF,
	}
	if !visible.AllTeams && !s.Admin {
		d.Teams = visible.Teams
	}
	if len(page.Jobs) > 0 {
		d.From, d.To = (q.Page-1)*size+1, (q.Page-1)*size+len(page.Jobs)
	}
	for _, jr := range page.Jobs {
		d.Rows = append(d.Rows, c.row(jr, now))
	}
	return d, nil
}

func (c *Console) row(jr job.Listed, now time.Time) jobRow {
	j := jr.Job
	row := jobRow{
		Name: j.Name, Team: j.Team, Href: jobURL(j.Team, j.Name),
		LastStatus: jr.LastExecution.Status, LastTime: c.when(jr.LastExecution.EndTime),
	}
	row.Status = string(jr.Status)
	schedule, hashed, tz := j.Schedule, j.HashedSchedule, ""
	switch {
	case jr.Desired != nil:
		row.Deployed, row.Enabled, row.Version, schedule = true, jr.Desired.Enabled, jr.Desired.JobVersion, jr.Desired.Schedule
		hashed, tz = jr.Desired.HashedSchedule, jr.Desired.Policy.TimeZone
	case jr.Actual != nil: // being deleted: the run policy is gone with the desired row
		row.Deployed, row.Enabled, row.Version, schedule = true, jr.Actual.Enabled, jr.Actual.JobVersion, jr.Actual.Schedule
		hashed = ""
	}
	row.Schedule, row.ScheduleWords = schedule, describeSchedule(schedule, tz)
	if hashed != "" { // the words say the resolved schedule; the title both
		row.Schedule = hashed + " = " + schedule
	}
	// The same key as the list's sort by next run (store: zonedDeploymentSchedule).
	if next, ok := c.schedules.NextRun(job.ZonedSchedule(schedule, tz), now); ok && row.Deployed && row.Enabled {
		z := zoned(now, time.Unix(next, 0), tz)
		row.Next = &z
	}
	return row
}

func jobURL(team, name string) string {
	return Prefix + "teams/" + url.PathEscape(team) + "/jobs/" + url.PathEscape(name)
}
