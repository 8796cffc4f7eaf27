package graphapi

import (
	"context"
	"fmt"
	"runtime/debug"
	"strconv"
	"unicode/utf8"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/datajobs/datajobs/internal/graphapi/gql"
)

// writer answers the jobs and executions queries by writing the JSON of the selection set
// straight from what the resolvers returned, with one switch per type: no context,
// goroutine or closure per field, which is what a generic executor spends most of a page
// on (27 fields a job, 1,350 a page). gqlgen's executor still parses, validates and caches
// the document, coerces the variables and arguments, and answers introspection.
type writer struct {
	ctx   context.Context
	h     *Handler
	r     *resolver
	es    graphql.ExecutableSchema
	op    *graphql.OperationContext
	b     []byte
	err   *gqlerror.Error
	cache map[*ast.Selection][]graphql.CollectedField

	// Where the writer is, for the path of an error in a deployment's field.
	root, content, deployments string
	job                        int
}

// write runs the root fields of a query that asks no introspection.
func (h *Handler) write(ctx context.Context, op *graphql.OperationContext, roots []graphql.CollectedField) (resp *graphql.Response) {
	w := &writer{
		ctx: graphql.WithOperationContext(ctx, op), h: h, r: h.resolver, es: h.schema, op: op,
		b: make([]byte, 0, 32<<10), cache: map[*ast.Selection][]graphql.CollectedField{},
	}
	defer func() {
		if v := recover(); v != nil {
			h.cfg.Logger.ErrorContext(ctx, "graphql_resolver_panic", "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
			resp = &graphql.Response{Errors: gqlerror.List{gqlerror.WrapPath(nil, fmt.Errorf("%w: %v", errPanic, v))}}
		}
	}()
	w.b = append(w.b, '{')
	for i, f := range roots {
		if i > 0 {
			w.b = append(w.b, ',')
		}
		w.b = appendString(w.b, f.Alias)
		w.b = append(w.b, ':')
		w.root = f.Alias
		switch f.Name {
		case "__typename":
			w.b = appendString(w.b, "Query")
		case "jobs":
			w.jobs(f)
		case "executions":
			w.executions(f)
		default:
			panic("graphql: no writer for field " + f.Name)
		}
		if w.err != nil {
			return &graphql.Response{Errors: gqlerror.List{w.err}}
		}
	}
	w.b = append(w.b, '}')
	return &graphql.Response{Data: w.b}
}

// fail records the first error, on path, as the executor would present it.
func (w *writer) fail(f graphql.CollectedField, path ast.Path, err error) {
	if w.err != nil {
		return
	}
	e := presentError(w.ctx, err)
	e.Path = append(path, e.Path...) // the executor's errors of arguments carry the argument's name
	if f.Position != nil {
		e.Locations = []gqlerror.Location{{Line: f.Position.Line, Column: f.Position.Column}}
	}
	w.err = e
}

// fields are the fields of a selection set on an object type, fragments and directives
// applied, collected once per set.
func (w *writer) fields(sel ast.SelectionSet, typ string) []graphql.CollectedField {
	if len(sel) == 0 {
		return nil
	}
	k := &sel[0]
	fs, ok := w.cache[k]
	if !ok {
		fs = graphql.CollectFields(w.op, sel, []string{typ})
		w.cache[k] = fs
	}
	return fs
}

// key writes the separator and the key of field i.
func (w *writer) key(i int, f graphql.CollectedField) {
	if i > 0 {
		w.b = append(w.b, ',')
	}
	w.b = appendString(w.b, f.Alias)
	w.b = append(w.b, ':')
}

func (w *writer) rootContext(f graphql.CollectedField) (context.Context, map[string]any, bool) {
	args, err := gql.Args(w.ctx, w.es, w.op, "Query", f)
	if err != nil {
		w.fail(f, ast.Path{ast.PathName(f.Alias)}, err)
		return nil, nil, false
	}
	return graphql.WithFieldContext(w.ctx, &graphql.FieldContext{Object: "Query", Field: f, Args: args}), args, true
}

func (w *writer) jobs(f graphql.CollectedField) {
	ctx, args, ok := w.rootContext(f)
	if !ok {
		return
	}
	number, _ := args["pageNumber"].(*int32)
	size, _ := args["pageSize"].(*int32)
	filter, _ := args["filter"].([]*gql.Predicate)
	search, _ := args["search"].(*string)
	page, err := w.r.Jobs(ctx, number, size, filter, search)
	if err != nil {
		w.fail(f, ast.Path{ast.PathName(f.Alias)}, err)
		return
	}
	w.b = append(w.b, '{')
	for i, g := range w.fields(f.Selections, "DataJobPage") {
		w.key(i, g)
		switch g.Name {
		case "__typename":
			w.b = appendString(w.b, "DataJobPage")
		case "content":
			w.content = g.Alias
			w.b = append(w.b, '[')
			for j, job := range page.Content {
				if j > 0 {
					w.b = append(w.b, ',')
				}
				w.job = j
				w.dataJob(g.Selections, job)
				if w.err != nil {
					return
				}
			}
			w.b = append(w.b, ']')
		case "totalPages":
			w.b = strconv.AppendInt(w.b, int64(page.TotalPages), 10)
		case "totalItems":
			w.b = strconv.AppendInt(w.b, int64(page.TotalItems), 10)
		default:
			panic("graphql: no writer for field " + g.Name)
		}
	}
	w.b = append(w.b, '}')
}

func (w *writer) dataJob(sel ast.SelectionSet, v *gql.DataJob) {
	w.b = append(w.b, '{')
	for i, g := range w.fields(sel, "DataJob") {
		w.key(i, g)
		switch g.Name {
		case "__typename":
			w.b = appendString(w.b, "DataJob")
		case "jobName":
			w.b = appendString(w.b, v.JobName)
		case "config":
			w.config(g.Selections, &v.Config)
		case "deployments":
			w.deployments = g.Alias
			w.b = append(w.b, '[')
			for j, d := range v.Deployments {
				if j > 0 {
					w.b = append(w.b, ',')
				}
				w.deployment(g.Selections, d)
			}
			w.b = append(w.b, ']')
		default:
			panic("graphql: no writer for field " + g.Name)
		}
	}
	w.b = append(w.b, '}')
}

func (w *writer) config(sel ast.SelectionSet, v *gql.DataJobConfig) {
	w.b = append(w.b, '{')
	for i, g := range w.fields(sel, "DataJobConfig") {
		w.key(i, g)
		switch g.Name {
		case "__typename":
			w.b = appendString(w.b, "DataJobConfig")
		case "team":
			w.b = appendString(w.b, v.Team)
		case "description":
			w.b = appendString(w.b, v.Description)
		case "schedule":
			w.schedule(g.Selections, &v.Schedule)
		case "contacts":
			w.contacts(g.Selections, &v.Contacts)
		case "generateKeytab":
			w.b = strconv.AppendBool(w.b, v.GenerateKeytab)
		case "enableExecutionNotifications":
			w.b = strconv.AppendBool(w.b, v.EnableExecutionNotifications)
		case "notificationDelayPeriodMinutes":
			w.b = strconv.AppendInt(w.b, int64(v.NotificationDelayPeriodMinutes), 10)
		case "dbDefaultType":
			w.b = appendString(w.b, v.DbDefaultType)
		case "sourceUrl":
			w.b = appendStringPtr(w.b, v.SourceURL)
		case "logsUrl":
			w.b = appendStringPtr(w.b, v.LogsURL)
		default:
			panic("graphql: no writer for field " + g.Name)
		}
	}
	w.b = append(w.b, '}')
}

func (w *writer) schedule(sel ast.SelectionSet, v *gql.DataJobSchedule) {
	w.b = append(w.b, '{')
	for i, g := range w.fields(sel, "DataJobSchedule") {
		w.key(i, g)
		switch g.Name {
		case "__typename":
			w.b = appendString(w.b, "DataJobSchedule")
		case "scheduleCron":
			w.b = appendString(w.b, v.ScheduleCron)
		case "nextRunEpochSeconds":
			w.b = strconv.AppendInt(w.b, int64(v.NextRunEpochSeconds), 10)
		default:
			panic("graphql: no writer for field " + g.Name)
		}
	}
	w.b = append(w.b, '}')
}

func (w *writer) contacts(sel ast.SelectionSet, v *gql.DataJobContacts) {
	w.b = append(w.b, '{')
	for i, g := range w.fields(sel, "DataJobContacts") {
		w.key(i, g)
		switch g.Name {
		case "__typename":
			w.b = appendString(w.b, "DataJobContacts")
		case "notifiedOnJobFailureUserError":
			w.b = appendStrings(w.b, v.NotifiedOnJobFailureUserError)
		case "notifiedOnJobFailurePlatformError":
			w.b = appendStrings(w.b, v.NotifiedOnJobFailurePlatformError)
		case "notifiedOnJobSuccess":
			w.b = appendStrings(w.b, v.NotifiedOnJobSuccess)
		case "notifiedOnJobDeploy":
			w.b = appendStrings(w.b, v.NotifiedOnJobDeploy)
		default:
			panic("graphql: no writer for field " + g.Name)
		}
	}
	w.b = append(w.b, '}')
}

func (w *writer) resources(sel ast.SelectionSet, v *gql.DataJobResources) {
	w.b = append(w.b, '{')
	for i, g := range w.fields(sel, "DataJobResources") {
		w.key(i, g)
		switch g.Name {
		case "__typename":
			w.b = appendString(w.b, "DataJobResources")
		case "cpuRequest":
			w.b = appendFloat(w.b, v.CPURequest)
		case "cpuLimit":
			w.b = appendFloat(w.b, v.CPULimit)
		case "memoryRequest":
			w.b = strconv.AppendInt(w.b, int64(v.MemoryRequest), 10)
		case "memoryLimit":
			w.b = strconv.AppendInt(w.b, int64(v.MemoryLimit), 10)
		case "empheralStorageLimit":
			w.b = appendIntPtr(w.b, v.EmpheralStorageLimit)
		case "empheralSorageRequest":
			w.b = appendIntPtr(w.b, v.EmpheralSorageRequest)
		case "netBandwitdthLimit":
			w.b = appendIntPtr(w.b, v.NetBandwitdthLimit)
		default:
			panic("graphql: no writer for field " + g.Name)
		}
	}
	w.b = append(w.b, '}')
}

// deploymentPath is the path of a field of the current job's deployment.
func (w *writer) deploymentPath(alias string) ast.Path {
	return ast.Path{
		ast.PathName(w.root), ast.PathName(w.content), ast.PathIndex(w.job),
		ast.PathName(w.deployments), ast.PathIndex(0), ast.PathName(alias),
	}
}

func (w *writer) deployment(sel ast.SelectionSet, v *gql.DataJobDeployment) {
	w.b = append(w.b, '{')
	for i, g := range w.fields(sel, "DataJobDeployment") {
		w.key(i, g)
		switch g.Name {
		case "__typename":
			w.b = appendString(w.b, "DataJobDeployment")
		case "id":
			w.b = appendString(w.b, v.ID)
		case "enabled":
			w.b = strconv.AppendBool(w.b, v.Enabled)
		case "contacts":
			w.contacts(g.Selections, &v.Contacts)
		case "jobVersion":
			w.b = appendString(w.b, v.JobVersion)
		case "jobPythonVersion":
			w.b = appendString(w.b, v.JobPythonVersion)
		case "vdkVersion":
			w.b = appendString(w.b, v.VdkVersion)
		case "lastDeployedDate":
			w.b = appendString(w.b, v.LastDeployedDate)
		case "lastDeployedBy":
			w.b = appendString(w.b, v.LastDeployedBy)
		case "mode":
			w.b = appendString(w.b, v.Mode)
		case "resources":
			w.resources(g.Selections, &v.Resources)
		case "schedule":
			w.schedule(g.Selections, &v.Schedule)
		case "executions":
			args, err := gql.Args(w.ctx, w.es, w.op, "DataJobDeployment", g)
			if err != nil {
				w.fail(g, w.deploymentPath(g.Alias), err)
				return
			}
			number, _ := args["pageNumber"].(*int32)
			size, _ := args["pageSize"].(*int32)
			filter, _ := args["filter"].(*gql.DataJobExecutionFilter)
			order, _ := args["order"].(*gql.DataJobExecutionOrder)
			execs, err := deploymentResolver{}.Executions(w.ctx, v, number, size, filter, order)
			if err != nil {
				w.fail(g, w.deploymentPath(g.Alias), err)
				return
			}
			w.executionList(g.Selections, execs)
		case "status":
			w.b = appendString(w.b, v.Status)
		case "lastExecutionStatus":
			w.b = appendStringPtr(w.b, v.LastExecutionStatus)
		case "lastExecutionTime":
			w.b = appendStringPtr(w.b, v.LastExecutionTime)
		case "lastExecutionDuration":
			w.b = appendIntPtr(w.b, v.LastExecutionDuration)
		case "successfulExecutions", "failedExecutions":
			c, err := pageOf(v).executionCount(w.ctx, v.ID)
			if err != nil {
				w.fail(g, w.deploymentPath(g.Alias), err)
				return
			}
			n := c.Succeeded
			if g.Name == "failedExecutions" {
				n = c.Failed
			}
			w.b = strconv.AppendInt(w.b, int64(int32(n)), 10)
		case "syncStatus":
			w.b = appendString(w.b, v.SyncStatus)
		case "message":
			w.b = appendString(w.b, v.Message)
		case "desiredGeneration":
			w.b = strconv.AppendInt(w.b, int64(v.DesiredGeneration), 10)
		case "appliedGeneration":
			w.b = strconv.AppendInt(w.b, int64(v.AppliedGeneration), 10)
		case "lastSyncTime":
			w.b = appendStringPtr(w.b, v.LastSyncTime)
		default:
			panic("graphql: no writer for field " + g.Name)
		}
	}
	w.b = append(w.b, '}')
}

func (w *writer) executions(f graphql.CollectedField) {
	ctx, args, ok := w.rootContext(f)
	if !ok {
		return
	}
	number, _ := args["pageNumber"].(*int32)
	size, _ := args["pageSize"].(*int32)
	filter, _ := args["filter"].(*gql.DataJobExecutionFilter)
	order, _ := args["order"].(*gql.DataJobExecutionOrder)
	page, err := w.r.Executions(ctx, number, size, filter, order)
	if err != nil {
		w.fail(f, ast.Path{ast.PathName(f.Alias)}, err)
		return
	}
	w.b = append(w.b, '{')
	for i, g := range w.fields(f.Selections, "DataJobExecutionResponse") {
		w.key(i, g)
		switch g.Name {
		case "__typename":
			w.b = appendString(w.b, "DataJobExecutionResponse")
		case "content":
			w.executionList(g.Selections, page.Content)
		case "totalPages":
			w.b = strconv.AppendInt(w.b, int64(page.TotalPages), 10)
		case "totalItems":
			w.b = strconv.AppendInt(w.b, int64(page.TotalItems), 10)
		default:
			panic("graphql: no writer for field " + g.Name)
		}
	}
	w.b = append(w.b, '}')
}

func (w *writer) executionList(sel ast.SelectionSet, l []*gql.DataJobExecution) {
	w.b = append(w.b, '[')
	for i, e := range l {
		if i > 0 {
			w.b = append(w.b, ',')
		}
		w.execution(sel, e)
	}
	w.b = append(w.b, ']')
}

func (w *writer) execution(sel ast.SelectionSet, v *gql.DataJobExecution) {
	w.b = append(w.b, '{')
	for i, g := range w.fields(sel, "DataJobExecution") {
		w.key(i, g)
		switch g.Name {
		case "__typename":
			w.b = appendString(w.b, "DataJobExecution")
		case "id":
			w.b = appendString(w.b, v.ID)
		case "type":
			w.b = appendString(w.b, v.Type)
		case "jobName":
			w.b = appendString(w.b, v.JobName)
		case "status":
			w.b = appendString(w.b, v.Status)
		case "startTime":
			w.b = appendStringPtr(w.b, v.StartTime)
		case "endTime":
			w.b = appendStringPtr(w.b, v.EndTime)
		case "startedBy":
			w.b = appendString(w.b, v.StartedBy)
		case "message":
			w.b = appendString(w.b, v.Message)
		case "opId":
			w.b = appendString(w.b, v.OpID)
		case "logsUrl":
			w.b = appendStringPtr(w.b, v.LogsURL)
		case "jobVersion":
			w.b = appendString(w.b, v.JobVersion)
		case "jobSchedule":
			w.b = appendString(w.b, v.JobSchedule)
		case "jobPythonVersion":
			w.b = appendString(w.b, v.JobPythonVersion)
		case "vdkVersion":
			w.b = appendString(w.b, v.VdkVersion)
		case "vkdVersion":
			w.b = appendString(w.b, v.VkdVersion)
		case "resourcesCpuRequest":
			w.b = appendFloatPtr(w.b, v.ResourcesCPURequest)
		case "resourcesCpuLimit":
			w.b = appendFloatPtr(w.b, v.ResourcesCPULimit)
		case "resourcesMemoryRequest":
			w.b = appendIntPtr(w.b, v.ResourcesMemoryRequest)
		case "resourcesMemoryLimit":
			w.b = appendIntPtr(w.b, v.ResourcesMemoryLimit)
		case "deployedDate":
			w.b = appendStringPtr(w.b, v.DeployedDate)
		case "deployedBy":
			w.b = appendString(w.b, v.DeployedBy)
		case "deployment":
			w.executionDeployment(g.Selections, &v.Deployment)
		default:
			panic("graphql: no writer for field " + g.Name)
		}
	}
	w.b = append(w.b, '}')
}

func (w *writer) executionDeployment(sel ast.SelectionSet, v *gql.DataJobExecutionDeployment) {
	w.b = append(w.b, '{')
	for i, g := range w.fields(sel, "DataJobExecutionDeployment") {
		w.key(i, g)
		switch g.Name {
		case "__typename":
			w.b = appendString(w.b, "DataJobExecutionDeployment")
		case "id":
			w.b = appendString(w.b, v.ID)
		case "mode":
			w.b = appendString(w.b, v.Mode)
		case "enabled":
			w.b = strconv.AppendBool(w.b, v.Enabled)
		case "jobVersion":
			w.b = appendString(w.b, v.JobVersion)
		case "jobPythonVersion":
			w.b = appendString(w.b, v.JobPythonVersion)
		case "vdkVersion":
			w.b = appendString(w.b, v.VdkVersion)
		case "schedule":
			w.schedule(g.Selections, &v.Schedule)
		case "resources":
			w.resources(g.Selections, &v.Resources)
		case "deployedDate":
			w.b = appendStringPtr(w.b, v.DeployedDate)
		case "deployedBy":
			w.b = appendString(w.b, v.DeployedBy)
		default:
			panic("graphql: no writer for field " + g.Name)
		}
	}
	w.b = append(w.b, '}')
}

// appendString appends s as a JSON string, as encoding/json writes it (invalid UTF-8 as
// U+FFFD), without HTML escaping.
func appendString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

func appendStringPtr(b []byte, s *string) []byte {
	if s == nil {
		return append(b, "null"...)
	}
	return appendString(b, *s)
}

func appendStrings(b []byte, l []string) []byte {
	b = append(b, '[')
	for i, s := range l {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, s)
	}
	return append(b, ']')
}

func appendIntPtr(b []byte, v *int32) []byte {
	if v == nil {
		return append(b, "null"...)
	}
	return strconv.AppendInt(b, int64(*v), 10)
}

func appendFloat(b []byte, f float64) []byte { return strconv.AppendFloat(b, f, 'g', -1, 64) }

func appendFloatPtr(b []byte, f *float64) []byte {
	if f == nil {
		return append(b, "null"...)
	}
	return appendFloat(b, *f)
}
