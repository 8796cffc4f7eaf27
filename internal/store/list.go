package store

import (
	"cmp"
	"context"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/datajobs/datajobs/internal/job"
)

// Lists of jobs (job.ListRequest): every filter, search and sort is evaluated by
// PostgreSQL, and a page is one statement (plus one for the total, in the same round
// trip), with the deployments joined in, never one query per job. The statement orders
// and skips narrow rows (the names and sort keys) and reads the whole rows of the page
// only: a deep page or an order over all jobs sorts no wide rows. The values the list
// orders by that are expressions over a job and its deployments (enabled, the sync status,
// the key of the deployment's next run) are read from data_job_list, where triggers keep
// them in indexed columns (migration 0030), so that each order is an index scan. The one
// thing PostgreSQL cannot compute is the next run of a cron schedule: the caller passes a
// NextRunFunc, called once per distinct schedule; a sort by a next run alone pages along
// the groups of jobs per schedule (listnext.go).

// NextRunFunc is the next run (epoch seconds) of a schedule, as a list counts it: a job
// configuration's schedule, or a deployment's in its time zone (job.ZonedSchedule); false
// when the schedule never runs (empty, invalid).
type NextRunFunc = func(schedule string) (int64, bool)

// ListJobs reads one page of jobs. nextRun is required when r.UsesNextRun().
func (s *Store) ListJobs(ctx context.Context, r job.ListRequest, nextRun NextRunFunc) (job.ListPage, error) {
	if r.Limit <= 0 || r.Offset < 0 {
		return job.ListPage{}, fmt.Errorf("list jobs: bad limit %d or offset %d", r.Limit, r.Offset)
	}
	if r.UsesNextRun() && nextRun == nil {
		return job.ListPage{}, fmt.Errorf("list jobs: the next runs of the schedules are required to filter or sort on them")
	}
	if pagesByNextRunGroups(r) {
		return s.listByNextRun(ctx, r, nextRun)
	}
	var nextRuns map[string]int64
	if r.UsesNextRun() {
		schedules, err := s.jobSchedules(ctx, r)
		if err != nil {
			return job.ListPage{}, err
		}
		nextRuns = make(map[string]int64, len(schedules))
		for _, sch := range schedules {
			if next, ok := nextRun(sch); ok {
				nextRuns[sch] = next
			}
		}
	}
	page := job.ListPage{Total: -1}
	batch := &pgx.Batch{}
	if r.Count {
		sql, args := countSQL(r, nextRuns)
		batch.Queue(sql, args...).QueryRow(func(row pgx.Row) error { return row.Scan(&page.Total) })
	}
	sql, args := listSQL(r, nextRuns, listPage)
	batch.Queue(sql, args...).Query(func(rows pgx.Rows) error {
		var err error
		page.Jobs, err = scanPage(rows, r)
		return err
	})
	if err := s.reads(ctx).SendBatch(ctx, batch).Close(); err != nil {
		return job.ListPage{}, translate(fmt.Errorf("list jobs: %w", err))
	}
	return page, nil
}

// scanPage reads the rows of a page statement (pageSQL).
func scanPage(rows pgx.Rows, r job.ListRequest) ([]job.Listed, error) {
	var out []job.Listed
	for rows.Next() {
		var (
			l  job.Listed
			jr joined
		)
		dest := append(jobDest(&l.Job), &l.LastExecution.Status, &l.LastExecution.EndTime, &l.LastExecution.DurationSeconds)
		if r.WithDeployments {
			dest = append(append(append(dest, jr.desiredDest()...), jr.actualDest()...), &l.Status)
		}
		if err := rows.Scan(dest...); err != nil {
			return nil, err
		}
		l.Desired, l.Actual = jr.deployment(l.Job), jr.actual(l.Job)
		out = append(out, l)
	}
	return out, rows.Err()
}

// jobSchedules reads the distinct schedules of the jobs r's filter lets through, before
// any condition on the next run.
func (s *Store) jobSchedules(ctx context.Context, r job.ListRequest) ([]string, error) {
	sql, args := listSQL(r, nil, listSchedules)
	rows, err := s.reads(ctx).Query(ctx, sql, args...)
	if err != nil {
		return nil, translate(fmt.Errorf("read job schedules: %w", err))
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	return out, translate(err)
}

// countSQL counts the jobs r's filter lets through: from the kept counts per team when
// the filter is the caller's teams and at most one team (data_job_list_count, migration
// 0031), else by reading them.
func countSQL(r job.ListRequest, nextRuns map[string]int64) (string, []any) {
	if !countedPerTeam(r.Filter) {
		return listSQL(r, nextRuns, listCount)
	}
	b := &sqlBuilder{}
	return "SELECT COALESCE(sum(jobs), 0)::bigint FROM data_job_list_count c" + teamsWhere(b, r.Filter, "c.team"), b.args
}

// countedPerTeam reports whether f selects whole teams only (the caller's, and at most
// one named team), whose jobs data_job_list_count holds. Any other condition, including
// one a later field of ListFilter adds, is counted by reading the jobs.
func countedPerTeam(f job.ListFilter) bool {
	f.Visible, f.SearchFields = job.Visibility{}, nil
	if !strings.Contains(f.TeamGlob, "*") {
		f.TeamGlob = ""
	}
	return reflect.ValueOf(f).IsZero()
}

// teamsWhere is the WHERE of the teams f selects on the team column col, for a filter
// countedPerTeam accepts ("" when every team is).
func teamsWhere(b *sqlBuilder, f job.ListFilter, col string) string {
	var conds []string
	if c := b.visible(f.Visible, col); c != "" {
		conds = append(conds, c)
	}
	if team := strings.ToLower(strings.TrimSpace(f.TeamGlob)); team != "" {
		conds = append(conds, col+" = "+b.arg(team))
	}
	if len(conds) == 0 {
		return ""
	}
	return " WHERE " + strings.Join(conds, " AND ")
}

type listMode int

const (
	listPage      listMode = iota // the rows of the page
	listCount                     // the number of jobs that pass the filter
	listSchedules                 // the distinct schedules of those jobs, before any next-run condition
)

// sqlBuilder collects the parameters of one statement. base is the alias of the table the
// statement reads jobs from, whose name and team it uses: data_job_list k when it reads a
// value kept there (or reads nothing of the job's own row), else data_job j.
type sqlBuilder struct {
	args []any
	base string
}

// col is the column name of the base table.
func (b *sqlBuilder) col(name string) string { return cmp.Or(b.base, "k") + "." + name }

// arg adds a parameter and returns its placeholder.
func (b *sqlBuilder) arg(v any) string {
	b.args = append(b.args, v)
	return "$" + strconv.Itoa(len(b.args))
}

// visible returns the condition on the team column col, or "" when every team is visible.
func (b *sqlBuilder) visible(v job.Visibility, col string) string {
	if v.AllTeams {
		return ""
	}
	return col + " = ANY(" + b.arg(append([]string{}, v.Teams...)) + "::text[])"
}

// listNeeds is what a statement joins to data_job_list k: the job j, the deployments
// (d, a) and the next runs of the schedules.
type listNeeds struct {
	key, job, deployment, nextRun, deploymentNextRun bool
}

// base is the alias of the table n reads jobs from (sqlBuilder.base).
func (n listNeeds) base() string {
	if n.job && !n.key {
		return "j"
	}
	return "k"
}

// jobFields and deploymentFields are the fields read from the job's row and from its
// deployments' rather than from data_job_list.
var (
	jobFields = []job.ListField{
		job.FieldDescription, job.FieldSchedule, job.FieldNextRun, job.FieldContactsPresent,
		job.FieldLastExecutionStatus, job.FieldLastExecutionTime, job.FieldLastExecutionDuration,
	}
	deploymentFields = []job.ListField{job.FieldPythonVersion}
	keyFields        = []job.ListField{job.FieldDeploymentEnabled, job.FieldSyncStatus, job.FieldDeploymentNextRun}
)

// needsOf decides the joins of mode for r: only what its filter, search and sort read.
func needsOf(r job.ListRequest, mode listMode) listNeeds {
	f := r.Filter
	var fields []job.ListField
	if f.Search != "" {
		fields = cmpOr(f.SearchFields, []job.ListField{job.FieldName})
	}
	if mode == listPage {
		for _, k := range r.Sort {
			fields = append(fields, k.Field)
		}
	}
	uses := func(in []job.ListField) bool {
		return slices.ContainsFunc(fields, func(f job.ListField) bool { return slices.Contains(in, f) })
	}
	n := listNeeds{deploymentNextRun: slices.ContainsFunc(r.Sort, func(s job.SortKey) bool { return s.Field == job.FieldDeploymentNextRun })}
	n.nextRun = mode != listSchedules && (f.NextRun != nil || (mode == listPage && r.UsesNextRun()))
	n.deployment = f.PythonVersionContains != "" || uses(deploymentFields)
	n.key = f.Status != "" || f.Deployment != "" || uses(keyFields) || (mode == listSchedules && n.deploymentNextRun)
	n.job = n.deployment || f.DescriptionContains != "" || f.ScheduleContains != "" || f.LastExecutionStatus != "" ||
		f.LastExecutionTime != nil || f.NextRun != nil || mode == listSchedules || uses(jobFields)
	return n
}

// listSQL writes the statement of mode for r: every mode shares the FROM and WHERE of the
// filter; the page orders and skips names in an inner statement and reads their rows.
func listSQL(r job.ListRequest, nextRuns map[string]int64, mode listMode) (string, []any) {
	n := needsOf(r, mode)
	b := &sqlBuilder{base: n.base()}
	var sb strings.Builder
	sb.WriteString(listSelect(b, mode, n))
	sb.WriteString(listFrom(b, nextRuns, n))
	if where := listWhere(b, r, mode); len(where) > 0 {
		sb.WriteString("\nWHERE " + strings.Join(where, "\n  AND "))
	}
	if mode == listPage {
		sb.WriteString(listOrder(b, r))
		return pageSQL(r, sb.String()), b.args
	}
	return sb.String(), b.args
}

// listSelect is the SELECT of mode; the page's is the inner statement of names.
func listSelect(b *sqlBuilder, mode listMode, n listNeeds) string {
	switch mode {
	case listCount:
		return "SELECT count(*)"
	case listSchedules:
		if n.deploymentNextRun { // the deployments' schedules too
			return "SELECT DISTINCT unnest(ARRAY[j.schedule, k.next_run_key])"
		}
		return "SELECT DISTINCT j.schedule"
	}
	return "SELECT " + b.col("name")
}

// pageSQL is the statement of a page: the whole rows of the names the statement names
// yields, in its order.
func pageSQL(r job.ListRequest, names string) string {
	s := "SELECT " + jobColumns + ", COALESCE(j.last_execution_status, ''), j.last_execution_end_time, j.last_execution_duration"
	if r.WithDeployments {
		s += ", " + joinedDesiredColumns + ", " + joinedActualColumns + ", COALESCE(" + syncStatusExpr + ", '')"
	}
	s += "\nFROM unnest(ARRAY(" + names + ")) WITH ORDINALITY AS page(name, n)\nJOIN data_job j ON j.name = page.name"
	if r.WithDeployments {
		s += joinDeployments
	}
	return s + "\nORDER BY page.n"
}

// syncStatusExpr is job.Listed.Status over the job j and its deployments d and a, as the
// REST API reports it, which the page shows; data_job_list.sync_status (migration 0030),
// what the list filters and sorts by, is the same expression over its copies of their
// columns.
const syncStatusExpr = "CASE WHEN d.data_job_name IS NOT NULL THEN CASE WHEN d.status_generation < j.generation THEN 'pending' ELSE d.status END" +
	" WHEN a.data_job_name IS NOT NULL THEN 'deleting' END"

// listFrom is the FROM of the filter, with the joins n needs.
func listFrom(b *sqlBuilder, nextRuns map[string]int64, n listNeeds) string {
	s := "\nFROM data_job j"
	if n.base() == "k" {
		s = "\nFROM data_job_list k"
		if n.job {
			s += "\nJOIN data_job j ON j.name = k.name"
		}
	}
	if n.deployment {
		s += joinDeployments
	}
	if !n.nextRun {
		return s
	}
	schedules, runs := make([]string, 0, len(nextRuns)), make([]int64, 0, len(nextRuns))
	for sched, next := range nextRuns {
		schedules, runs = append(schedules, sched), append(runs, next)
	}
	table := "unnest(" + b.arg(schedules) + "::text[], " + b.arg(runs) + "::bigint[])"
	if n.job {
		s += "\nLEFT JOIN " + table + " AS nr(schedule, next_run) ON nr.schedule = j.schedule"
	}
	if n.deploymentNextRun {
		s += "\nLEFT JOIN " + table + " AS dnr(schedule, next_run) ON dnr.schedule = k.next_run_key"
	}
	return s
}

// listWhere is the conditions of r's filter (the next run's only outside listSchedules).
func listWhere(b *sqlBuilder, r job.ListRequest, mode listMode) []string {
	f := r.Filter
	var where []string
	add := func(cond string) {
		if cond != "" {
			where = append(where, cond)
		}
	}
	contains := func(expr, s string) {
		if s != "" {
			add(expr + " ILIKE " + b.arg(containsLike(s)))
		}
	}
	add(b.visible(f.Visible, b.col("team")))
	add(nameTeamWhere(b, f))
	contains("j.description", f.DescriptionContains)
	contains("(j.schedule || ' ' || j.hashed_schedule)", f.ScheduleContains) // resolved or as sent (H)
	if f.SourceURLContains != "" {
		contains(listExpr(b, r, job.FieldSourceURL), f.SourceURLContains)
	}
	if f.Status != "" {
		add("k.sync_status = " + b.arg(string(f.Status)))
	}
	add(deploymentWhere[f.Deployment])
	contains("COALESCE(d.python_version, a.python_version)", f.PythonVersionContains)
	if f.LastExecutionStatus != "" {
		add("j.last_execution_status = " + b.arg(f.LastExecutionStatus))
	}
	if t := f.LastExecutionTime; t != nil {
		// Clamped to the years PostgreSQL and Go agree on, so that no range is an error.
		const maxEpoch = 253402300799 // 9999-12-31T23:59:59Z
		from, to := time.Unix(min(max(t.From, 0), maxEpoch), 0), time.Unix(min(max(t.To, 0), maxEpoch), 0)
		add("j.last_execution_end_time BETWEEN " + b.arg(from) + " AND " + b.arg(to))
	}
	if t := f.NextRun; t != nil && mode != listSchedules {
		add("nr.next_run BETWEEN " + b.arg(t.From) + " AND " + b.arg(t.To))
	}
	if f.Search != "" {
		p := b.arg(containsLike(f.Search))
		searchFields := cmpOr(f.SearchFields, []job.ListField{job.FieldName})
		ors := make([]string, len(searchFields))
		for i, field := range searchFields {
			ors[i] = listExpr(b, r, field) + " ILIKE " + p
		}
		add("(" + strings.Join(ors, " OR ") + ")")
	}
	return where
}

// nameTeamWhere is the condition of the name and team patterns, "" without any.
func nameTeamWhere(b *sqlBuilder, f job.ListFilter) string {
	var conds []string
	if f.NameGlob != "" {
		// Job names are lower case (validation), so a lower-case pattern ignores case and
		// can use an index.
		conds = append(conds, b.col("name")+" LIKE "+b.arg(globToLike(strings.ToLower(f.NameGlob))))
	}
	if team := strings.ToLower(strings.TrimSpace(f.TeamGlob)); team != "" { // team names are lower case too
		if strings.Contains(team, "*") {
			conds = append(conds, b.col("team")+" LIKE "+b.arg(globToLike(team)))
		} else {
			conds = append(conds, b.col("team")+" = "+b.arg(team))
		}
	}
	return strings.Join(conds, "\n  AND ")
}

// deploymentWhere is the condition of each deployment filter.
var deploymentWhere = map[job.DeploymentState]string{
	job.DeploymentEnabled:  "k.enabled IS TRUE",
	job.DeploymentDisabled: "k.enabled IS FALSE",
	job.NotDeployed:        "k.enabled IS NULL", // no desired deployment, nor an actual one of this incarnation
}

// listOrder is the inner statement's ORDER BY and LIMIT; the job name breaks ties.
func listOrder(b *sqlBuilder, r job.ListRequest) string {
	var order []string
	for _, s := range r.Sort {
		order = append(order, listExpr(b, r, s.Field)+map[bool]string{false: " ASC", true: " DESC"}[s.Desc]+" NULLS LAST")
	}
	if !slices.ContainsFunc(r.Sort, func(s job.SortKey) bool { return s.Field == job.FieldName }) {
		order = append(order, b.col("name"))
	}
	return "\nORDER BY " + strings.Join(order, ", ") + "\nLIMIT " + b.arg(r.Limit) + " OFFSET " + b.arg(r.Offset)
}

// joinDeployments joins a job's desired deployment and the actual one of its incarnation.
const joinDeployments = "\nLEFT JOIN desired_data_job_deployment d ON d.data_job_name = j.name" +
	"\nLEFT JOIN actual_data_job_deployment a ON a.data_job_name = j.name AND a.job_uid = j.uid"

// listColumns are the SQL expressions of the fields a list sorts and searches on
// (FieldSourceURL is built from the request's template).
var listColumns = map[job.ListField]string{
	job.FieldDescription: "j.description",
	job.FieldSchedule:    "j.schedule",
	job.FieldNextRun:     "nr.next_run",
	job.FieldContactsPresent: "(cardinality(j.notified_on_job_failure_user_error) + cardinality(j.notified_on_job_failure_platform_error)" +
		" + cardinality(j.notified_on_job_success) + cardinality(j.notified_on_job_deploy) > 0)",
	job.FieldDeploymentEnabled:     "k.enabled",
	job.FieldPythonVersion:         "COALESCE(d.python_version, a.python_version)",
	job.FieldLastExecutionStatus:   "j.last_execution_status",
	job.FieldLastExecutionTime:     "j.last_execution_end_time",
	job.FieldLastExecutionDuration: "j.last_execution_duration",
	job.FieldDeploymentNextRun:     "dnr.next_run",  // the key is '' unless enabled with a schedule
	job.FieldSyncStatus:            "k.sync_status", // Listed.Status: NULL when not deployed
}

// listExpr is the SQL expression of a field.
func listExpr(b *sqlBuilder, r job.ListRequest, f job.ListField) string {
	if f == job.FieldSourceURL {
		// The template's parts, concatenated; NULL when jobs have no source URL.
		if r.SourceURL == "" {
			return "NULL::text"
		}
		var parts []string
		for _, p := range r.SourceURL.Parts() {
			if p.Field != 0 {
				parts = append(parts, listExpr(b, r, p.Field))
			} else {
				parts = append(parts, b.arg(p.Literal)+"::text")
			}
		}
		if len(parts) == 0 {
			return "''::text"
		}
		return "concat(" + strings.Join(parts, ", ") + ")"
	}
	switch f {
	case job.FieldName:
		return b.col("name")
	case job.FieldTeam:
		return b.col("team")
	}
	col, ok := listColumns[f]
	if !ok {
		panic(fmt.Sprintf("store: unknown job field %d", f))
	}
	return col
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

// cmpOr returns s, or def when s is empty.
func cmpOr[T any](s, def []T) []T {
	if len(s) == 0 {
		return def
	}
	return s
}

// Teams returns the teams that own at least one job, sorted: the teams an admin's query
// could show, for the authorization webhook to be asked about each.
func (s *Store) Teams(ctx context.Context) ([]string, error) {
	rows, err := s.reads(ctx).Query(ctx, `SELECT DISTINCT team FROM data_job ORDER BY team`)
	if err != nil {
		return nil, translate(fmt.Errorf("list teams: %w", err))
	}
	teams, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, translate(fmt.Errorf("list teams: %w", err))
	}
	return teams, nil
}
