package graphapi

import (
	"context"
	"encoding/json"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"

	"github.com/datajobs/datajobs/internal/graphapi/gql"
	"github.com/datajobs/datajobs/internal/job"
)

// resolver is the root of the schema's resolvers.
type resolver struct {
	h     *Handler
	store Reader
}

func (q *resolver) Query() gql.QueryResolver                         { return q }
func (q *resolver) DataJobDeployment() gql.DataJobDeploymentResolver { return deploymentResolver{} }

// Jobs is VDK's jobs query: one page of jobs, filtered, searched and sorted by the
// database, with the deployments joined in when the selection set shows them.
func (q *resolver) Jobs(ctx context.Context, pageNumber, pageSize *int32, preds []*gql.Predicate, search *string) (*gql.DataJobPage, error) {
	number, size, err := q.h.paging(pageNumber, pageSize, true)
	if err != nil {
		return nil, err
	}
	filter, sort, err := q.h.parsePredicates(preds)
	if err != nil {
		return nil, err
	}
	if filter.Visible, err = q.h.visibleTo(ctx); err != nil {
		return nil, err
	}
	sel := selectedFields(ctx)
	if s := strings.TrimSpace(deref(search)); s != "" {
		filter.Search = s
		filter.SearchFields = searchFields(sel, q.h.cfg.SourceURLTemplate != "")
	}
	if err := takeRows(ctx, size, "a page of jobs"); err != nil {
		return nil, err
	}
	l := q.h.newLoader(q.store)
	l.configNextRun = sel["content.config.schedule.nextRunEpochSeconds"]
	l.deploymentNextRun = sel["content.deployments.schedule.nextRunEpochSeconds"]
	page, err := q.store.ListJobs(ctx, job.ListRequest{
		Filter: filter, Sort: sort, Offset: (number - 1) * size, Limit: size,
		Count:           sel["totalItems"] || sel["totalPages"],
		WithDeployments: sel["content.deployments"],
		SourceURL:       job.Template(q.h.cfg.SourceURLTemplate),
		At:              l.now,
	})
	if err != nil {
		return nil, err
	}
	out := &gql.DataJobPage{Content: make([]*gql.DataJob, len(page.Jobs))}
	out.TotalItems, out.TotalPages = totals(page.Total, size)
	l.names = make([]string, len(page.Jobs))
	jobs := make([]gql.DataJob, len(page.Jobs)) // one allocation for the page
	for i := range page.Jobs {
		l.toDataJob(&jobs[i], &page.Jobs[i])
		out.Content[i] = &jobs[i]
		l.names[i] = page.Jobs[i].Job.Name
	}
	return out, nil
}

// searchFields are VDK's search targets that the selection set shows, so that a match is
// visible to the client; the job name when it shows none.
func searchFields(sel selection, sourceURL bool) []job.ListField {
	var out []job.ListField
	for _, c := range []struct {
		path  string
		field job.ListField
	}{
		{"content.jobName", job.FieldName},
		{"content.config.team", job.FieldTeam},
		{"content.config.description", job.FieldDescription},
		{"content.config.schedule.scheduleCron", job.FieldSchedule},
		{"content.deployments.jobPythonVersion", job.FieldPythonVersion},
		{"content.config.sourceUrl", job.FieldSourceURL},
	} {
		if sel[c.path] && (c.field != job.FieldSourceURL || sourceURL) {
			out = append(out, c.field)
		}
	}
	return out // empty: the store searches the name
}

// unpagedExecutions is how many executions an executions field without pageNumber and
// pageSize answers: the first page of 100 (VDK answered every row). It was the maximum
// page size when that was 100; it stays 100 so that `vdk list`'s 100 jobs, each with its
// unpaged executions, stay within MaxRows.
const unpagedExecutions = 100

// paging checks VDK's page arguments: both at least 1 and the size at most the maximum.
// Absent ones take the defaults (page 1 of 20), or for executions, when both are absent,
// the first unpagedExecutions; there one without the other is an error, as in VDK.
func (h *Handler) paging(number, size *int32, jobs bool) (int, int, error) {
	if !jobs && (number == nil) != (size == nil) {
		return 0, 0, job.Invalid("pageNumber and pageSize", "given together or not at all", "only one of them")
	}
	n, s := 1, 20
	if !jobs {
		s = min(unpagedExecutions, h.cfg.MaxPageSize)
	}
	if number != nil {
		n = int(*number)
	}
	if size != nil {
		s = int(*size)
	}
	if n < 1 {
		return 0, 0, job.Invalid("pageNumber", "at least 1", n)
	}
	if s < 1 || s > h.cfg.MaxPageSize {
		return 0, 0, job.Invalid("pageSize", "between 1 and "+itoa(h.cfg.MaxPageSize), s)
	}
	return n, s, nil
}

// selection is the set of field paths selected under a resolver.
type selection map[string]bool

// selectedFields are the paths of the fields selected under the current field, such as
// "content.config.team", the fields of fragments included.
func selectedFields(ctx context.Context) selection {
	op := graphql.GetOperationContext(ctx)
	out := selection{}
	var walk func(prefix string, set ast.SelectionSet)
	walk = func(prefix string, set ast.SelectionSet) {
		for _, f := range graphql.CollectFields(op, set, nil) {
			out[prefix+f.Name] = true
			walk(prefix+f.Name+".", f.Selections)
		}
	}
	walk("", graphql.GetFieldContext(ctx).Field.Selections)
	return out
}

// loader is what the resolvers of one jobs page share: the clock, the next runs computed
// so far, and the executions of the page's jobs, read once for the whole page (per set of
// arguments) by whichever deployment asks first.
type loader struct {
	h     *Handler
	store Reader
	now   time.Time
	names []string // the jobs of the page, set before any field resolver runs
	// configNextRun and deploymentNextRun tell whether next runs are selected.
	configNextRun, deploymentNextRun bool

	mu       sync.Mutex
	nextRuns map[string]int32
	execs    map[string]*batch[map[string][]job.Execution]
	counts   batch[map[string]job.ExecutionCount]
}

// batch is a value read once, by whichever resolver needs it first.
type batch[T any] struct {
	once sync.Once
	val  T
	err  error
}

func (b *batch[T]) get(load func() (T, error)) (T, error) {
	b.once.Do(func() { b.val, b.err = load() })
	return b.val, b.err
}

func (h *Handler) newLoader(r Reader) *loader {
	return &loader{
		h: h, store: r, now: h.cfg.Now().UTC(), nextRuns: map[string]int32{},
		execs: map[string]*batch[map[string][]job.Execution]{},
	}
}

// nextRun is the next run of a schedule after the request's time, in epoch seconds
// (UTC), or -1 when the schedule is empty or never fires, or after 2038 (GraphQL's Int
// has 32 bits). Each distinct schedule is computed once per request.
func (l *loader) nextRun(schedule string) int32 {
	l.mu.Lock()
	defer l.mu.Unlock()
	v, ok := l.nextRuns[schedule]
	if !ok {
		v = -1
		if next, ok := l.h.schedules.NextRun(schedule, l.now); ok && next <= math.MaxInt32 {
			v = int32(next)
		}
		l.nextRuns[schedule] = v
	}
	return v
}

// executionsOf reads the executions of every job of the page for one set of arguments,
// once, and returns those of name.
func (l *loader) executionsOf(ctx context.Context, name string, args executionsArgs) ([]job.Execution, error) {
	key, err := json.Marshal(args)
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	b, ok := l.execs[string(key)]
	if !ok {
		b = &batch[map[string][]job.Execution]{}
		l.execs[string(key)] = b
	}
	l.mu.Unlock()
	all, err := b.get(func() (map[string][]job.Execution, error) {
		q, err := l.h.executionsQuery(ctx, args, true)
		if err != nil {
			return nil, err
		}
		if err := takeRows(ctx, len(l.names)*q.Limit, "the executions of a page of jobs"); err != nil {
			return nil, err
		}
		return l.store.ExecutionsOfJobs(ctx, l.names, q)
	})
	return all[name], err
}

// executionCount reads the execution counts of every job of the page, once.
func (l *loader) executionCount(ctx context.Context, name string) (job.ExecutionCount, error) {
	all, err := l.counts.get(func() (map[string]job.ExecutionCount, error) {
		return l.store.ExecutionCounts(ctx, l.names)
	})
	return all[name], err
}

// Executions is VDK's executions query: a page of executions across jobs.
func (q *resolver) Executions(ctx context.Context, pageNumber, pageSize *int32, filter *gql.DataJobExecutionFilter, order *gql.DataJobExecutionOrder) (*gql.DataJobExecutionResponse, error) {
	sq, err := q.h.executionsQuery(ctx, executionsArgs{pageNumber, pageSize, filter, order}, false)
	if err != nil {
		return nil, err
	}
	if err := takeRows(ctx, sq.Limit, "a page of executions"); err != nil {
		return nil, err
	}
	sel := selectedFields(ctx)
	sq.Count = sel["totalItems"] || sel["totalPages"]
	page, err := q.store.ExecutionsPage(ctx, sq)
	if err != nil {
		return nil, err
	}
	out := &gql.DataJobExecutionResponse{}
	out.TotalItems, out.TotalPages = totals(page.Total, sq.Limit)
	out.Content = q.h.toExecutions(page.Rows)
	return out, nil
}

// executionsArgs are the arguments of an executions field. Its JSON is the key of a batch:
// two fields with the same arguments share one read.
type executionsArgs struct {
	PageNumber *int32
	PageSize   *int32
	Filter     *gql.DataJobExecutionFilter
	Order      *gql.DataJobExecutionOrder
}

// deploymentResolver resolves the fields of a deployment that read executions, once per page.
type deploymentResolver struct{}

// pageOf is the loader of the jobs page deployment d is on (toDataJob sets it).
func pageOf(d *gql.DataJobDeployment) *loader { return d.Page.(*loader) }

func (deploymentResolver) Executions(ctx context.Context, d *gql.DataJobDeployment, pageNumber, pageSize *int32, filter *gql.DataJobExecutionFilter, order *gql.DataJobExecutionOrder) ([]*gql.DataJobExecution, error) {
	r := pageOf(d)
	rows, err := r.executionsOf(ctx, d.ID, executionsArgs{pageNumber, pageSize, filter, order})
	if err != nil {
		return nil, err
	}
	return r.h.toExecutions(rows), nil
}

func (deploymentResolver) SuccessfulExecutions(ctx context.Context, d *gql.DataJobDeployment) (int32, error) {
	c, err := pageOf(d).executionCount(ctx, d.ID)
	return int32(c.Succeeded), err
}

func (deploymentResolver) FailedExecutions(ctx context.Context, d *gql.DataJobDeployment) (int32, error) {
	c, err := pageOf(d).executionCount(ctx, d.ID)
	return int32(c.Failed), err
}

// executionOrders are VDK's order properties of executions.
func executionOrders() map[string]job.ExecutionField {
	return map[string]job.ExecutionField{
		"id": job.ExecByID, "jobName": job.ExecByJobName, "jobTeam": job.ExecByTeam, "status": job.ExecByStatus,
		"type": job.ExecByType, "startTime": job.ExecByStartTime, "endTime": job.ExecByEndTime,
		"message": job.ExecByMessage, "opId": job.ExecByOpID, "startedBy": job.ExecByStartedBy,
		"jobVersion": job.ExecByJobVersion, "jobSchedule": job.ExecByJobSchedule, "vdkVersion": job.ExecByVDKVersion,
		"lastDeployedDate": job.ExecByDeployedDate, "deployedDate": job.ExecByDeployedDate,
		"lastDeployedBy": job.ExecByDeployedBy, "deployedBy": job.ExecByDeployedBy,
	}
}

// executionsQuery turns the arguments of an executions field into a store query. Those of
// a deployment's executions (nested) may not name jobs: the deployment does.
func (h *Handler) executionsQuery(ctx context.Context, args executionsArgs, nested bool) (job.ExecutionsQuery, error) {
	number, size, err := h.paging(args.PageNumber, args.PageSize, false)
	if err != nil {
		return job.ExecutionsQuery{}, err
	}
	q := job.ExecutionsQuery{Offset: (number - 1) * size, Limit: size}
	if q.Filter.Visible, err = h.visibleTo(ctx); err != nil {
		return job.ExecutionsQuery{}, err
	}
	if f := args.Filter; f != nil {
		q.Filter.StartTimeGte, q.Filter.EndTimeGte = f.StartTimeGte.Ptr(), f.EndTimeGte.Ptr()
		q.Filter.StartTimeLte, q.Filter.EndTimeLte = f.StartTimeLte.Ptr(), f.EndTimeLte.Ptr()
		for _, s := range strings1(f.StatusIn) {
			q.Filter.StatusIn = append(q.Filter.StatusIn, strings.ToLower(s))
		}
		q.Filter.JobNameIn = strings1(f.JobNameIn)
		q.Filter.TeamNameIn = strings1(f.TeamNameIn)
		if nested && f.JobNameIn != nil {
			return job.ExecutionsQuery{}, job.Invalid("filter.jobNameIn", "absent in the executions of a deployment", "given")
		}
	}
	if o := args.Order; o != nil {
		prop := deref(o.Property)
		field, ok := executionOrders()[prop]
		if !ok {
			return job.ExecutionsQuery{}, job.Invalid("order.property",
				"one of id, jobName, jobTeam, status, type, startTime, endTime, message, opId, startedBy, jobVersion, jobSchedule, vdkVersion, lastDeployedDate, lastDeployedBy",
				quote(prop))
		}
		q.Order, q.Desc = field, deref(o.Direction) == "DESC"
	}
	return q, nil
}

// strings1 flattens a nullable list of nullable strings, dropping the nulls.
func strings1(l []*string) []string {
	if l == nil {
		return nil
	}
	out := make([]string, 0, len(l))
	for _, s := range l {
		if s != nil {
			out = append(out, *s)
		}
	}
	return out
}
