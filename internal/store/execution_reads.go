package store

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/datajobs/datajobs/internal/job"
)

// The reads of executions: pages across jobs, pages per job of a list, counts.

// Executions.

const executionColumns = `e.id, e.job_name, e.type, e.status, e.message, e.op_id, e.start_time, e.end_time,
	e.started_by, e.job_version, e.job_schedule, e.vdk_version, e.job_python_version,
	COALESCE(e.resources_cpu_request_millis, 0), COALESCE(e.resources_cpu_limit_millis, 0),
	COALESCE(e.resources_memory_request_bytes, 0), COALESCE(e.resources_memory_limit_bytes, 0),
	e.last_deployed_date, e.last_deployed_by, e.args, e.exit_code, e.termination_reason,
	e.logical_time, COALESCE(e.backfill_id, 0), COALESCE(e.rerun_of, '')`

func executionDest(e *job.Execution) []any {
	return []any{
		&e.ID, &e.JobName, &e.Type, &e.Status, &e.Message, &e.OpID, &e.StartTime, &e.EndTime,
		&e.StartedBy, &e.JobVersion, &e.JobSchedule, &e.VDKVersion, &e.PythonVersion,
		&e.Resources.CPURequestMillis, &e.Resources.CPULimitMillis,
		&e.Resources.MemoryRequestBytes, &e.Resources.MemoryLimitBytes,
		&e.DeployedDate, &e.DeployedBy, &e.Args, &e.ExitCode, &e.TerminationReason,
		&e.LogicalTime, &e.BackfillID, &e.RerunOf,
	}
}

// executionsFrom is the FROM and WHERE of the executions f lets through, with the
// conditions extra. current keeps only the executions of jobs that exist, of their
// current incarnation (a job's own lists: a same-name job created after a delete sees none
// of the old runs); without it the rows of deleted jobs' runs are read too, until
// retention removes them (DESIGN.md invariant 11).
func executionsFrom(b *sqlBuilder, f job.ExecutionFilter, current bool, extra ...string) string {
	conds := extra
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
		conds = append(conds, "e.team = ANY("+b.arg(f.TeamNameIn)+"::text[])")
	}
	if c := b.visible(f.Visible, "e.team"); c != "" {
		conds = append(conds, c)
	}
	from := "\nFROM data_job_execution e"
	if current {
		from += "\nJOIN data_job j ON j.name = e.job_name AND j.uid = e.job_uid"
	}
	if len(conds) > 0 {
		from += "\nWHERE " + strings.Join(conds, " AND ")
	}
	return from
}

// executionOrder is the ORDER BY list of q.
func executionOrder(q job.ExecutionsQuery) string {
	cols := map[job.ExecutionField]string{
		job.ExecByStartTime: "e.start_time", job.ExecByEndTime: "e.end_time", job.ExecByID: "e.id", job.ExecByJobName: "e.job_name",
		job.ExecByTeam: "e.team", job.ExecByStatus: "e.status", job.ExecByType: "e.type", job.ExecByMessage: "e.message",
		job.ExecByOpID: "e.op_id", job.ExecByStartedBy: "e.started_by", job.ExecByJobVersion: "e.job_version",
		job.ExecByJobSchedule: "e.job_schedule", job.ExecByVDKVersion: "e.vdk_version",
		job.ExecByDeployedDate: "e.last_deployed_date", job.ExecByDeployedBy: "e.last_deployed_by",
	}
	field, desc := q.Order, q.Desc
	if field == 0 {
		field, desc = job.ExecByStartTime, true
	}
	col, ok := cols[field]
	if !ok {
		panic(fmt.Sprintf("store: unknown execution field %d", field))
	}
	dir := " ASC"
	if desc {
		dir = " DESC"
	}
	if field == job.ExecByID {
		return col + dir
	}
	// The id breaks ties, in the same direction.
	return col + dir + " NULLS LAST, e.id" + dir
}

// Executions reads a page of executions across jobs, with the total when asked, in one
// round trip. The page orders and skips narrow rows (the ids with their sort key) and
// reads the whole rows of the page's ids only, as a jobs page does (list.go): a page of
// 1000 or a deep one sorts no wide rows.
func (s *Store) Executions(ctx context.Context, q job.ExecutionsQuery) (job.ExecutionsPage, error) {
	if q.Limit <= 0 || q.Offset < 0 {
		return job.ExecutionsPage{}, fmt.Errorf("executions page: bad limit %d or offset %d", q.Limit, q.Offset)
	}
	page := job.ExecutionsPage{Total: -1}
	batch := &pgx.Batch{}
	if q.Count {
		b := &sqlBuilder{}
		batch.Queue("SELECT count(*)"+executionsFrom(b, q.Filter, false), b.args...).QueryRow(func(row pgx.Row) error { return row.Scan(&page.Total) })
	}
	b := &sqlBuilder{}
	ids := "SELECT e.id" + executionsFrom(b, q.Filter, false) +
		"\nORDER BY " + executionOrder(q) + "\nLIMIT " + b.arg(q.Limit) + " OFFSET " + b.arg(q.Offset)
	sql := "SELECT " + executionColumns + "\nFROM unnest(ARRAY(" + ids + ")) WITH ORDINALITY AS page(id, n)" +
		"\nJOIN data_job_execution e ON e.id = page.id\nORDER BY page.n"
	batch.Queue(sql, b.args...).Query(func(rows pgx.Rows) error {
		var err error
		page.Rows, err = pgx.CollectRows(rows, scanExecution)
		return err
	})
	if err := s.reads(ctx).SendBatch(ctx, batch).Close(); err != nil {
		return job.ExecutionsPage{}, translate(fmt.Errorf("read executions page: %w", err))
	}
	return page, nil
}

// ExecutionsOfJobs reads the executions of each of the jobs names, filtered, ordered and
// paged per job as q says, in one statement. Jobs without executions are absent. Each
// job's page is its own narrow top-N (the ids of that job's executions, along the
// (job_name, start_time) index), and only the pages' whole rows are read: a page of 1000
// jobs reads 1000 small sorts, never every execution of them sorted at once.
func (s *Store) ExecutionsOfJobs(ctx context.Context, names []string, q job.ExecutionsQuery) (map[string][]job.Execution, error) {
	if q.Limit <= 0 || q.Offset < 0 {
		return nil, fmt.Errorf("executions of jobs: bad limit %d or offset %d", q.Limit, q.Offset)
	}
	if len(names) == 0 {
		return map[string][]job.Execution{}, nil
	}
	b := &sqlBuilder{}
	jobs := b.arg(names)
	ids := "SELECT e.id" + executionsFrom(b, q.Filter, true, "e.job_name = p.name") +
		"\n\tORDER BY " + executionOrder(q) + " LIMIT " + b.arg(q.Limit) + " OFFSET " + b.arg(q.Offset)
	sql := "SELECT " + executionColumns + "\nFROM unnest(" + jobs + "::text[]) WITH ORDINALITY AS p(name, n)" +
		"\nCROSS JOIN LATERAL unnest(ARRAY(" + ids + ")) WITH ORDINALITY AS x(id, rn)" +
		"\nJOIN data_job_execution e ON e.id = x.id\nORDER BY p.n, x.rn"
	rows, err := s.reads(ctx).Query(ctx, sql, b.args...)
	if err != nil {
		return nil, translate(fmt.Errorf("read executions of jobs: %w", err))
	}
	all, err := pgx.CollectRows(rows, scanExecution) // a fresh Execution per row: Args is a map
	if err != nil {
		return nil, translate(fmt.Errorf("read executions of jobs: %w", err))
	}
	out := map[string][]job.Execution{}
	for _, e := range all {
		out[e.JobName] = append(out[e.JobName], e)
	}
	return out, nil
}

// ExecutionCounts counts the executions of each of the jobs names, in one statement.
// Jobs without executions are absent.
func (s *Store) ExecutionCounts(ctx context.Context, names []string) (map[string]job.ExecutionCount, error) {
	const q = `SELECT e.job_name, count(*) FILTER (WHERE status = 'succeeded'),
	count(*) FILTER (WHERE status IN ('user_error', 'platform_error'))
FROM data_job_execution e JOIN data_job j ON j.name = e.job_name AND j.uid = e.job_uid
WHERE e.job_name = ANY($1::text[]) GROUP BY e.job_name`
	if len(names) == 0 {
		return map[string]job.ExecutionCount{}, nil
	}
	rows, _ := s.reads(ctx).Query(ctx, q, names)
	out := map[string]job.ExecutionCount{}
	var (
		name string
		c    job.ExecutionCount
	)
	_, err := pgx.ForEachRow(rows, []any{&name, &c.Succeeded, &c.Failed}, func() error {
		out[name] = c
		return nil
	})
	return out, rowError(err, nil, "count executions")
}

// ListJobExecutions reads every execution of the job name of team, newest first (not yet
// started ones first of all), with one of statuses when any are given. A job that does not
// exist in team is not found.
func (s *Store) ListJobExecutions(ctx context.Context, team, name string, statuses []string) ([]job.Execution, error) {
	const q = `SELECT ` + executionColumns + ` FROM data_job_execution e JOIN data_job j ON j.name = e.job_name AND j.uid = e.job_uid
WHERE j.name = $1 AND j.team = $2 AND (cardinality($3::text[]) = 0 OR e.status = ANY($3::text[]))
ORDER BY e.start_time DESC NULLS FIRST, e.id DESC`
	rows, err := s.reads(ctx).Query(ctx, q, name, team, nonNil(statuses))
	if err != nil {
		return nil, translate(fmt.Errorf("list executions of %s: %w", name, err))
	}
	out, err := pgx.CollectRows(rows, scanExecution)
	if err != nil {
		return nil, translate(fmt.Errorf("list executions of %s: %w", name, err))
	}
	if len(out) == 0 { // none, or no such job
		_, err = s.GetJob(ctx, team, name)
	}
	return out, err
}

// scanExecution reads a row of executionColumns.
func scanExecution(row pgx.CollectableRow) (job.Execution, error) {
	var e job.Execution
	err := row.Scan(executionDest(&e)...)
	return e, err
}
