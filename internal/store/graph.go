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
	Visible                                            job.Visibility
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
	if c := b.visible(f.Visible, "j.team"); c != "" {
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
		var err error
		page.Rows, err = pgx.CollectRows(rows, scanExecution)
		return err
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
	if err == nil {
		var all []Execution
		all, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (Execution, error) {
			var e Execution
			var rn int64
			err := row.Scan(append(executionDest(&e), &rn)...)
			return e, err
		})
		out := map[string][]Execution{}
		for _, e := range all {
			out[e.JobName] = append(out[e.JobName], e)
		}
		if err == nil {
			return out, nil
		}
	}
	return nil, translate(fmt.Errorf("read executions of jobs: %w", err))
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
	const q = `SELECT ` + executionColumns + ` FROM data_job_execution e JOIN data_job j ON j.name = e.job_name
WHERE j.name = $1 AND j.team = $2 AND (cardinality($3::text[]) = 0 OR e.status = ANY($3::text[]))
ORDER BY e.start_time DESC NULLS FIRST, e.id DESC`
	rows, err := s.pool.Query(ctx, q, name, team, nonNil(statuses))
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
func scanExecution(row pgx.CollectableRow) (Execution, error) {
	var e Execution
	err := row.Scan(executionDest(&e)...)
	return e, err
}
