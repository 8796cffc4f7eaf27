package graphapi

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/robfig/cron/v3"
	"github.com/vektah/gqlparser/v2/ast"

	"github.com/datajobs/datajobs/internal/auth"
	"github.com/datajobs/datajobs/internal/graphapi/gql"
	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/store"
)

// resolver is the root of the schema's resolvers.
type resolver struct {
	h     *Handler
	store Reader
}

func (q *resolver) Query() gql.QueryResolver                         { return q }
func (q *resolver) DataJobDeployment() gql.DataJobDeploymentResolver { return deploymentResolver{} }

// Jobs is VDK's jobs query: one page of jobs, filtered, searched and sorted by the
// database, reading only the column groups the selection set needs.
func (q *resolver) Jobs(ctx context.Context, pageNumber, pageSize *int32, preds []*gql.Predicate, search *string) (*gql.DataJobPage, error) {
	number, size, err := q.h.paging(pageNumber, pageSize, true)
	if err != nil {
		return nil, err
	}
	filter, sort, err := q.h.parsePredicates(preds)
	if err != nil {
		return nil, err
	}
	filter.Visible = visibleTo(ctx)
	sel := selectedFields(ctx)
	if s := strings.TrimSpace(deref(search)); s != "" {
		filter.Search = s
		filter.SearchFields = searchFields(sel, q.h.cfg.SourceURLTemplate != "")
	}
	req := q.h.newRequest(q.store)
	req.configNextRun = sel.has("content.config.schedule.nextRunEpochSeconds")
	req.deploymentNextRun = sel.has("content.deployments.schedule.nextRunEpochSeconds")
	sq := store.JobsQuery{
		Filter: filter,
		Sort:   sort,
		Offset: (number - 1) * size,
		Limit:  size,
		Count:  sel.has("totalItems") || sel.has("totalPages"),
		Columns: store.JobColumns{
			Config: sel.hasAny("content.config.team", "content.config.description", "content.config.schedule",
				"content.config.generateKeytab", "content.config.enableExecutionNotifications",
				"content.config.notificationDelayPeriodMinutes", "content.config.dbDefaultType",
				"content.config.sourceUrl", "content.config.logsUrl"),
			Contacts:      sel.hasAny("content.config.contacts", "content.deployments.contacts"),
			Deployment:    sel.has("content.deployments"),
			LastExecution: sel.hasPrefix("content.deployments.lastExecution"),
		},
		SourceURLTemplate: q.h.cfg.SourceURLTemplate,
		NextRun:           req.nextRun,
	}
	page, err := q.store.JobsPage(ctx, sq)
	if err != nil {
		return nil, err
	}
	out := &gql.DataJobPage{Content: make([]*gql.DataJob, len(page.Rows))}
	out.TotalItems, out.TotalPages = totals(page.Total, size)
	req.names = make([]string, len(page.Rows))
	jobs := make([]gql.DataJob, len(page.Rows)) // one allocation for the page
	for i := range page.Rows {
		req.toDataJob(&jobs[i], &page.Rows[i])
		out.Content[i] = &jobs[i]
		req.names[i] = page.Rows[i].Job.Name
	}
	return out, nil
}

// searchFields are VDK's search targets that the selection set shows, so that a match is
// visible to the client; the job name when it shows none.
func searchFields(sel selection, sourceURL bool) []store.JobField {
	candidates := []struct {
		path  string
		field store.JobField
	}{
		{"content.jobName", store.FieldName},
		{"content.config.team", store.FieldTeam},
		{"content.config.description", store.FieldDescription},
		{"content.config.schedule.scheduleCron", store.FieldSchedule},
		{"content.deployments.jobPythonVersion", store.FieldPythonVersion},
	}
	if sourceURL {
		candidates = append(candidates, struct {
			path  string
			field store.JobField
		}{"content.config.sourceUrl", store.FieldSourceURL})
	}
	var out []store.JobField
	for _, c := range candidates {
		if sel.has(c.path) {
			out = append(out, c.field)
		}
	}
	if len(out) == 0 {
		out = []store.JobField{store.FieldName}
	}
	return out
}

// paging checks VDK's page arguments: both at least 1 and the size at most the maximum.
// Absent ones take the defaults (page 1 of 20), or for executions, when both are absent,
// the first page of the maximum size; there one without the other is an error, as in VDK.
func (h *Handler) paging(number, size *int32, jobs bool) (int, int, error) {
	if !jobs && (number == nil) != (size == nil) {
		return 0, 0, job.Invalid("pageNumber and pageSize", "given together or not at all", "only one of them")
	}
	n, s := 1, 20
	if !jobs {
		s = h.cfg.MaxPageSize
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
type selection []string

// selectedFields are the paths of the fields selected under the current field, such as
// "content.config.team", the fields of fragments included.
func selectedFields(ctx context.Context) selection {
	op := graphql.GetOperationContext(ctx)
	var out selection
	var walk func(prefix string, set ast.SelectionSet)
	walk = func(prefix string, set ast.SelectionSet) {
		for _, f := range graphql.CollectFields(op, set, nil) {
			p := prefix + f.Name
			out = append(out, p)
			walk(p+".", f.Selections)
		}
	}
	walk("", graphql.GetFieldContext(ctx).Field.Selections)
	return out
}

func (s selection) has(path string) bool {
	for _, p := range s {
		if p == path {
			return true
		}
	}
	return false
}

func (s selection) hasAny(paths ...string) bool {
	for _, p := range paths {
		if s.has(p) {
			return true
		}
	}
	return false
}

func (s selection) hasPrefix(prefix string) bool {
	for _, p := range s {
		if strings.HasPrefix(p, prefix) {
			return true
		}
	}
	return false
}

// jobsRequest is the state one jobs query shares between its resolvers: the clock, the
// next runs computed so far, and the batches of executions of the page's jobs, each read
// once for the whole page.
type jobsRequest struct {
	h     *Handler
	store Reader
	now   time.Time
	names []string // the jobs of the page, set before any field resolver runs
	// configNextRun and deploymentNextRun tell whether next runs are selected.
	configNextRun, deploymentNextRun bool

	mu       sync.Mutex
	nextRuns map[string]int64
	execs    map[string]*batch[map[string][]store.Execution]
	counts   *batch[map[string]store.ExecutionCount]
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

func (h *Handler) newRequest(r Reader) *jobsRequest {
	return &jobsRequest{
		h: h, store: r, now: h.cfg.Now().UTC(), nextRuns: map[string]int64{},
		execs: map[string]*batch[map[string][]store.Execution]{}, counts: &batch[map[string]store.ExecutionCount]{},
	}
}

// cronParser reads schedules as Kubernetes does: five fields or a macro such as @hourly.
var cronParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// maxCachedCrons bounds the parsed schedules kept across requests.
const maxCachedCrons = 10_000

// parseCron parses a schedule, or returns nil when it is empty or invalid. Parsed
// schedules are kept (up to maxCachedCrons): a page shows the same few schedules again
// and again.
func (h *Handler) parseCron(s string) cron.Schedule {
	h.cronMu.RLock()
	sch, ok := h.crons[s]
	h.cronMu.RUnlock()
	if ok {
		return sch
	}
	if t := strings.TrimSpace(s); t != "" {
		if parsed, err := cronParser.Parse(t); err == nil {
			sch = parsed
		}
	}
	h.cronMu.Lock()
	if len(h.crons) < maxCachedCrons {
		h.crons[s] = sch
	}
	h.cronMu.Unlock()
	return sch
}

// nextRun is the next run of a schedule after the request's time, in epoch seconds (UTC),
// or false when the schedule is empty, invalid or never fires. Each distinct schedule is
// computed once per request.
func (r *jobsRequest) nextRun(schedule string) (int64, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if v, ok := r.nextRuns[schedule]; ok {
		return v, v >= 0
	}
	v := int64(-1)
	if sch := r.h.parseCron(schedule); sch != nil {
		if next := sch.Next(r.now); !next.IsZero() {
			v = next.Unix()
		}
	}
	r.nextRuns[schedule] = v
	return v, v >= 0
}

// executionsOf reads the executions of every job of the page for one set of arguments,
// once, and returns those of name.
func (r *jobsRequest) executionsOf(ctx context.Context, name string, args executionsArgs) ([]store.Execution, error) {
	if r == nil {
		return nil, errors.New("a deployment without its page")
	}
	key, err := json.Marshal(args)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	b, ok := r.execs[string(key)]
	if !ok {
		b = &batch[map[string][]store.Execution]{}
		r.execs[string(key)] = b
	}
	r.mu.Unlock()
	all, err := b.get(func() (map[string][]store.Execution, error) {
		q, err := r.h.executionsQuery(ctx, args, true)
		if err != nil {
			return nil, err
		}
		return r.store.ExecutionsOfJobs(ctx, r.names, q)
	})
	return all[name], err
}

// executionCount reads the execution counts of every job of the page, once.
func (r *jobsRequest) executionCount(ctx context.Context, name string) (store.ExecutionCount, error) {
	if r == nil {
		return store.ExecutionCount{}, errors.New("a deployment without its page")
	}
	all, err := r.counts.get(func() (map[string]store.ExecutionCount, error) {
		return r.store.ExecutionCounts(ctx, r.names)
	})
	return all[name], err
}

// Executions is VDK's executions query: a page of executions across jobs.
func (q *resolver) Executions(ctx context.Context, pageNumber, pageSize *int32, filter *gql.DataJobExecutionFilter, order *gql.DataJobExecutionOrder) (*gql.DataJobExecutionResponse, error) {
	sq, err := q.h.executionsQuery(ctx, executionsArgs{pageNumber, pageSize, filter, order}, false)
	if err != nil {
		return nil, err
	}
	sel := selectedFields(ctx)
	sq.Count = sel.has("totalItems") || sel.has("totalPages")
	page, err := q.store.Executions(ctx, sq)
	if err != nil {
		return nil, err
	}
	out := &gql.DataJobExecutionResponse{}
	out.TotalItems, out.TotalPages = totals(page.Total, sq.Limit)
	out.Content = q.h.toExecutions(page.Rows)
	return out, nil
}

// executionsArgs are the arguments of an executions field, hashable as the key of a batch.
type executionsArgs struct {
	PageNumber *int32
	PageSize   *int32
	Filter     *gql.DataJobExecutionFilter
	Order      *gql.DataJobExecutionOrder
}

// deploymentResolver resolves the fields of a deployment that read executions, once per page.
type deploymentResolver struct{}

func pageOf(d *gql.DataJobDeployment) *jobsRequest {
	r, _ := d.Page.(*jobsRequest)
	return r
}

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
func executionOrders() map[string]store.ExecutionField {
	return map[string]store.ExecutionField{
		"id": store.ExecID, "jobName": store.ExecJobName, "jobTeam": store.ExecTeam, "status": store.ExecStatus,
		"type": store.ExecType, "startTime": store.ExecStartTime, "endTime": store.ExecEndTime,
		"message": store.ExecMessage, "opId": store.ExecOpID, "startedBy": store.ExecStartedBy,
		"jobVersion": store.ExecJobVersion, "jobSchedule": store.ExecJobSchedule, "vdkVersion": store.ExecVDKVersion,
		"lastDeployedDate": store.ExecDeployedDate, "deployedDate": store.ExecDeployedDate,
		"lastDeployedBy": store.ExecDeployedBy, "deployedBy": store.ExecDeployedBy,
	}
}

// executionsQuery turns the arguments of an executions field into a store query. Those of
// a deployment's executions (nested) may not name jobs: the deployment does.
func (h *Handler) executionsQuery(ctx context.Context, args executionsArgs, nested bool) (store.ExecutionsQuery, error) {
	number, size, err := h.paging(args.PageNumber, args.PageSize, false)
	if err != nil {
		return store.ExecutionsQuery{}, err
	}
	q := store.ExecutionsQuery{Offset: (number - 1) * size, Limit: size}
	q.Filter.Visible = visibleTo(ctx)
	if f := args.Filter; f != nil {
		q.Filter.StartTimeGte, q.Filter.EndTimeGte = f.StartTimeGte.Ptr(), f.EndTimeGte.Ptr()
		q.Filter.StartTimeLte, q.Filter.EndTimeLte = f.StartTimeLte.Ptr(), f.EndTimeLte.Ptr()
		for _, s := range strings1(f.StatusIn) {
			q.Filter.StatusIn = append(q.Filter.StatusIn, strings.ToLower(s))
		}
		q.Filter.JobNameIn = strings1(f.JobNameIn)
		q.Filter.TeamNameIn = strings1(f.TeamNameIn)
		if nested && f.JobNameIn != nil {
			return store.ExecutionsQuery{}, job.Invalid("filter.jobNameIn", "absent in the executions of a deployment", "given")
		}
	}
	if o := args.Order; o != nil {
		prop := deref(o.Property)
		field, ok := executionOrders()[prop]
		if !ok {
			return store.ExecutionsQuery{}, job.Invalid("order.property",
				"one of id, jobName, jobTeam, status, type, startTime, endTime, message, opId, startedBy, jobVersion, jobSchedule, vdkVersion, lastDeployedDate, lastDeployedBy",
				quote(prop))
		}
		q.Order, q.Desc = field, deref(o.Direction) == "DESC"
	}
	return q, nil
}

// strings1 flattens a nullable list of nullable strings, dropping the nulls.
// visibleTo is what the caller of ctx may see: its teams, every team for an admin, and
// nothing when the request carries no caller.
func visibleTo(ctx context.Context) store.Visibility {
	id, ok := auth.FromContext(ctx)
	switch {
	case !ok:
		return store.Visibility{}
	case id.Admin:
		return store.AllTeams
	default:
		return store.Visibility{Teams: id.Teams}
	}
}

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
