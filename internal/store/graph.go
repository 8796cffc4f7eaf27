package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/datajobs/datajobs/internal/job"
)

// The reads of the GraphQL jobs and executions queries. Every filter, search and sort is
// evaluated by PostgreSQL; a page is one statement (plus one for the total, sent in the
// same round trip), with the deployments joined in, never one query per job. The one
// thing PostgreSQL cannot compute is the next run of a cron schedule: for a filter or sort
// on it the caller's NextRun is asked once per distinct schedule, and the results are
// joined in as an array parameter.

// JobField is a property of a job that the jobs query sorts or searches on.
type JobField int

// The fields of a job the jobs query knows.
const (
	FieldName JobField = iota + 1
	FieldTeam
	FieldDescription
	FieldSchedule
	FieldNextRun
	FieldSourceURL
	FieldContactsPresent
	FieldDeploymentEnabled
	FieldPythonVersion
	FieldLastExecutionStatus
	FieldLastExecutionTime
	FieldLastExecutionDuration
)

// DeploymentFilter selects jobs by the state of their deployment.
type DeploymentFilter string

// The states of VDK's deployments.enabled filter. A deployment being deleted (only its
// actual row left) still counts as deployed, as the deployments it shows do.
const (
	DeploymentEnabled  DeploymentFilter = "enabled"
	DeploymentDisabled DeploymentFilter = "disabled"
	NotDeployed        DeploymentFilter = "not_deployed"
)

// Range is an inclusive range of epoch seconds.
type Range struct {
	From, To int64
}

// Visibility is the set of teams whose jobs and executions a caller may see. The zero
// value sees nothing, so that a query that forgets it returns no other team's rows.
type Visibility struct {
	// AllTeams sees every team (admins, auth mode none).
	AllTeams bool
	// Teams are the teams seen when not AllTeams.
	Teams []string
}

// AllTeams sees every team's rows.
var AllTeams = Visibility{AllTeams: true}

// where returns the condition on the team column col, or "" when every team is visible.
func (v Visibility) where(b *sqlBuilder, col string) string {
	if v.AllTeams {
		return ""
	}
	return col + " = ANY(" + b.arg(append([]string{}, v.Teams...)) + "::text[])"
}

// JobFilter holds the conditions a job must meet, all of them; zero fields impose no
// condition, except Visible. Text matches ignore case.
type JobFilter struct {
	// Visible restricts the jobs to the caller's teams, whatever else the filter says.
	Visible Visibility
	// NameGlob matches the whole job name; * stands for any characters.
	NameGlob string
	// TeamGlob matches the whole team name; * stands for any characters.
	TeamGlob                   string
	DescriptionContains        string
	ScheduleContains           string
	SourceURLContains          string
	Deployment                 DeploymentFilter
	PythonVersionContains      string
	LastExecutionStatus        string
	LastExecutionTime, NextRun *Range
	Search                     string
	// SearchFields are where Search is looked for: a job matches when one of them
	// contains it. FieldName when empty.
	SearchFields []JobField
}

// JobSort is one key of the order of a page; missing values sort last either way.
type JobSort struct {
	Field JobField
	Desc  bool
}

// JobColumns selects the groups of columns a page loads besides the name, so that a query
// asking for names only reads names.
type JobColumns struct {
	// Config: team, description, schedule and the other scalar settings.
	Config bool
	// Contacts: the four lists of recipients.
	Contacts bool
	// Deployment: the desired and actual deployments, and the job's generation.
	Deployment bool
	// LastExecution: status, end time and duration of the last execution.
	LastExecution bool
}

// JobsQuery asks for one page of jobs.
type JobsQuery struct {
	Filter JobFilter
	// Sort keys in order; the job name always breaks ties.
	Sort          []JobSort
	Offset, Limit int
	// Count asks for the total number of jobs that pass the filter.
	Count   bool
	Columns JobColumns
	// SourceURLTemplate renders a job's source URL for filters, sorts and searches on
	// FieldSourceURL: {job} and {team} are replaced. Empty means jobs have none.
	SourceURLTemplate string
	// NextRun returns the next run of a cron schedule in epoch seconds, or false when it
	// never runs. Required for filters and sorts on FieldNextRun.
	NextRun func(schedule string) (int64, bool)
}

// LastExecution is the last execution of a job as recorded on its row.
type LastExecution struct {
	Status          string // "" when the job never ran
	EndTime         *time.Time
	DurationSeconds *int
}

// JobRow is one job of a page, with the column groups the query asked for.
type JobRow struct {
	Job     job.Job
	Desired *job.Deployment
	// Actual is the actual deployment of this incarnation of the job, if any.
	Actual        *job.ActualDeployment
	LastExecution LastExecution
}

// JobsPage is a page of jobs and, when counted, the number of jobs over all pages.
type JobsPage struct {
	Rows  []JobRow
	Total int // -1 when not counted
}

// JobsPage reads one page of jobs in one round trip (two when next runs are involved).
func (s *Store) JobsPage(ctx context.Context, q JobsQuery) (JobsPage, error) {
	if q.Limit <= 0 || q.Offset < 0 {
		return JobsPage{}, fmt.Errorf("jobs page: bad limit %d or offset %d", q.Limit, q.Offset)
	}
	var nextRuns *nextRunTable
	if q.usesNextRun() {
		if q.NextRun == nil {
			return JobsPage{}, errors.New("jobs page: NextRun is required to filter or sort on the next run")
		}
		t, err := s.nextRunTable(ctx, q)
		if err != nil {
			return JobsPage{}, err
		}
		nextRuns = &t
	}

	page := JobsPage{Total: -1}
	batch := &pgx.Batch{}
	if q.Count {
		sql, args := buildJobsSQL(q, nextRuns, modeCount)
		batch.Queue(sql, args...).QueryRow(func(row pgx.Row) error { return row.Scan(&page.Total) })
	}
	sql, args := buildJobsSQL(q, nextRuns, modePage)
	batch.Queue(sql, args...).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			r, err := scanJobRow(rows, q.Columns)
			if err != nil {
				return err
			}
			page.Rows = append(page.Rows, r)
		}
		return rows.Err()
	})
	if err := s.pool.SendBatch(ctx, batch).Close(); err != nil {
		return JobsPage{}, translate(fmt.Errorf("read jobs page: %w", err))
	}
	return page, nil
}

func (q JobsQuery) usesNextRun() bool {
	return q.Filter.NextRun != nil || slices.ContainsFunc(q.Sort, func(s JobSort) bool { return s.Field == FieldNextRun })
}

// nextRunTable is the next run of each distinct schedule among the jobs the other
// conditions let through; schedules that never run are left out.
type nextRunTable struct {
	schedules []string
	nextRuns  []int64
}

func (s *Store) nextRunTable(ctx context.Context, q JobsQuery) (nextRunTable, error) {
	sql, args := buildJobsSQL(q, nil, modeSchedules)
	rows, err := s.pool.Query(ctx, sql, args...)
	if err != nil {
		return nextRunTable{}, translate(fmt.Errorf("read job schedules: %w", err))
	}
	schedules, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nextRunTable{}, translate(fmt.Errorf("read job schedules: %w", err))
	}
	var t nextRunTable
	for _, sch := range schedules {
		if next, ok := q.NextRun(sch); ok {
			t.schedules = append(t.schedules, sch)
			t.nextRuns = append(t.nextRuns, next)
		}
	}
	return t, nil
}

type buildMode int

const (
	modePage      buildMode = iota // the rows of the page
	modeCount                      // the number of jobs that pass the filter
	modeSchedules                  // the distinct schedules of those jobs, before any next-run condition
)

// sqlBuilder collects the parameters of one statement.
type sqlBuilder struct {
	args []any
}

// arg adds a parameter and returns its placeholder.
func (b *sqlBuilder) arg(v any) string {
	b.args = append(b.args, v)
	return "$" + strconv.Itoa(len(b.args))
}

// buildJobsSQL writes the statement of mode for q. nextRuns is nil in modeSchedules.
func buildJobsSQL(q JobsQuery, nextRuns *nextRunTable, mode buildMode) (string, []any) {
	b := &sqlBuilder{}
	f := q.Filter
	searchFields := f.SearchFields
	if len(searchFields) == 0 {
		searchFields = []JobField{FieldName}
	}

	// Which joins this statement needs.
	needDeployment := f.Deployment != "" || f.PythonVersionContains != "" ||
		(f.Search != "" && slices.Contains(searchFields, FieldPythonVersion))
	needNextRun := mode != modeSchedules && f.NextRun != nil
	if mode == modePage {
		needDeployment = needDeployment || q.Columns.Deployment ||
			slices.ContainsFunc(q.Sort, func(s JobSort) bool {
				return s.Field == FieldDeploymentEnabled || s.Field == FieldPythonVersion
			})
		needNextRun = needNextRun || q.usesNextRun()
	}

	var sb strings.Builder
	switch mode {
	case modeCount:
		sb.WriteString("SELECT count(*)")
	case modeSchedules:
		sb.WriteString("SELECT DISTINCT j.schedule")
	case modePage:
		sb.WriteString("SELECT " + pageColumns(q.Columns))
	}
	sb.WriteString("\nFROM data_job j")
	if needDeployment {
		sb.WriteString("\nLEFT JOIN desired_data_job_deployment d ON d.data_job_name = j.name" +
			"\nLEFT JOIN actual_data_job_deployment a ON a.data_job_name = j.name AND a.job_uid = j.uid")
	}
	if needNextRun {
		sb.WriteString("\nLEFT JOIN unnest(" + b.arg(nextRuns.schedules) + "::text[], " + b.arg(nextRuns.nextRuns) +
			"::bigint[]) AS nr(schedule, next_run) ON nr.schedule = j.schedule")
	}

	var where []string
	if c := f.Visible.where(b, "j.team"); c != "" {
		where = append(where, c)
	}
	if f.NameGlob != "" {
		// Job names are lower case (validation), so a lower-case pattern ignores case and
		// can use an index.
		where = append(where, "j.name LIKE "+b.arg(globToLike(strings.ToLower(f.NameGlob))))
	}
	if f.TeamGlob != "" {
		// Team names are lower case too.
		team := strings.ToLower(strings.TrimSpace(f.TeamGlob))
		if strings.Contains(team, "*") {
			where = append(where, "j.team LIKE "+b.arg(globToLike(team)))
		} else {
			where = append(where, "j.team = "+b.arg(team))
		}
	}
	contains := func(expr, s string) {
		if s != "" {
			where = append(where, expr+" ILIKE "+b.arg(containsLike(s)))
		}
	}
	contains("j.description", f.DescriptionContains)
	contains("j.schedule", f.ScheduleContains)
	if f.SourceURLContains != "" {
		contains(sourceURLExpr(b, q.SourceURLTemplate), f.SourceURLContains)
	}
	switch f.Deployment {
	case DeploymentEnabled:
		where = append(where, "COALESCE(d.enabled, a.enabled) IS TRUE")
	case DeploymentDisabled:
		where = append(where, "COALESCE(d.enabled, a.enabled) IS FALSE")
	case NotDeployed:
		where = append(where, "d.data_job_name IS NULL AND a.data_job_name IS NULL")
	}
	contains("COALESCE(d.python_version, a.python_version)", f.PythonVersionContains)
	if f.LastExecutionStatus != "" {
		where = append(where, "j.last_execution_status = "+b.arg(f.LastExecutionStatus))
	}
	if r := f.LastExecutionTime; r != nil {
		// Clamped to the years PostgreSQL and Go agree on, so that no range is an error.
		const maxEpoch = 253402300799 // 9999-12-31T23:59:59Z
		from, to := time.Unix(min(max(r.From, 0), maxEpoch), 0), time.Unix(min(max(r.To, 0), maxEpoch), 0)
		where = append(where, "j.last_execution_end_time BETWEEN "+b.arg(from)+" AND "+b.arg(to))
	}
	if r := f.NextRun; r != nil && mode != modeSchedules {
		where = append(where, "nr.next_run BETWEEN "+b.arg(r.From)+" AND "+b.arg(r.To))
	}
	if f.Search != "" {
		p := b.arg(containsLike(f.Search))
		var ors []string
		for _, field := range searchFields {
			ors = append(ors, fieldExpr(b, q, field)+" ILIKE "+p)
		}
		where = append(where, "("+strings.Join(ors, " OR ")+")")
	}
	if len(where) > 0 {
		sb.WriteString("\nWHERE " + strings.Join(where, "\n  AND "))
	}

	if mode == modePage {
		var order []string
		byName := false
		for _, s := range q.Sort {
			dir := " ASC"
			if s.Desc {
				dir = " DESC"
			}
			order = append(order, fieldExpr(b, q, s.Field)+dir+" NULLS LAST")
			byName = byName || s.Field == FieldName
		}
		if !byName {
			order = append(order, "j.name")
		}
		sb.WriteString("\nORDER BY " + strings.Join(order, ", "))
		sb.WriteString("\nLIMIT " + b.arg(q.Limit) + " OFFSET " + b.arg(q.Offset))
	}
	return sb.String(), b.args
}

// fieldExpr is the SQL expression of a field, for sorting and searching.
func fieldExpr(b *sqlBuilder, q JobsQuery, f JobField) string {
	switch f {
	case FieldName:
		return "j.name"
	case FieldTeam:
		return "j.team"
	case FieldDescription:
		return "j.description"
	case FieldSchedule:
		return "j.schedule"
	case FieldNextRun:
		return "nr.next_run"
	case FieldSourceURL:
		return sourceURLExpr(b, q.SourceURLTemplate)
	case FieldContactsPresent:
		return "(cardinality(j.notified_on_job_failure_user_error) + cardinality(j.notified_on_job_failure_platform_error)" +
			" + cardinality(j.notified_on_job_success) + cardinality(j.notified_on_job_deploy) > 0)"
	case FieldDeploymentEnabled:
		return "COALESCE(d.enabled, a.enabled)"
	case FieldPythonVersion:
		return "COALESCE(d.python_version, a.python_version)"
	case FieldLastExecutionStatus:
		return "j.last_execution_status"
	case FieldLastExecutionTime:
		return "j.last_execution_end_time"
	case FieldLastExecutionDuration:
		return "j.last_execution_duration"
	default:
		panic(fmt.Sprintf("store: unknown job field %d", f))
	}
}

// sourceURLExpr renders the source URL template in SQL; NULL when there is none.
func sourceURLExpr(b *sqlBuilder, template string) string {
	if template == "" {
		return "NULL::text"
	}
	return "replace(replace(" + b.arg(template) + "::text, '{job}', j.name), '{team}', j.team)"
}

// pageColumns lists the columns scanJobRow reads for cols, in its order.
func pageColumns(cols JobColumns) string {
	c := []string{"j.name"}
	if cols.Config {
		c = append(c, "j.team, j.description, j.schedule, j.db_default_type, j.generate_keytab,"+
			" j.enable_execution_notifications, j.notification_delay_period_minutes")
	}
	if cols.Contacts {
		c = append(c, "j.notified_on_job_failure_user_error, j.notified_on_job_failure_platform_error,"+
			" j.notified_on_job_success, j.notified_on_job_deploy")
	}
	if cols.Deployment {
		c = append(c, "j.generation, j.uid::text, "+joinedDesiredColumns+", "+joinedActualColumns)
	}
	if cols.LastExecution {
		c = append(c, "COALESCE(j.last_execution_status, ''), j.last_execution_end_time, j.last_execution_duration")
	}
	return strings.Join(c, ", ")
}

func scanJobRow(rows pgx.Rows, cols JobColumns) (JobRow, error) {
	var (
		r  JobRow
		jr joined
		j  = &r.Job
	)
	dest := make([]any, 1, 64)
	dest[0] = &j.Name
	if cols.Config {
		dest = append(dest, &j.Team, &j.Description, &j.Schedule, &j.DBDefaultType, &j.GenerateKeytab,
			&j.EnableExecutionNotifications, &j.NotificationDelayPeriodMinutes)
	}
	if cols.Contacts {
		c := &j.Contacts
		dest = append(dest, &c.NotifiedOnJobFailureUserError, &c.NotifiedOnJobFailurePlatformError,
			&c.NotifiedOnJobSuccess, &c.NotifiedOnJobDeploy)
	}
	if cols.Deployment {
		dest = append(append(append(dest, &j.Generation, &j.UID), jr.desiredDest()...), jr.actualDest()...)
	}
	if cols.LastExecution {
		dest = append(dest, &r.LastExecution.Status, &r.LastExecution.EndTime, &r.LastExecution.DurationSeconds)
	}
	if err := rows.Scan(dest...); err != nil {
		return JobRow{}, err
	}
	r.Desired, r.Actual = jr.deployment(*j), jr.actual(*j)
	return r, nil
}

// globToLike turns a pattern where * stands for any characters into a LIKE pattern that
// matches the rest literally.
func globToLike(glob string) string {
	return strings.ReplaceAll(escapeLike(glob), "*", "%")
}

// containsLike is the LIKE pattern of "contains s".
func containsLike(s string) string { return "%" + escapeLike(s) + "%" }

func escapeLike(s string) string {
	return strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(s)
}

// Executions.

// ExecutionStatuses are the statuses of an execution, as VDK's REST API spells them.
func ExecutionStatuses() []string {
	return []string{"submitted", "running", "succeeded", "cancelled", "skipped", "user_error", "platform_error"}
}

// Execution is one execution of a data job, with a snapshot of the deployment it ran.
type Execution struct {
	ID      string
	JobName string
	// Type is manual or scheduled; Status one of ExecutionStatuses.
	Type, Status       string
	Message            string
	OpID               string
	StartTime, EndTime *time.Time
	StartedBy          string
	JobVersion         string
	JobSchedule        string
	VDKVersion         string
	PythonVersion      string
	Resources          job.Resources // zero fields: unknown
	DeployedDate       *time.Time
	DeployedBy         string
}

// ExecutionField is what executions are ordered by.
type ExecutionField int

// The orders of the executions query (VDK's DataJobExecutionOrder properties).
const (
	ExecStartTime ExecutionField = iota + 1
	ExecEndTime
	ExecID
	ExecJobName
	ExecTeam
	ExecStatus
	ExecType
	ExecMessage
	ExecOpID
	ExecStartedBy
	ExecJobVersion
	ExecJobSchedule
	ExecVDKVersion
	ExecDeployedDate
	ExecDeployedBy
)

// ExecutionFilter holds the conditions an execution must meet, all of them; zero fields
// impose none, except Visible.
type ExecutionFilter struct {
	// Visible restricts the executions to jobs of the caller's teams, whatever else the
	// filter says.
	Visible                                            Visibility
	StartTimeGte, StartTimeLte, EndTimeGte, EndTimeLte *time.Time
	StatusIn, JobNameIn, TeamNameIn                    []string
}

// ExecutionsQuery asks for a page of executions.
type ExecutionsQuery struct {
	Filter ExecutionFilter
	// Order is the sort key (default ExecStartTime, descending); the id breaks ties.
	Order ExecutionField
	Desc  bool
	// Offset and Limit page the executions (of each job, for ExecutionsOfJobs).
	Offset, Limit int
	// Count asks for the total (ignored by ExecutionsOfJobs).
	Count bool
}

// ExecutionsPage is a page of executions and, when counted, the total.
type ExecutionsPage struct {
	Rows  []Execution
	Total int // -1 when not counted
}

const executionColumns = `e.id, e.job_name, e.type, e.status, e.message, e.op_id, e.start_time, e.end_time,
	e.started_by, e.job_version, e.job_schedule, e.vdk_version, e.job_python_version,
	COALESCE(e.resources_cpu_request_millis, 0), COALESCE(e.resources_cpu_limit_millis, 0),
	COALESCE(e.resources_memory_request_bytes, 0), COALESCE(e.resources_memory_limit_bytes, 0),
	e.last_deployed_date, e.last_deployed_by`

func executionDest(e *Execution) []any {
	return []any{
		&e.ID, &e.JobName, &e.Type, &e.Status, &e.Message, &e.OpID, &e.StartTime, &e.EndTime,
		&e.StartedBy, &e.JobVersion, &e.JobSchedule, &e.VDKVersion, &e.PythonVersion,
		&e.Resources.CPURequestMillis, &e.Resources.CPULimitMillis,
		&e.Resources.MemoryRequestBytes, &e.Resources.MemoryLimitBytes,
		&e.DeployedDate, &e.DeployedBy,
	}
}

// executionWhere writes the conditions of f; it reports whether they need data_job j.
func executionWhere(b *sqlBuilder, f ExecutionFilter) (conds []string, needJob bool) {
	times := []struct {
		col, op string
		t       *time.Time
	}{
		{"e.start_time", ">=", f.StartTimeGte},
		{"e.start_time", "<=", f.StartTimeLte},
		{"e.end_time", ">=", f.EndTimeGte},
		{"e.end_time", "<=", f.EndTimeLte},
	}
	for _, t := range times {
		if t.t != nil {
			conds = append(conds, t.col+" "+t.op+" "+b.arg(*t.t))
		}
	}
	if len(f.StatusIn) > 0 {
		conds = append(conds, "e.status = ANY("+b.arg(f.StatusIn)+"::text[])")
	}
	if len(f.JobNameIn) > 0 {
		conds = append(conds, "e.job_name = ANY("+b.arg(f.JobNameIn)+"::text[])")
	}
	if len(f.TeamNameIn) > 0 {
		conds = append(conds, "j.team = ANY("+b.arg(f.TeamNameIn)+"::text[])")
		needJob = true
	}
	if c := f.Visible.where(b, "j.team"); c != "" {
		conds = append(conds, c)
		needJob = true
	}
	return conds, needJob
}

// executionOrder is the ORDER BY list of q; it reports whether it needs data_job j.
func executionOrder(q ExecutionsQuery) (string, bool) {
	cols := map[ExecutionField]string{
		ExecStartTime: "e.start_time", ExecEndTime: "e.end_time", ExecID: "e.id", ExecJobName: "e.job_name",
		ExecTeam: "j.team", ExecStatus: "e.status", ExecType: "e.type", ExecMessage: "e.message",
		ExecOpID: "e.op_id", ExecStartedBy: "e.started_by", ExecJobVersion: "e.job_version",
		ExecJobSchedule: "e.job_schedule", ExecVDKVersion: "e.vdk_version",
		ExecDeployedDate: "e.last_deployed_date", ExecDeployedBy: "e.last_deployed_by",
	}
	field, desc := q.Order, q.Desc
	if field == 0 {
		field, desc = ExecStartTime, true
	}
	col, ok := cols[field]
	if !ok {
		panic(fmt.Sprintf("store: unknown execution field %d", field))
	}
	dir := " ASC"
	if desc {
		dir = " DESC"
	}
	if field == ExecID {
		return col + dir, false
	}
	// The id breaks ties, in the same direction.
	return col + dir + " NULLS LAST, e.id" + dir, field == ExecTeam
}

// Executions reads a page of executions across jobs, with the total when asked, in one
// round trip.
func (s *Store) Executions(ctx context.Context, q ExecutionsQuery) (ExecutionsPage, error) {
	if q.Limit <= 0 || q.Offset < 0 {
		return ExecutionsPage{}, fmt.Errorf("executions page: bad limit %d or offset %d", q.Limit, q.Offset)
	}
	build := func(count bool) (string, []any) {
		b := &sqlBuilder{}
		conds, needJob := executionWhere(b, q.Filter)
		order, orderNeedsJob := executionOrder(q)
		var sb strings.Builder
		if count {
			sb.WriteString("SELECT count(*)")
		} else {
			sb.WriteString("SELECT " + executionColumns)
			needJob = needJob || orderNeedsJob
		}
		sb.WriteString("\nFROM data_job_execution e")
		if needJob {
			sb.WriteString("\nJOIN data_job j ON j.name = e.job_name")
		}
		if len(conds) > 0 {
			sb.WriteString("\nWHERE " + strings.Join(conds, " AND "))
		}
		if !count {
			sb.WriteString("\nORDER BY " + order + "\nLIMIT " + b.arg(q.Limit) + " OFFSET " + b.arg(q.Offset))
		}
		return sb.String(), b.args
	}
	page := ExecutionsPage{Total: -1}
	batch := &pgx.Batch{}
	if q.Count {
		sql, args := build(true)
		batch.Queue(sql, args...).QueryRow(func(row pgx.Row) error { return row.Scan(&page.Total) })
	}
	sql, args := build(false)
	batch.Queue(sql, args...).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var e Execution
			if err := rows.Scan(executionDest(&e)...); err != nil {
				return err
			}
			page.Rows = append(page.Rows, e)
		}
		return rows.Err()
	})
	if err := s.pool.SendBatch(ctx, batch).Close(); err != nil {
		return ExecutionsPage{}, translate(fmt.Errorf("read executions page: %w", err))
	}
	return page, nil
}

// ExecutionsOfJobs reads the executions of each of the jobs names, filtered, ordered and
// paged per job as q says, in one statement. Jobs without executions are absent.
func (s *Store) ExecutionsOfJobs(ctx context.Context, names []string, q ExecutionsQuery) (map[string][]Execution, error) {
	if q.Limit <= 0 || q.Offset < 0 {
		return nil, fmt.Errorf("executions of jobs: bad limit %d or offset %d", q.Limit, q.Offset)
	}
	if len(names) == 0 {
		return map[string][]Execution{}, nil
	}
	b := &sqlBuilder{}
	conds, needJob := executionWhere(b, q.Filter)
	conds = append(conds, "e.job_name = ANY("+b.arg(names)+"::text[])")
	order, orderNeedsJob := executionOrder(q)
	join := ""
	if needJob || orderNeedsJob {
		join = " JOIN data_job j ON j.name = e.job_name"
	}
	sql := `SELECT * FROM (
	SELECT ` + executionColumns + `, row_number() OVER (PARTITION BY e.job_name ORDER BY ` + order + `) AS rn
	FROM data_job_execution e` + join + `
	WHERE ` + strings.Join(conds, " AND ") + `
) x WHERE rn > ` + b.arg(q.Offset) + ` AND rn <= ` + b.arg(q.Offset+q.Limit) + `
ORDER BY job_name, rn`
	rows, err := s.pool.Query(ctx, sql, b.args...)
	if err != nil {
		return nil, translate(fmt.Errorf("read executions of jobs: %w", err))
	}
	defer rows.Close()
	out := map[string][]Execution{}
	for rows.Next() {
		var (
			e  Execution
			rn int64
		)
		if err := rows.Scan(append(executionDest(&e), &rn)...); err != nil {
			return nil, fmt.Errorf("read executions of jobs: %w", err)
		}
		out[e.JobName] = append(out[e.JobName], e)
	}
	if err := rows.Err(); err != nil {
		return nil, translate(fmt.Errorf("read executions of jobs: %w", err))
	}
	return out, nil
}

// ExecutionCount counts the finished executions of a job by outcome.
type ExecutionCount struct {
	Succeeded int
	// Failed counts user and platform errors.
	Failed int
}

// ExecutionCounts counts the executions of each of the jobs names, in one statement.
// Jobs without executions are absent.
func (s *Store) ExecutionCounts(ctx context.Context, names []string) (map[string]ExecutionCount, error) {
	const q = `SELECT job_name, count(*) FILTER (WHERE status = 'succeeded'),
	count(*) FILTER (WHERE status IN ('user_error', 'platform_error'))
FROM data_job_execution WHERE job_name = ANY($1::text[]) GROUP BY job_name`
	if len(names) == 0 {
		return map[string]ExecutionCount{}, nil
	}
	rows, err := s.pool.Query(ctx, q, names)
	if err != nil {
		return nil, translate(fmt.Errorf("count executions: %w", err))
	}
	defer rows.Close()
	out := map[string]ExecutionCount{}
	for rows.Next() {
		var (
			name string
			c    ExecutionCount
		)
		if err := rows.Scan(&name, &c.Succeeded, &c.Failed); err != nil {
			return nil, fmt.Errorf("count executions: %w", err)
		}
		out[name] = c
	}
	return out, translate(rows.Err())
}

// ListJobExecutions reads every execution of the job name of team, newest first (not yet
// started ones first of all), with one of statuses when any are given. A job that does not
// exist in team is not found.
func (s *Store) ListJobExecutions(ctx context.Context, team, name string, statuses []string) ([]Execution, error) {
	const q = `SELECT e.id IS NOT NULL, ` + executionColumnsNullable + `
FROM data_job j
LEFT JOIN data_job_execution e ON e.job_name = j.name AND (cardinality($3::text[]) = 0 OR e.status = ANY($3::text[]))
WHERE j.name = $1 AND j.team = $2
ORDER BY e.start_time DESC NULLS FIRST, e.id DESC`
	if statuses == nil {
		statuses = []string{}
	}
	rows, err := s.pool.Query(ctx, q, name, team, statuses)
	if err != nil {
		return nil, translate(fmt.Errorf("list executions of %s: %w", name, err))
	}
	defer rows.Close()
	found := false
	out := []Execution{}
	for rows.Next() {
		found = true
		var (
			e   Execution
			has bool
		)
		if err := rows.Scan(append([]any{&has}, executionDest(&e)...)...); err != nil {
			return nil, fmt.Errorf("list executions of %s: %w", name, err)
		}
		if has {
			out = append(out, e)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, translate(fmt.Errorf("list executions of %s: %w", name, err))
	}
	if !found {
		return nil, job.JobNotFound(team, name)
	}
	return out, nil
}

// executionColumnsNullable is executionColumns for a LEFT JOIN: absent rows scan as zero
// values.
const executionColumnsNullable = `COALESCE(e.id, ''), COALESCE(e.job_name, ''), COALESCE(e.type, ''),
	COALESCE(e.status, ''), COALESCE(e.message, ''), COALESCE(e.op_id, ''), e.start_time, e.end_time,
	COALESCE(e.started_by, ''), COALESCE(e.job_version, ''), COALESCE(e.job_schedule, ''),
	COALESCE(e.vdk_version, ''), COALESCE(e.job_python_version, ''),
	COALESCE(e.resources_cpu_request_millis, 0), COALESCE(e.resources_cpu_limit_millis, 0),
	COALESCE(e.resources_memory_request_bytes, 0), COALESCE(e.resources_memory_limit_bytes, 0),
	e.last_deployed_date, COALESCE(e.last_deployed_by, '')`
