package ui

import (
	"html/template"
	"strconv"
	"time"

	pl "github.com/datajobs/datajobs/internal/pipeline"
	"github.com/datajobs/datajobs/internal/service"
)

// What the pipeline templates show (page_pipelines.html, page_pipeline.html,
// page_pipelinerun.html).

// pipelinesData is a team's pipelines list.
type pipelinesData struct {
	Team      string
	Pipelines []pipelineRow
	Pager     pagerData
}

// pipelineRow is a pipeline in the list, and the head of its page.
type pipelineRow struct {
	Team, Name, Href, Description string
	Schedule, TimeZone            string
	Enabled                       bool
	Nodes, MaxActiveRuns          int
	Revision                      int
	LastRun                       *runRow
	NextRun                       *when
}

// pipelineData is a pipeline's page.
type pipelineData struct {
	pipelineRow
	CSRF  string
	Spec  pl.Spec
	Graph template.HTML
	Runs  []runRow
	Pager pagerData
	// Triggers are the triggers that start it (issue 42).
	Triggers *triggersPanel
}

// runRow is a run in a pipeline's runs.
type runRow struct {
	ID                    int64
	Href, Status          string
	LogicalTime           string
	StartedBy             string
	StartedByHref         string // the trigger event that started it ("" for none)
	Start, End            *when
	Duration              string
	Running, Repairable   bool
	PipelineName, Team    string
	PipelineHref, TeamURL string
}

// runData is a run's page.
type runData struct {
	runRow
	CSRF  string
	Graph template.HTML
	Gantt template.HTML
	Nodes []nodeRow
}

// nodeRow is a node of a run.
type nodeRow struct {
	Name, Job, JobHref, Status string
	Attempt                    int
	// ExecutionID and its page (with the log); empty until the node started.
	ExecutionID, ExecutionHref string
	Start, End                 *when
	Duration, Message          string
}

// pagerData links the pages of a list.
type pagerData struct {
	Page, Pages int
	Prev, Next  string
}

// pager is page n of a list of total rows at base.
func (c *Console) pager(base string, n, total int) pagerData {
	pages := max(1, (total+pipelinePageSize-1)/pipelinePageSize)
	p := pagerData{Page: n, Pages: pages}
	if n > 1 {
		p.Prev = base + "?page=" + strconv.Itoa(n-1)
	}
	if n < pages {
		p.Next = base + "?page=" + strconv.Itoa(n+1)
	}
	return p
}

func (c *Console) pipelineRow(p service.PipelineView) pipelineRow {
	row := pipelineRow{
		Team: p.Team, Name: p.Name, Href: pipelineURL(p.Team, p.Name), Description: p.Spec.Description,
		Enabled: p.Spec.Enabled, Nodes: len(p.Spec.Nodes), MaxActiveRuns: p.Spec.MaxActiveRuns, Revision: p.Revision,
		NextRun: c.when(p.NextRunTime),
	}
	if sc := p.Spec.Schedule; sc != nil {
		row.Schedule, row.TimeZone = sc.Cron, sc.TimeZone
	}
	if p.LastRun != nil {
		last := c.runRow(p.Team, p.Name, pl.Run{RunSummary: *p.LastRun})
		row.LastRun = &last
	}
	return row
}

func (c *Console) runRow(team, name string, r pl.Run) runRow {
	row := runRow{
		ID: r.ID, Href: pipelineRunURL(team, name, r.ID), Status: string(r.Status),
		LogicalTime: r.LogicalTime.UTC().Format(time.RFC3339), StartedBy: r.StartedBy,
		StartedByHref: triggerEventHref(pipelineURL(team, name), team, r.StartedBy),
		Start:         c.when(&r.StartTime), End: c.when(r.EndTime),
		Running: r.Status == pl.RunRunning, Repairable: r.Status == pl.RunFailed || r.Status == pl.RunCancelled,
		PipelineName: name, Team: team, PipelineHref: pipelineURL(team, name), TeamURL: pipelinesURL(team),
	}
	row.Duration = c.lasted(&r.StartTime, r.EndTime)
	return row
}

// lasted is how long from start to end (to now while it runs); "" before the start.
func (c *Console) lasted(start, end *time.Time) string {
	if start == nil || start.IsZero() {
		return ""
	}
	to := c.cfg.Now()
	if end != nil {
		to = *end
	}
	return span(max(to.Sub(*start), 0))
}

// runData is the run's page: the graph of spec coloured by the run's nodes, its Gantt
// and its nodes.
func (c *Console) runData(team, name string, spec pl.Spec, run pl.Run) runData {
	d := runData{runRow: c.runRow(team, name, run)}
	// The graph draws the run's nodes, with the pipeline's edges among them.
	deps := map[string][]string{}
	for _, n := range spec.Nodes {
		deps[n.Name] = n.DependsOn
	}
	graph := pl.Spec{}
	rows := make([]ganttRow, 0, len(run.Nodes))
	for _, n := range run.Nodes {
		if n.Name == "" {
			continue // a node of the run's spec that has no row yet
		}
		graph.Nodes = append(graph.Nodes, pl.Node{Name: n.Name, JobName: n.JobName, Team: n.Team, DependsOn: deps[n.Name]})
		row := nodeRow{
			Name: n.Name, Job: jobLabel(team, n.Team, n.JobName), JobHref: jobURL(n.Team, n.JobName), Status: string(n.Status),
			Attempt: n.Attempt, Start: c.when(n.StartTime), End: c.when(n.EndTime), Message: n.Message,
			Duration: c.lasted(n.StartTime, n.EndTime),
		}
		g := ganttRow{Name: n.Name, Status: string(n.Status), Start: n.StartTime, End: n.EndTime}
		if n.ExecutionID != nil {
			row.ExecutionID, row.ExecutionHref = *n.ExecutionID, executionURL(n.Team, n.JobName, *n.ExecutionID)
			g.Href = row.ExecutionHref
		}
		d.Nodes, rows = append(d.Nodes, row), append(rows, g)
	}
	d.Graph = graphSVG(graphNodes(team, graph, &run))
	d.Gantt = ganttSVG(rows, c.cfg.Now())
	return d
}
