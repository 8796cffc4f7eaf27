package ui

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/datajobs/datajobs/internal/job"
	pl "github.com/datajobs/datajobs/internal/pipeline"
	"github.com/datajobs/datajobs/internal/service"
)

// The pipeline pages (issue 40, docs/pipelines.md): a team's pipelines, a pipeline's
// graph and runs, and a run's graph, Gantt and nodes with their executions; its actions
// (start, cancel, repair) go through the same service calls as the REST API's.

// PipelineService is what the pipeline pages read and do. The console's Service serves
// them when it implements this too (*service.Service does); otherwise they answer that
// pipelines are not available.
type PipelineService interface {
	ListPipelines(ctx context.Context, team string, page, size int) (pl.Page[service.PipelineView], error)
	GetPipeline(ctx context.Context, team, name string) (service.PipelineView, error)
	StartPipelineRun(ctx context.Context, team, name string, req service.RunRequest, caller string) (int64, error)
	ListPipelineRuns(ctx context.Context, team, name string, page, size int) (pl.Page[pl.Run], error)
	GetPipelineRun(ctx context.Context, team, name string, id int64) (pl.Run, error)
	CancelPipelineRun(ctx context.Context, team, name string, id int64) (pl.Run, error)
	RepairPipelineRun(ctx context.Context, team, name string, id int64) ([]string, error)
}

// pipelinePageSize is the rows of the pipelines and runs lists per page.
const pipelinePageSize = 25

// registerPipelines adds the pipeline pages' routes; the webhook is asked about their
// REST twins.
func (c *Console) registerPipelines() {
	const p = Prefix + "teams/{team}/pipelines"
	const rest = "/data-jobs/for-team/{team}/pipelines"
	for _, r := range []struct {
		pattern string
		rule    rule
		h       handlerFunc
	}{
		{"GET " + p, rule{team: true, rest: "GET " + rest}, c.pipelinesPage},
		{"GET " + p + "/{pipeline}", rule{team: true, rest: "GET " + rest + "/{pipeline}"}, c.pipelinePage},
		{"POST " + p + "/{pipeline}/run", rule{team: true, rest: "POST " + rest + "/{pipeline}/runs"}, c.startPipelineRun},
		{"GET " + p + "/{pipeline}/runs/{run_id}", rule{team: true, rest: "GET " + rest + "/{pipeline}/runs/{run_id}"}, c.pipelineRunPage},
		{"POST " + p + "/{pipeline}/runs/{run_id}/cancel", rule{team: true, rest: "DELETE " + rest + "/{pipeline}/runs/{run_id}"}, c.cancelPipelineRun},
		{"POST " + p + "/{pipeline}/runs/{run_id}/repair", rule{team: true, rest: "POST " + rest + "/{pipeline}/runs/{run_id}/repair"}, c.repairPipelineRun},
	} {
		c.mux.Handle(r.pattern, c.guard(r.rule, r.h))
		c.routes[r.pattern] = r.rule
	}
}

func pipelinesURL(team string) string { return Prefix + "teams/" + url.PathEscape(team) + "/pipelines" }

func pipelineURL(team, name string) string { return pipelinesURL(team) + "/" + url.PathEscape(name) }

func pipelineRunURL(team, name string, id int64) string {
	return pipelineURL(team, name) + "/runs/" + strconv.FormatInt(id, 10)
}

func executionURL(team, jobName, id string) string {
	return jobURL(team, jobName) + "/executions/" + url.PathEscape(id)
}

// pipelines is the service's pipeline side, or the error a page shows without one.
func (c *Console) pipelines() (PipelineService, error) {
	if ps, ok := c.svc.(PipelineService); ok {
		return ps, nil
	}
	return nil, job.NewError(job.KindNotImplemented,
		"Pipelines are not available.",
		"This console is not connected to a service with pipelines.",
		"Nothing was shown or changed.",
		"Use the REST API (docs/pipelines.md).",
	)
}

// pageNumber reads ?page= (from 1).
func pageNumber(r *http.Request) int {
	n, err := strconv.Atoi(r.URL.Query().Get("page"))
	if err != nil || n < 1 {
		return 1
	}
	return n
}

// runID reads the {run_id} of a run's path.
func runID(r *http.Request) (int64, error) {
	id, err := strconv.ParseInt(r.PathValue("run_id"), 10, 64)
	if err != nil || id < 1 {
		return 0, job.Invalid("run_id", "a run's number", strconv.Quote(r.PathValue("run_id")))
	}
	return id, nil
}

// pipelinesPage is GET /ui/teams/{team}/pipelines.
func (c *Console) pipelinesPage(w http.ResponseWriter, r *http.Request, s session) error {
	ps, err := c.pipelines()
	if err != nil {
		return err
	}
	team, n := r.PathValue("team"), pageNumber(r)
	list, err := ps.ListPipelines(r.Context(), team, n, pipelinePageSize)
	if err != nil {
		return err
	}
	d := pipelinesData{Team: team, Pager: c.pager(pipelinesURL(team), n, list.TotalItems)}
	for _, p := range list.Items {
		d.Pipelines = append(d.Pipelines, c.pipelineRow(p))
	}
	c.renderPage(w, r, http.StatusOK, "pipelines", page{Title: "Pipelines of " + team, Session: s, Nav: "pipelines", Body: d})
	return nil
}

// pipelinePage is GET /ui/teams/{team}/pipelines/{pipeline}: its graph coloured by its
// latest run, its facts and its runs.
func (c *Console) pipelinePage(w http.ResponseWriter, r *http.Request, s session) error {
	ps, err := c.pipelines()
	if err != nil {
		return err
	}
	team, name, n := r.PathValue("team"), r.PathValue("pipeline"), pageNumber(r)
	p, err := ps.GetPipeline(r.Context(), team, name)
	if err != nil {
		return err
	}
	runs, err := ps.ListPipelineRuns(r.Context(), team, name, n, pipelinePageSize)
	if err != nil {
		return err
	}
	var latest *pl.Run
	if p.LastRun != nil {
		run, err := ps.GetPipelineRun(r.Context(), team, name, p.LastRun.ID)
		if err != nil && job.KindOf(err) != job.KindNotFound {
			return err
		}
		if err == nil {
			latest = &run
		}
	}
	d := pipelineData{
		pipelineRow: c.pipelineRow(p), CSRF: s.CSRF, Spec: p.Spec,
		Graph: graphSVG(graphNodes(team, p.Spec, latest)), Pager: c.pager(pipelineURL(team, name), n, runs.TotalItems),
		Triggers: c.triggers(r, team, name, true),
	}
	for _, run := range runs.Items {
		d.Runs = append(d.Runs, c.runRow(team, name, run))
	}
	c.renderPage(w, r, http.StatusOK, "pipeline", page{Title: name, Session: s, Nav: "pipelines", Body: d})
	return nil
}

// runPath is the run a request's path names ({team}, {pipeline}, {run_id}), with the service.
type runPath struct {
	ps         PipelineService
	team, name string
	id         int64
}

func (c *Console) runPath(r *http.Request) (runPath, error) {
	ps, err := c.pipelines()
	if err != nil {
		return runPath{}, err
	}
	id, err := runID(r)
	return runPath{ps: ps, team: r.PathValue("team"), name: r.PathValue("pipeline"), id: id}, err
}

// pipelineRunPage is GET /ui/teams/{team}/pipelines/{pipeline}/runs/{run_id}.
func (c *Console) pipelineRunPage(w http.ResponseWriter, r *http.Request, s session) error {
	rp, err := c.runPath(r)
	if err != nil {
		return err
	}
	ps, team, name, id := rp.ps, rp.team, rp.name, rp.id
	run, err := ps.GetPipelineRun(r.Context(), team, name, id)
	if err != nil {
		return err
	}
	// The run's graph is the pipeline's as it is now: a node the pipeline no longer has is
	// drawn without its edges.
	var spec pl.Spec
	if p, err := ps.GetPipeline(r.Context(), team, name); err == nil {
		spec = p.Spec
	} else if job.KindOf(err) != job.KindNotFound {
		return err
	}
	d := c.runData(team, name, spec, run)
	d.CSRF = s.CSRF
	c.renderPage(w, r, http.StatusOK, "pipelinerun", page{Title: "Run " + strconv.FormatInt(id, 10) + " of " + name, Session: s, Nav: "pipelines", Body: d})
	return nil
}

// startPipelineRun is POST …/pipelines/{pipeline}/run: a run now, without arguments.
func (c *Console) startPipelineRun(w http.ResponseWriter, r *http.Request, s session) error {
	ps, err := c.pipelines()
	if err != nil {
		return err
	}
	team, name := r.PathValue("team"), r.PathValue("pipeline")
	id, err := ps.StartPipelineRun(r.Context(), team, name, service.RunRequest{}, s.User)
	if err != nil {
		return err
	}
	return goTo(w, r, pipelineRunURL(team, name, id))
}

// cancelPipelineRun is POST …/runs/{run_id}/cancel.
func (c *Console) cancelPipelineRun(w http.ResponseWriter, r *http.Request, _ session) error {
	return c.runAction(w, r, func(ps PipelineService, team, name string, id int64) (string, error) {
		_, err := ps.CancelPipelineRun(r.Context(), team, name, id)
		return "Asked to cancel run " + strconv.FormatInt(id, 10) + ": its pending nodes will not start, its running executions are cancelled.", err
	})
}

// repairPipelineRun is POST …/runs/{run_id}/repair.
func (c *Console) repairPipelineRun(w http.ResponseWriter, r *http.Request, _ session) error {
	return c.runAction(w, r, func(ps PipelineService, team, name string, id int64) (string, error) {
		nodes, err := ps.RepairPipelineRun(r.Context(), team, name, id)
		return "Repairing run " + strconv.FormatInt(id, 10) + ": " + strings.Join(nodes, ", ") + " start again.", err
	})
}

// runAction does act on the run of the request's path and answers with its message: a
// notice and a refresh of the run's live part for htmx, the run page for a plain form.
func (c *Console) runAction(w http.ResponseWriter, r *http.Request, act func(ps PipelineService, team, name string, id int64) (string, error)) error {
	rp, err := c.runPath(r)
	if err != nil {
		return err
	}
	team, name, id := rp.team, rp.name, rp.id
	msg, err := act(rp.ps, team, name, id)
	if err != nil {
		return err
	}
	if !isFragment(r) {
		http.Redirect(w, r, pipelineRunURL(team, name, id), http.StatusSeeOther)
		return nil
	}
	w.Header().Set("HX-Trigger", "dj-refresh")
	c.render(w, r, http.StatusOK, "notice", msg)
	return nil
}

// goTo sends the browser to href: a redirect, or htmx's for a fragment request.
func goTo(w http.ResponseWriter, r *http.Request, href string) error {
	if isFragment(r) {
		w.Header().Set("HX-Redirect", href)
		return nil
	}
	http.Redirect(w, r, href, http.StatusSeeOther)
	return nil
}

// graphNodes are the spec's nodes for the graph, with the states of run (nil: none).
func graphNodes(team string, spec pl.Spec, run *pl.Run) []graphNode {
	states := map[string]pl.NodeRun{}
	if run != nil {
		for _, n := range run.Nodes {
			states[n.Name] = n
		}
	}
	out := make([]graphNode, 0, len(spec.Nodes))
	for _, n := range spec.Nodes {
		g := graphNode{Name: n.Name, DependsOn: n.DependsOn, Label: jobLabel(team, n.Team, n.JobName)}
		if nr, ok := states[n.Name]; ok {
			g.Status = string(nr.Status)
			if nr.ExecutionID != nil {
				g.Href = executionURL(nr.Team, nr.JobName, *nr.ExecutionID)
			}
		}
		out = append(out, g)
	}
	return out
}

// jobLabel names a node's job: its name, with its team when it is another team's.
func jobLabel(pipelineTeam, team, name string) string {
	if team == "" || team == pipelineTeam {
		return name
	}
	return team + "/" + name
}
