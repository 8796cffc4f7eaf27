package httpapi

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/datajobs/datajobs/internal/job"
	pl "github.com/datajobs/datajobs/internal/pipeline"
	"github.com/datajobs/datajobs/internal/service"
)

// Pipelines (issue 40; docs/pipelines.md), a datajobs extension VDK clients do not know:
// dependencies between data jobs, stepped by the leader.

// pipelineRoutes adds the pipeline and grant routes under the team path team and the job
// path jobPath.
func (a *api) pipelineRoutes(rt *router, team, jobPath string) {
	const pipelines = "/pipelines"
	const one = pipelines + "/{pipeline}"
	const run = one + "/runs/{run_id}"
	rt.handleFunc("PUT "+jobPath+"/grants/{grantee_team}", memberOfTeam, a.grantJob)
	rt.handleFunc("DELETE "+jobPath+"/grants/{grantee_team}", memberOfTeam, a.revokeGrant)
	rt.collection(team+pipelines, team+one, memberOfTeam,
		collection{list: a.listPipelines, get: a.getPipeline, put: a.putPipeline, del: a.deletePipeline})
	rt.collection(team+one+"/runs", team+run, memberOfTeam,
		collection{list: a.listPipelineRuns, create: a.startPipelineRun, get: a.getPipelineRun, del: a.cancelPipelineRun})
	rt.handleFunc("POST "+team+run+"/repair", memberOfTeam, a.repairPipelineRun)
	rt.handleFunc("POST "+team+one+"/backfills", memberOfTeam, a.createPipelineBackfill)
}

// pipelineResponse is a pipeline: the PUT body with the defaults applied, and what the
// service knows of it.
type pipelineResponse struct {
	Team         string         `json:"team"`
	PipelineName string         `json:"pipeline_name"`
	Description  string         `json:"description"`
	Schedule     *pl.Schedule   `json:"schedule"`
	Enabled      bool           `json:"enabled"`
	MaxActive    int            `json:"max_active_runs"`
	Contacts     pl.Contacts    `json:"contacts"`
	Nodes        []pl.Node      `json:"nodes"`
	Revision     int            `json:"revision"`
	LastRun      *pl.RunSummary `json:"last_run"`
	NextRunTime  *time.Time     `json:"next_run_time"`
}

func toPipelineResponse(v service.PipelineView) pipelineResponse {
	s := v.Spec
	return pipelineResponse{
		Team: v.Team, PipelineName: v.Name, Description: s.Description, Schedule: s.Schedule, Enabled: s.Enabled,
		MaxActive: s.MaxActiveRuns, Contacts: s.Contacts, Nodes: s.Nodes, Revision: v.Revision, LastRun: v.LastRun,
		NextRunTime: v.NextRunTime,
	}
}

// pageBody is a page of a list: its items and where it stands among them.
type pageBody[T any] struct {
	Content    []T `json:"content"`
	PageNumber int `json:"page_number"`
	PageSize   int `json:"page_size"`
	TotalItems int `json:"total_items"`
	TotalPages int `json:"total_pages"`
}

// pageOf reads ?page_number= and ?page_size= (absent: the service's defaults).
func pageOf(r *http.Request) (page, size int, err error) {
	q := r.URL.Query()
	if err := queryInt(q, "page_number", &page); err != nil {
		return 0, 0, err
	}
	if err := queryInt(q, "page_size", &size); err != nil {
		return 0, 0, err
	}
	return service.Paging(page, size)
}

func newPage[T any](items []T, page, size, total int) pageBody[T] {
	if items == nil {
		items = []T{}
	}
	return pageBody[T]{Content: items, PageNumber: page, PageSize: size, TotalItems: total, TotalPages: (total + size - 1) / size}
}

// replyPage answers 200 with p, the page of that number and size, each item as body
// makes it, or returns err as reply does: the tail of a handler that read a page.
func replyPage[T, B any](w http.ResponseWriter, page, size int, p pl.Page[T], err error, body func(T) B) error {
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, newPage(bodies(p.Items, body), page, size, p.TotalItems))
	return nil
}

func pipelineLocation(team, name string) string {
	return "/data-jobs/for-team/" + url.PathEscape(team) + "/pipelines/" + url.PathEscape(name)
}

// putPipeline is PUT …/pipelines/{pipeline}: 201 when created, 200 when replaced.
func (a *api) putPipeline(w http.ResponseWriter, r *http.Request) error {
	team, name := r.PathValue("team"), r.PathValue("pipeline")
	body, err := a.body(w, r)
	if err != nil {
		return err
	}
	created, v, err := a.svc.PutPipeline(r.Context(), team, name, body, a.user(r, ""), opID(r.Context()))
	if err != nil {
		return err
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
		w.Header().Set("Location", pipelineLocation(team, name))
	}
	writeJSON(w, status, toPipelineResponse(v))
	return nil
}

// getPipeline is GET …/pipelines/{pipeline}.
func (a *api) getPipeline(w http.ResponseWriter, r *http.Request) error {
	v, err := a.svc.GetPipeline(r.Context(), r.PathValue("team"), r.PathValue("pipeline"))
	return reply(w, http.StatusOK, v, err, toPipelineResponse)
}

// listPipelines is GET …/pipelines?page_number=&page_size=: the team's pipelines by name.
func (a *api) listPipelines(w http.ResponseWriter, r *http.Request) error {
	page, size, err := pageOf(r)
	if err != nil {
		return err
	}
	ps, err := a.svc.ListPipelines(r.Context(), r.PathValue("team"), page, size)
	return replyPage(w, page, size, ps, err, toPipelineResponse)
}

// deletePipeline is DELETE …/pipelines/{pipeline}: 200; its running runs are cancelled.
func (a *api) deletePipeline(w http.ResponseWriter, r *http.Request) error {
	err := a.svc.DeletePipeline(r.Context(), r.PathValue("team"), r.PathValue("pipeline"))
	return replyStatus(w, http.StatusOK, err)
}

// grantJob is PUT …/jobs/{job}/grants/{grantee_team}: 200.
func (a *api) grantJob(w http.ResponseWriter, r *http.Request) error {
	team, name := jobOf(r)
	err := a.svc.GrantJob(r.Context(), team, name, r.PathValue("grantee_team"), a.user(r, ""))
	return replyStatus(w, http.StatusOK, err)
}

// revokeGrant is DELETE …/jobs/{job}/grants/{grantee_team}: 200.
func (a *api) revokeGrant(w http.ResponseWriter, r *http.Request) error {
	team, name := jobOf(r)
	return replyStatus(w, http.StatusOK, a.svc.RevokeGrant(r.Context(), team, name, r.PathValue("grantee_team")))
}

// runRequest is the body of POST …/runs.
type runRequest struct {
	Arguments   json.RawMessage `json:"arguments"`
	LogicalTime string          `json:"logical_time"`
}

// startPipelineRun is POST …/pipelines/{pipeline}/runs: 202 with the run's id and
// Location; 409 while max_active_runs runs are running.
func (a *api) startPipelineRun(w http.ResponseWriter, r *http.Request) error {
	team, name := r.PathValue("team"), r.PathValue("pipeline")
	req, err := decodeBody[runRequest](a, w, r)
	if err != nil {
		return err
	}
	id, err := a.svc.StartPipelineRun(r.Context(), team, name, service.RunRequest{Arguments: req.Arguments, LogicalTime: req.LogicalTime}, a.user(r, ""))
	if err != nil {
		return err
	}
	w.Header().Set("Location", pipelineLocation(team, name)+"/runs/"+strconv.FormatInt(id, 10))
	writeJSON(w, http.StatusAccepted, struct {
		ID int64 `json:"id"`
	}{id})
	return nil
}

// listPipelineRuns is GET …/runs?page_number=&page_size=: newest first, without nodes.
func (a *api) listPipelineRuns(w http.ResponseWriter, r *http.Request) error {
	page, size, err := pageOf(r)
	if err != nil {
		return err
	}
	runs, err := a.svc.ListPipelineRuns(r.Context(), r.PathValue("team"), r.PathValue("pipeline"), page, size)
	return replyPage(w, page, size, runs, err, asIs)
}

// runOf returns the run of the path; an id that is not a number is not found.
func runOf(r *http.Request) (team, name string, id int64, err error) {
	return itemOf(r, "pipeline", "run_id", func(_, name string, id int64) *job.Error { return pl.RunNotFound(name, id) })
}

// getPipelineRun is GET …/runs/{run_id}: the run with the latest attempt of each node.
func (a *api) getPipelineRun(w http.ResponseWriter, r *http.Request) error {
	return replyItem(w, r, runOf, a.svc.GetPipelineRun, asIs)
}

// cancelPipelineRun is DELETE …/runs/{run_id}: 200 with the run once the cancel is
// recorded; it ends cancelled once its running executions are.
func (a *api) cancelPipelineRun(w http.ResponseWriter, r *http.Request) error {
	return replyItem(w, r, runOf, a.svc.CancelPipelineRun, asIs)
}

// repairPipelineRun is POST …/runs/{run_id}/repair: 202 with the nodes started again.
func (a *api) repairPipelineRun(w http.ResponseWriter, r *http.Request) error {
	team, name, id, err := runOf(r)
	if err != nil {
		return err
	}
	nodes, err := a.svc.RepairPipelineRun(r.Context(), team, name, id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusAccepted, struct {
		ID    int64    `json:"id"`
		Nodes []string `json:"nodes"`
	}{id, nodes})
	return nil
}

// pipelineBackfillRequest is the body of POST …/pipelines/{pipeline}/backfills.
type pipelineBackfillRequest struct {
	From            string   `json:"from"`
	To              string   `json:"to"`
	MaxParallelRuns int      `json:"max_parallel_runs"`
	Nodes           []string `json:"nodes"`
}

// createPipelineBackfill is POST …/pipelines/{pipeline}/backfills: 202 with the backfill's
// id and its number of runs.
func (a *api) createPipelineBackfill(w http.ResponseWriter, r *http.Request) error {
	team, name := r.PathValue("team"), r.PathValue("pipeline")
	req, err := decodeBody[pipelineBackfillRequest](a, w, r)
	if err != nil {
		return err
	}
	id, runs, err := a.svc.CreatePipelineBackfill(r.Context(), team, name, service.PipelineBackfillRequest{
		From: req.From, To: req.To, MaxParallelRuns: req.MaxParallelRuns, Nodes: req.Nodes,
	}, a.user(r, ""))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusAccepted, struct {
		ID   int64 `json:"id"`
		Runs int   `json:"runs"`
	}{id, runs})
	return nil
}
