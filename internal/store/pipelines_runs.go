package store

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5"

	pl "github.com/datajobs/datajobs/internal/pipeline"
)

// runColumns are read by scanRun from a pipeline_run r.
const runColumns = `r.id, r.status, r.logical_time, r.start_time, r.end_time, r.pipeline_name, r.started_by`

func scanRun(row pgx.CollectableRow) (pl.Run, error) {
	var r pl.Run
	var status string
	err := row.Scan(&r.ID, &status, &r.LogicalTime, &r.StartTime, &r.EndTime, &r.PipelineName, &r.StartedBy)
	r.Status = pl.RunStatus(status)
	return r, err
}

// ListPipelineRuns reads page (from 1) of size of the runs of the pipeline name of team,
// newest first, without their nodes.
func (s *Store) ListPipelineRuns(ctx context.Context, team, name string, page, size int) (pl.Page[pl.Run], error) {
	var out pl.Page[pl.Run]
	var pid int64
	err := s.pool.QueryRow(ctx, `SELECT id FROM pipeline WHERE team = $1 AND name = $2`, team, name).Scan(&pid)
	if err != nil {
		return out, rowError(err, pl.NotFound(team, name), "read pipeline "+name)
	}
	rows, _ := s.pool.Query(ctx, `SELECT `+runColumns+` FROM pipeline_run r WHERE r.pipeline_id = $1 ORDER BY r.id DESC LIMIT $2 OFFSET $3`,
		pid, size, (page-1)*size)
	if out.Items, err = pgx.CollectRows(rows, scanRun); err != nil {
		return out, translate(fmt.Errorf("list runs of %s: %w", name, err))
	}
	err = s.pool.QueryRow(ctx, `SELECT count(*) FROM pipeline_run WHERE pipeline_id = $1`, pid).Scan(&out.TotalItems)
	return out, rowError(err, nil, "count runs of "+name)
}

// nodeRunsQuery reads the latest attempt of each node of the run $1, with its execution's
// status when it has one, in the spec's order.
const nodeRunsQuery = `SELECT nr.node, nr.job_name, nr.job_team, nr.status, nr.execution_id, nr.attempt,
	COALESCE(nr.start_time, e.start_time), COALESCE(e.end_time, nr.end_time), nr.message, nr.image, e.status, e.id IS NOT NULL
FROM (SELECT DISTINCT ON (node) * FROM pipeline_node_run WHERE run_id = $1 ORDER BY node, attempt DESC) nr
LEFT JOIN data_job_execution e ON e.id = nr.execution_id`

// nodeRow is a row of nodeRunsQuery: the node as it is (a started node's status is its
// execution's) and the status its row records, which a step writes only when they differ.
type nodeRow struct {
	pl.NodeRun
	recorded pl.NodeStatus
}

// scanNodeRun reads a row of nodeRunsQuery: a started node's status is its execution's
// (running while submitted), and one whose execution row is gone is a platform error.
func scanNodeRun(row pgx.CollectableRow) (nodeRow, error) {
	var n nodeRow
	var status string
	var exec *string
	var found bool
	err := row.Scan(&n.Name, &n.JobName, &n.Team, &status, &n.ExecutionID, &n.Attempt, &n.StartTime, &n.EndTime, &n.Message, &n.Image, &exec, &found)
	n.recorded = pl.NodeStatus(status)
	n.Status = nodeStatus(n.recorded, n.ExecutionID != nil, found, exec)
	if n.ExecutionID != nil && !found {
		n.Message = "the record of execution " + *n.ExecutionID + " is gone"
	}
	return n, err
}

// nodeStatus is the status of a node whose row records recorded: a started node's
// (started) is its execution's, running while submitted, and a platform error when the
// execution's row is gone (!found).
func nodeStatus(recorded pl.NodeStatus, started, found bool, exec *string) pl.NodeStatus {
	switch {
	case !started:
		return recorded
	case !found:
		return pl.PlatformError
	case *exec == "submitted" || *exec == "running":
		return pl.Running
	default:
		return pl.NodeStatus(*exec)
	}
}

// readNodeRuns reads the nodes of run id, ordered as spec lists them.
func readNodeRuns(ctx context.Context, q queryer, id int64, spec pl.Spec) ([]nodeRow, error) {
	rows, _ := q.Query(ctx, nodeRunsQuery, id)
	nodes, err := pgx.CollectRows(rows, scanNodeRun)
	if err != nil {
		return nil, translate(fmt.Errorf("read nodes of run %d: %w", id, err))
	}
	pos := map[string]int{}
	for i, n := range spec.Nodes {
		pos[n.Name] = i
	}
	out := make([]nodeRow, len(spec.Nodes))
	for _, n := range nodes {
		if i, ok := pos[n.Name]; ok {
			out[i] = n
		}
	}
	return out, nil
}

// GetPipelineRun reads the run id of the pipeline name of team with its nodes.
func (s *Store) GetPipelineRun(ctx context.Context, team, name string, id int64) (pl.Run, error) {
	rows, _ := s.pool.Query(ctx, `SELECT `+runColumns+`, r.spec FROM pipeline_run r JOIN pipeline p ON p.id = r.pipeline_id
WHERE r.id = $1 AND p.team = $2 AND p.name = $3`, id, team, name)
	var raw []byte
	run, err := pgx.CollectExactlyOneRow(rows, func(row pgx.CollectableRow) (pl.Run, error) {
		var r pl.Run
		var status string
		err := row.Scan(&r.ID, &status, &r.LogicalTime, &r.StartTime, &r.EndTime, &r.PipelineName, &r.StartedBy, &raw)
		r.Status = pl.RunStatus(status)
		return r, err
	})
	if err != nil {
		return run, rowError(err, pl.RunNotFound(name, id), "read run "+strconv.FormatInt(id, 10))
	}
	var spec pl.Spec
	if err := json.Unmarshal(raw, &spec); err != nil {
		return run, fmt.Errorf("decode spec of run %d: %w", id, err)
	}
	nodes, err := readNodeRuns(ctx, s.pool, id, spec)
	if err != nil {
		return run, err
	}
	run.Nodes = make([]pl.NodeRun, len(nodes))
	for i, n := range nodes {
		run.Nodes[i] = n.NodeRun
	}
	return run, nil
}

// lockRun locks the run id of the pipeline name of team and returns its status and spec.
func lockRun(ctx context.Context, tx Tx, team, name string, id int64) (pl.RunStatus, pl.Spec, error) {
	var status string
	var raw []byte
	err := tx.QueryRow(ctx, `SELECT r.status, r.spec FROM pipeline_run r JOIN pipeline p ON p.id = r.pipeline_id
WHERE r.id = $1 AND p.team = $2 AND p.name = $3 FOR UPDATE OF r`, id, team, name).Scan(&status, &raw)
	if err != nil {
		return "", pl.Spec{}, rowError(err, pl.RunNotFound(name, id), "lock run "+strconv.FormatInt(id, 10))
	}
	var spec pl.Spec
	return pl.RunStatus(status), spec, json.Unmarshal(raw, &spec)
}

// CancelPipelineRun asks for the cancel of the running run id: its pending nodes never
// start, its executions under way are cancelled through the executions' cancel path, and
// the stepper ends the run once none runs. A run that ended is a 409.
func (s *Store) CancelPipelineRun(ctx context.Context, team, name string, id int64) error {
	return s.InTx(ctx, func(tx Tx) error {
		status, _, err := lockRun(ctx, tx, team, name, id)
		if err != nil {
			return err
		}
		if status.Final() {
			return pl.RunState(id, status, "cancelled")
		}
		if _, err := tx.Exec(ctx, `UPDATE pipeline_run SET cancel_requested_at = COALESCE(cancel_requested_at, now()) WHERE id = $1`, id); err != nil {
			return writeError("cancel run", err)
		}
		if err := cancelExecutions(ctx, tx, `id IN (SELECT execution_id FROM pipeline_node_run WHERE run_id = $1 AND execution_id IS NOT NULL)`, id, MsgRunCancelled); err != nil {
			return err
		}
		return notify(ctx, tx, PipelineRunsChannel, strconv.FormatInt(id, 10))
	})
}

// RepairPipelineRun starts again, in the same run, its nodes that failed, were cancelled
// or upstream_failed and every node downstream of them (pipeline.Repair): each gets its
// next attempt, pending, with the image recorded at the run's start, and the run is
// running again. Only a failed or cancelled run is
// repaired (409 otherwise). It returns the nodes started again.
func (s *Store) RepairPipelineRun(ctx context.Context, team, name string, id int64) ([]string, error) {
	var again []string
	err := s.InTx(ctx, func(tx Tx) error {
		status, spec, err := lockRun(ctx, tx, team, name, id)
		if err != nil {
			return err
		}
		if status != pl.RunFailed && status != pl.RunCancelled {
			return pl.RunState(id, status, "repaired")
		}
		nodes, err := readNodeRuns(ctx, tx, id, spec)
		if err != nil {
			return err
		}
		states := map[string]pl.NodeStatus{}
		for _, n := range nodes {
			states[n.Name] = n.Status
		}
		again = pl.Repair(spec, states)
		var p pipeline
		p.exec(wrapped("repair run"), `UPDATE pipeline_run SET status = 'running', end_time = NULL, cancel_requested_at = NULL WHERE id = $1`, id)
		p.exec(wrapped("insert repaired nodes"), `INSERT INTO pipeline_node_run (run_id, node, attempt, job_team, job_name, image)
SELECT run_id, node, max(attempt) + 1, min(job_team), min(job_name), (array_agg(image ORDER BY attempt))[1]
FROM pipeline_node_run WHERE run_id = $1 AND node = ANY($2::text[])
GROUP BY run_id, node`, id, again)
		p.notify(PipelineRunsChannel, strconv.FormatInt(id, 10))
		return p.send(ctx, tx)
	})
	return again, err
}

// CreatePipelineBackfill records a backfill of the pipeline name of team: the leader
// starts one run per time of b, oldest first, at most b.MaxParallel at once.
func (s *Store) CreatePipelineBackfill(ctx context.Context, team, name string, b pl.NewBackfill) (int64, error) {
	return s.inLockedPipeline(ctx, team, name, func(tx Tx, pid int64) (int64, error) {
		var id int64
		err := tx.QueryRow(ctx, `INSERT INTO pipeline_backfill (pipeline_id, times, max_parallel, nodes, created_by) VALUES ($1, $2, $3, $4, $5) RETURNING id`,
			pid, b.Times, b.MaxParallel, append([]string{}, b.Nodes...), b.CreatedBy).Scan(&id)
		if err != nil {
			return 0, writeError("insert pipeline backfill", err)
		}
		return id, notify(ctx, tx, PipelineRunsChannel, "backfill")
	})
}
