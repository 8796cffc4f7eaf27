package ui

import (
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/service"
)

// executionsPerPage is the number of executions the job page lists at once.
const executionsPerPage = 10

// logTailLines is how much of a log the execution page shows until "load all".
const logTailLines = 200

type jobData struct {
	Team, Name, Href string
	Triggers         *triggersPanel
	Job              job.Job
	Contacts         []contactRow
	Deployment       deploymentData
	Properties       string
	PropertiesErr    string
	Executions       executionsData
	Revisions        revisionsData
	Backfills        backfillsData
	// Chart is the SVG of the latest runs' durations and outcomes ("" without runs).
	Chart template.HTML
	// Policy, Notifications and Secrets are the panels of panels.go.
	Policy        policyData
	Notifications notificationsData
	Secrets       secretsData
	CSRF          string
}

type contactRow struct {
	Label  string
	Values []string
}

// diffRow is one setting of the deployment: what was asked for and what is live.
type diffRow struct {
	Label, Desired, Actual string
	Differs                bool
}

type deploymentData struct {
	Href, JobHref string
	// Deployed is false when the job has no deployment at all.
	Deployed  bool
	Deleting  bool
	Enabled   bool
	HasActual bool
	Status    string
	Message   string
	Rows      []diffRow
	Differs   int
	// DesiredGeneration is the job's; AppliedGeneration the one the CronJob was rendered from.
	DesiredGeneration, AppliedGeneration int64
	Plan                                 *Plan
	LastSync, LastApply                  *when
	// Profile is the execution profile the deployment selects; ProfileAdds what it adds
	// to the pods (profileFacts).
	Profile     string
	ProfileAdds []string
	CSRF        string
}

// Settled reports whether nothing is under way, so that the page polls less often.
func (d deploymentData) Settled() bool {
	return !d.Deployed || (d.Status == string(job.StatusSynced) && d.Differs == 0)
}

type executionRow struct {
	ID, Href, Type, Status, StartedBy, Message, Version string
	// StartedByHref is the trigger event that started the run ("" for none).
	StartedByHref string
	Start         *when
	Duration      string
	Running       bool
	// Args is a manual start's arguments, indented JSON ("" without any); ExitCode and
	// Reason say how a final run ended ("" when unknown).
	Args, ExitCode, Reason string
	// LogicalTime is the schedule time a catch-up or backfill run stands for; RerunOf the
	// execution a re-run repeats, RerunOfHref its page ("" for none).
	LogicalTime, RerunOf, RerunOfHref string
	// BackfillID is the backfill that started the run (0: none), which the lists show as
	// its kind instead of VDK's type manual.
	BackfillID int64
}

type executionsData struct {
	Href             string
	Rows             []executionRow
	Page, Pages      int
	Total            int
	PrevURL, NextURL string
	Running          bool
	// Logical is whether a run of the page has a logical time (a backfill's, a catch-up's):
	// only then has the table that column.
	Logical           bool
	Team, Name, CSRF  string
	CancelURLTemplate string
}

// jobPage is a job: its settings, deployment (desired next to actual), properties and
// executions.
func (c *Console) jobPage(w http.ResponseWriter, r *http.Request, s session) error {
	team, name := r.PathValue("team"), r.PathValue("job")
	ctx := r.Context()
	j, err := c.svc.GetJob(ctx, team, name)
	if err != nil {
		return err
	}
	dep, view, err := c.deploymentView(r, s, j)
	if err != nil {
		return err
	}
	execs, err := c.executions(r, s, 1)
	if err != nil {
		return err
	}
	revs, err := c.revisions(r, s, team, name)
	if err != nil {
		return err
	}
	all, err := c.svc.ListExecutions(ctx, team, name, nil)
	if err != nil {
		return err
	}
	d := jobData{
		Team: team, Name: name, Href: jobURL(team, name), Job: j, Deployment: dep, Executions: execs, CSRF: s.CSRF,
		Revisions: revs, Chart: runChart(all), Backfills: c.backfills(r, s, team, name), Triggers: c.triggers(r, team, name, false),
		Policy: c.policy(view, dep.Deployed), Notifications: c.notifications(r, team, name),
		Contacts: []contactRow{
			{"On user error", j.Contacts.NotifiedOnJobFailureUserError},
			{"On platform error", j.Contacts.NotifiedOnJobFailurePlatformError},
			{"On success", j.Contacts.NotifiedOnJobSuccess},
			{"On deploy", j.Contacts.NotifiedOnJobDeploy},
		},
	}
	if dep.Deployed && !dep.Deleting {
		props, err := c.svc.GetProperties(ctx, team, name)
		if err != nil {
			d.PropertiesErr = errorText(err)
		} else {
			d.Properties = prettyJSON(props)
		}
	}
	d.Secrets = c.secretNames(r, team, name) // the job's, kept across deployments
	c.renderPage(w, r, http.StatusOK, "job", page{Title: name, Session: s, Nav: "jobs", Body: d})
	return nil
}

// deploymentPart is the deployment panel, polled while the page is open.
func (c *Console) deploymentPart(w http.ResponseWriter, r *http.Request, s session) error {
	j, err := c.svc.GetJob(r.Context(), r.PathValue("team"), r.PathValue("job"))
	if err != nil {
		return err
	}
	d, err := c.deployment(r, s, j)
	if err != nil {
		return err
	}
	c.render(w, r, http.StatusOK, "deployment", d)
	return nil
}

func (c *Console) deployment(r *http.Request, s session, j job.Job) (deploymentData, error) {
	d, _, err := c.deploymentView(r, s, j)
	return d, err
}

// deploymentView is the deployment panel and the view it was made of (the zero view when
// the job has no deployment).
func (c *Console) deploymentView(r *http.Request, s session, j job.Job) (deploymentData, service.DeploymentView, error) {
	href := jobURL(j.Team, j.Name)
	d := deploymentData{Href: href + "/deployment", JobHref: href, CSRF: s.CSRF}
	v, err := c.svc.GetDeployment(r.Context(), j.Team, j.Name)
	if job.KindOf(err) == job.KindNotFound {
		return d, v, nil
	}
	if err != nil {
		return d, v, err
	}
	d.Deployed, d.Deleting = true, v.Status == job.StatusDeleting
	d.Enabled, d.Status, d.Message = v.Deployment.Enabled, string(v.Status), v.Message
	d.DesiredGeneration, d.AppliedGeneration = v.DesiredGeneration, v.AppliedGeneration
	d.Profile, d.ProfileAdds = v.Deployment.ProfileName(), profileFacts(v.Deployment.Profile)
	d.LastSync = c.when(v.LastSyncAt)
	if p, ok := c.cfg.Plans(j.Name); ok {
		d.Plan = &p
	}
	want := v.Deployment
	a := v.Actual
	d.HasActual = a != nil
	if a != nil {
		d.LastApply = c.when(&a.DeployedDate)
	}
	add := func(label, desired string, actual func(*job.ActualDeployment) string) {
		row := diffRow{Label: label, Desired: desired}
		if d.Deleting {
			row.Desired = ""
		}
		if a != nil {
			row.Actual = actual(a)
		}
		row.Differs = row.Desired != row.Actual
		if row.Differs {
			d.Differs++
		}
		d.Rows = append(d.Rows, row)
	}
	add("Job version", want.JobVersion, func(a *job.ActualDeployment) string { return a.JobVersion })
	add("Schedule", want.Schedule, func(a *job.ActualDeployment) string { return a.Schedule })
	add("Enabled", yesNo(want.Enabled), func(a *job.ActualDeployment) string { return yesNo(a.Enabled) })
	add("Python", want.PythonVersion, func(a *job.ActualDeployment) string { return a.PythonVersion })
	add("VDK version", want.VDKVersion, func(a *job.ActualDeployment) string { return a.VDKVersion })
	add("CPU request", cpu(want.Resources.CPURequestMillis), func(a *job.ActualDeployment) string { return cpu(a.Resources.CPURequestMillis) })
	add("CPU limit", cpu(want.Resources.CPULimitMillis), func(a *job.ActualDeployment) string { return cpu(a.Resources.CPULimitMillis) })
	add("Memory request", memory(want.Resources.MemoryRequestBytes), func(a *job.ActualDeployment) string { return memory(a.Resources.MemoryRequestBytes) })
	add("Memory limit", memory(want.Resources.MemoryLimitBytes), func(a *job.ActualDeployment) string { return memory(a.Resources.MemoryLimitBytes) })
	add("Generation", strconv.FormatInt(v.DesiredGeneration, 10), func(a *job.ActualDeployment) string { return strconv.FormatInt(a.Generation, 10) })
	return d, v, nil
}

// executionsPart is the executions panel (one page of it), polled while the page is open.
func (c *Console) executionsPart(w http.ResponseWriter, r *http.Request, s session) error {
	d, err := c.executions(r, s, pageNumber(r))
	if err != nil {
		return err
	}
	c.render(w, r, http.StatusOK, "executions", d)
	return nil
}

func (c *Console) executions(r *http.Request, s session, n int) (executionsData, error) {
	team, name := r.PathValue("team"), r.PathValue("job")
	all, err := c.svc.ListExecutions(r.Context(), team, name, nil)
	if err != nil {
		return executionsData{}, err
	}
	href := jobURL(team, name) + "/executions"
	d := executionsData{Href: href, Total: len(all), Pages: max(1, (len(all)+executionsPerPage-1)/executionsPerPage), Team: team, Name: name, CSRF: s.CSRF}
	d.Page = min(n, d.Pages)
	if d.Page > 1 {
		d.PrevURL = href + "?page=" + strconv.Itoa(d.Page-1)
	}
	if d.Page < d.Pages {
		d.NextURL = href + "?page=" + strconv.Itoa(d.Page+1)
	}
	d.Running = slices.ContainsFunc(all, func(e job.Execution) bool { return !finished(e.Status) })
	from := (d.Page - 1) * executionsPerPage
	for _, e := range all[from:min(from+executionsPerPage, len(all))] {
		row := c.executionRow(team, name, e)
		d.Logical = d.Logical || row.LogicalTime != ""
		d.Rows = append(d.Rows, row)
	}
	if d.Page > 1 {
		d.Href += "?page=" + strconv.Itoa(d.Page)
	}
	return d, nil
}

func (c *Console) executionRow(team, name string, e job.Execution) executionRow {
	row := executionRow{
		ID: e.ID, Href: jobURL(team, name) + "/executions/" + url.PathEscape(e.ID), Type: e.Type, Status: e.Status,
		StartedBy: e.StartedBy, Message: e.Message, Version: e.JobVersion, Start: c.when(e.StartTime), Running: !finished(e.Status),
		Reason: e.TerminationReason, RerunOf: e.RerunOf, RerunOfHref: rerunOf(team, name, e.RerunOf), BackfillID: e.BackfillID,
		StartedByHref: triggerEventHref(jobURL(team, name), team, e.StartedBy),
	}
	if e.LogicalTime != nil {
		row.LogicalTime = e.LogicalTime.UTC().Format(time.RFC3339)
	}
	if len(e.Args) > 0 {
		row.Args = prettyJSON(e.Args)
	}
	if e.ExitCode != nil {
		row.ExitCode = strconv.Itoa(int(*e.ExitCode))
	}
	if e.StartTime != nil {
		end := c.cfg.Now()
		if e.EndTime != nil {
			end = *e.EndTime
		}
		if !end.Before(*e.StartTime) {
			row.Duration = duration(end.Sub(*e.StartTime))
		}
	}
	return row
}

// finished reports whether an execution's status is final.
func finished(status string) bool {
	return status != "submitted" && status != "running"
}

type executionData struct {
	Team, Name, JobHref string
	Execution           executionRow
	End                 *when
	Logs                logsData
	CSRF                string
}

type logsData struct {
	Href    string
	Status  string
	Text    string
	All     bool
	AllURL  string
	Running bool
	// Poll is whether the panel polls: only the tail of a running execution's log, so an
	// open tab reads logTailLines lines a second, never the whole log.
	Poll bool
	Err  string
	// Error is Text split around the line that says why a failed run failed (logerror.go);
	// a run that did not fail has it all in Error.Before.
	Error logError
}

// executionPage is one execution and its logs.
func (c *Console) executionPage(w http.ResponseWriter, r *http.Request, s session) error {
	team, name, id := r.PathValue("team"), r.PathValue("job"), r.PathValue("id")
	e, err := c.svc.GetExecution(r.Context(), team, name, id)
	if err != nil {
		return err
	}
	d := executionData{
		Team: team, Name: name, JobHref: jobURL(team, name), Execution: c.executionRow(team, name, e),
		End: c.when(e.EndTime), Logs: c.logs(r, s, e, r.URL.Query().Get("all") == "1"), CSRF: s.CSRF,
	}
	c.renderPage(w, r, http.StatusOK, "execution", page{Title: id, Session: s, Nav: "jobs", Body: d})
	return nil
}

// logsPart is the log of an execution, polled while it runs.
func (c *Console) logsPart(w http.ResponseWriter, r *http.Request, s session) error {
	e, err := c.svc.GetExecution(r.Context(), r.PathValue("team"), r.PathValue("job"), r.PathValue("id"))
	if err != nil {
		return err
	}
	c.render(w, r, http.StatusOK, "logs", c.logs(r, s, e, r.URL.Query().Get("all") == "1"))
	return nil
}

// logs reads an execution's log in one of the log-read slots the REST API uses too, so
// the console is no way around their bound.
func (c *Console) logs(r *http.Request, s session, e job.Execution, all bool) logsData {
	team, name := r.PathValue("team"), r.PathValue("job")
	base := jobURL(team, name) + "/executions/" + url.PathEscape(e.ID)
	d := logsData{Href: base + "/logs", All: all, AllURL: base + "?all=1", Status: e.Status, Running: !finished(e.Status)}
	d.Poll = d.Running && !all
	tail := logTailLines
	if all {
		tail = 0
	}
	if c.cfg.LogReads != nil {
		release, err := c.cfg.LogReads.Acquire(r.Context(), "user:"+s.User)
		if err != nil {
			d.Err = errorText(err)
			return d
		}
		defer release()
	}
	text, err := c.svc.ExecutionLogs(r.Context(), team, name, e.ID, tail)
	if err != nil {
		d.Err = errorText(err)
	}
	d.Text, d.Error = text, logError{Before: text}
	if failed(e.Status) {
		d.Error = findError(text)
	}
	return d
}

// failed reports whether an execution's status is a failure.
func failed(status string) bool {
	return status == string(job.ExecUserError) || status == string(job.ExecPlatformError)
}

// errorText is a domain error's what and why, as the REST API's body says them.
func errorText(err error) string {
	var de *job.Error
	if errors.As(err, &de) {
		return de.What + " " + de.Why
	}
	return "The data could not be read."
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func cpu(millis int64) string {
	switch {
	case millis == 0:
		return ""
	case millis%1000 == 0:
		return strconv.FormatInt(millis/1000, 10)
	default:
		return strconv.FormatInt(millis, 10) + "m"
	}
}

func memory(b int64) string {
	switch {
	case b == 0:
		return ""
	case b%(1<<30) == 0:
		return fmt.Sprintf("%d Gi", b>>30)
	case b%(1<<20) == 0:
		return fmt.Sprintf("%d Mi", b>>20)
	default:
		return strconv.FormatInt(b, 10)
	}
}
