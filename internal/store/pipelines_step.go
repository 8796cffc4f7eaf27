package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/datajobs/datajobs/internal/job"
	pl "github.com/datajobs/datajobs/internal/pipeline"
)

// The leader's side of pipelines: the stepper's one transaction per step of a run, the
// scheduled runs and the backfills' runs. Every write is fenced by the lease epoch.

// PipelineStep is what one step of a run did.
type PipelineStep struct {
	// Team and Pipeline name the run's pipeline.
	Team, Pipeline string
	// Started are the ids of the executions the step inserted; Nodes the nodes they run.
	Started, Nodes []string
	// Status is the run's status after the step ("" when the run was not running).
	Status pl.RunStatus
}

// ActivePipelineRuns returns the ids of the running runs, oldest first.
func (s *Store) ActivePipelineRuns(ctx context.Context) ([]int64, error) {
	rows, _ := s.pool.Query(ctx, `SELECT id FROM pipeline_run WHERE status = 'running' ORDER BY id`)
	out, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	return out, rowError(err, nil, "read running pipeline runs")
}

// overdueQuery reads every running run with the latest attempt of each of its nodes: its
// recorded status, whether it started, its execution's status and whether that exists.
const overdueQuery = `SELECT r.id, r.spec, r.cancel_requested_at IS NOT NULL,
	array_agg(nr.node) FILTER (WHERE nr.node IS NOT NULL), array_agg(nr.status) FILTER (WHERE nr.node IS NOT NULL),
	array_agg(nr.execution_id IS NOT NULL) FILTER (WHERE nr.node IS NOT NULL), array_agg(e.status) FILTER (WHERE nr.node IS NOT NULL),
	array_agg(e.id IS NOT NULL) FILTER (WHERE nr.node IS NOT NULL)
FROM pipeline_run r
LEFT JOIN LATERAL (SELECT DISTINCT ON (node) node, status, execution_id FROM pipeline_node_run
	WHERE run_id = r.id ORDER BY node, attempt DESC) nr ON true
LEFT JOIN data_job_execution e ON e.id = nr.execution_id
WHERE r.status = 'running'
GROUP BY r.id
ORDER BY r.id`

// OverduePipelineRuns returns the ids of the running runs, oldest first, that a step
// would change now: one that would start or end a node, end the run, or record an end its
// node's row does not record yet (pipeline.Next on the nodes' states read now). The
// stepper's resync queues only these: a run whose nodes run or wait for their upstream
// nodes is stepped on its NOTIFYs, and queueing it every resync as well put 100 runs'
// idle steps ahead of the notified ones in bench/pipelines (2,917–4,132 steps for 1,100
// notified). A lost NOTIFY leaves its run overdue, and so does a node that waits for
// something no NOTIFY reports (its job's deployment applied, its job's other execution
// ended under a concurrency policy).
func (s *Store) OverduePipelineRuns(ctx context.Context) ([]int64, error) {
	rows, _ := s.pool.Query(ctx, overdueQuery)
	var out []int64
	var r struct {
		id              int64
		spec            []byte
		cancelling      bool
		nodes, recorded []string
		started, found  []bool
		execs           []*string
	}
	_, err := pgx.ForEachRow(rows, []any{&r.id, &r.spec, &r.cancelling, &r.nodes, &r.recorded, &r.started, &r.execs, &r.found}, func() error {
		var spec pl.Spec
		if err := json.Unmarshal(r.spec, &spec); err != nil {
			return fmt.Errorf("decode spec of run %d: %w", r.id, err)
		}
		states, unrecorded := map[string]pl.NodeStatus{}, false
		for i, n := range r.nodes {
			states[n] = nodeStatus(pl.NodeStatus(r.recorded[i]), r.started[i], r.found[i], r.execs[i])
			unrecorded = unrecorded || (states[n].Final() && states[n] != pl.NodeStatus(r.recorded[i]))
		}
		if plan := pl.Next(spec, states, r.cancelling); unrecorded || len(plan.Start) > 0 || len(plan.Ends) > 0 || plan.Status.Final() {
			out = append(out, r.id)
		}
		return nil
	})
	return out, rowError(err, nil, "read overdue pipeline runs")
}

// stepRun is the locked row of a run being stepped.
type stepRun struct {
	id                  int64
	team, name          string
	spec                pl.Spec
	logical             time.Time
	args                []byte
	cancelling, running bool
	// images are the nodes' images pinned at the run's start (pl.NodeRun.Image).
	images map[string]string
}

// fenced checks, in tx, that fence's term holds the lease, and keeps the lease row from
// changing hands until tx ends (FOR SHARE): a deposed leader's step writes nothing.
func fenced(ctx context.Context, tx Tx, fence job.Fence, op string) error {
	var held bool
	if err := tx.QueryRow(ctx, `SELECT `+syncLeaseHeld("$1"), fence.Epoch).Scan(&held); err != nil {
		return fmt.Errorf("check lease: %w", err)
	}
	if !held {
		return fmt.Errorf("%s: the lease of term %d is no longer held", op, fence.Epoch)
	}
	return nil
}

// StepPipelineRun takes one step of the run id while fence holds the lease, in one
// transaction under the run's row lock: it reads the nodes' states (a started node's is
// its execution's), decides with pipeline.Next, starts the nodes it may (an execution of
// the node's job inserted as a manual start is, under the job's lock, its concurrency
// policy applied: a busy job makes the node wait), ends those that never will, records
// what each pending node waits for, and ends the run when every node has ended. A node
// whose job, deployment or grant is gone ends cancelled.
func (s *Store) StepPipelineRun(ctx context.Context, fence job.Fence, id int64, now time.Time) (PipelineStep, error) {
	return s.stepRun(ctx, &fence, id, now)
}

// errPlanned rolls a planned step back.
var errPlanned = errors.New("a planned step writes nothing")

// PlanPipelineRun is the step StepPipelineRun would take of the run id now, rolled back:
// what it would start and end, without the lease, writing nothing (sync --once --dry-run).
// The execution ids it answers are those the step would have inserted.
func (s *Store) PlanPipelineRun(ctx context.Context, id int64, now time.Time) (PipelineStep, error) {
	out, err := s.stepRun(ctx, nil, id, now)
	if errors.Is(err, errPlanned) {
		err = nil
	}
	return out, err
}

// stepRun takes one step of the run id in one transaction, fenced when fence is set, and
// rolled back (errPlanned) when it is not.
func (s *Store) stepRun(ctx context.Context, fence *job.Fence, id int64, now time.Time) (PipelineStep, error) {
	var out PipelineStep
	err := s.InTx(ctx, func(tx Tx) error {
		out = PipelineStep{}
		if fence != nil {
			if err := fenced(ctx, tx, *fence, "step pipeline run "+strconv.FormatInt(id, 10)); err != nil {
				return err
			}
		}
		r, err := lockStepRun(ctx, tx, id)
		if err != nil || !r.running {
			return err
		}
		out.Team, out.Pipeline = r.team, r.name
		nodes, err := readNodeRuns(ctx, tx, id, r.spec)
		if err != nil {
			return err
		}
		states, attempts, messages := map[string]pl.NodeStatus{}, map[string]int{}, map[string]string{}
		r.images = map[string]string{}
		var p pipeline
		for _, n := range nodes {
			states[n.Name], attempts[n.Name], messages[n.Name], r.images[n.Name] = n.Status, n.Attempt, n.Message, n.Image
			// Only an end its row does not record yet is written: a step re-sending every
			// ended node's was 40,000 statements in a run of bench/pipelines.
			if n.ExecutionID != nil && n.Status.Final() && n.Status != n.recorded {
				p.exec(wrapped("record node "+n.Name), `UPDATE pipeline_node_run SET status = $4, end_time = $5, message = $6
WHERE run_id = $1 AND node = $2 AND attempt = $3`, id, n.Name, n.Attempt, n.Status, n.EndTime, n.Message)
			}
		}
		if err := p.send(ctx, tx); err != nil {
			return err
		}
		plan, waiting, err := s.stepNodes(ctx, tx, r, states, attempts, now, &out)
		if err != nil {
			return err
		}
		for name, msg := range waiting {
			if msg != messages[name] {
				p.exec(wrapped("record wait of "+name), `UPDATE pipeline_node_run SET message = $4
WHERE run_id = $1 AND node = $2 AND attempt = $3`, id, name, attempts[name], msg)
			}
		}
		if out.Status = plan.Status; plan.Status.Final() {
			p.exec(wrapped("end run"), `UPDATE pipeline_run SET status = $2, end_time = $3 WHERE id = $1`, id, plan.Status, now)
		}
		if err := p.send(ctx, tx); err != nil || fence != nil {
			return err
		}
		return errPlanned
	})
	return out, err
}

// stepNodes applies pipeline.Next to states until a pass changes nothing (a node that
// could not start after all changes what its downstream decides), writing each node's
// start or end. It returns the last plan and what each pending node waits for.
func (s *Store) stepNodes(ctx context.Context, tx Tx, r stepRun, states map[string]pl.NodeStatus, attempts map[string]int,
	now time.Time, out *PipelineStep,
) (pl.Plan, map[string]string, error) {
	blocked := map[string]string{}
	for {
		plan := pl.Next(r.spec, states, r.cancelling)
		var p pipeline
		changed := false
		for _, e := range plan.Ends {
			states[e.Node], changed = e.Status, true
			p.exec(wrapped("end node "+e.Node), `UPDATE pipeline_node_run SET status = $4, message = $5, end_time = $6
WHERE run_id = $1 AND node = $2 AND attempt = $3`, r.id, e.Node, attempts[e.Node], e.Status, e.Message, now)
		}
		if err := p.send(ctx, tx); err != nil {
			return plan, nil, err
		}
		start := slices.DeleteFunc(plan.Start, func(n string) bool { _, ok := blocked[n]; return ok })
		if len(start) > 0 {
			got, err := s.startNodes(ctx, tx, r, start, attempts, now)
			if err != nil {
				return plan, nil, err
			}
			for _, g := range got {
				switch {
				case g.execution != "":
					states[g.node], changed = pl.Running, true
					out.Started, out.Nodes = append(out.Started, g.execution), append(out.Nodes, g.node)
				case g.ended:
					states[g.node], changed = pl.Cancelled, true
				default:
					blocked[g.node] = g.message
				}
			}
		}
		if !changed {
			for n, msg := range plan.Waiting {
				blocked[n] = msg
			}
			return plan, blocked, nil
		}
	}
}

// lockStepRun locks the run id; running is false when it ended or is gone.
func lockStepRun(ctx context.Context, tx Tx, id int64) (stepRun, error) {
	r := stepRun{id: id}
	var status string
	var raw []byte
	err := tx.QueryRow(ctx, `SELECT status, spec, team, pipeline_name, logical_time, arguments, cancel_requested_at IS NOT NULL
FROM pipeline_run WHERE id = $1 FOR UPDATE`, id).Scan(&status, &raw, &r.team, &r.name, &r.logical, &r.args, &r.cancelling)
	if errors.Is(err, pgx.ErrNoRows) {
		return r, nil
	}
	if err != nil {
		return r, fmt.Errorf("lock run %d: %w", id, err)
	}
	r.running = status == string(pl.RunRunning)
	return r, json.Unmarshal(raw, &r.spec)
}

// nodeStart is what a start of one node came to: an execution, an end (cancelled, with
// its message written), or a wait (message).
type nodeStart struct {
	node, execution, message string
	ended                    bool
}

// startNodes starts the nodes names of run r: the jobs' rows locked first, in name order,
// as a manual start locks its job; each node's execution inserted and notified as a manual
// start's is, its node run marked running with it.
func (s *Store) startNodes(ctx context.Context, tx Tx, r stepRun, names []string, attempts map[string]int, now time.Time) ([]nodeStart, error) {
	var jobs []string
	for _, name := range names {
		n, _ := r.spec.Node(name)
		if !slices.Contains(jobs, n.JobName) {
			jobs = append(jobs, n.JobName)
		}
	}
	slices.Sort(jobs)
	var p pipeline
	p.lockJobs(lockForUpdate, jobs, s.lockTimer("pipelines"))
	if err := p.send(ctx, tx); err != nil {
		return nil, err
	}
	out := make([]nodeStart, 0, len(names))
	for _, name := range names {
		n, _ := r.spec.Node(name)
		res, err := startNode(ctx, tx, r, n, attempts[name], now)
		if err != nil {
			return nil, err
		}
		out = append(out, res)
	}
	return out, nil
}

// startNode starts node n of run r (its job's row is locked).
func startNode(ctx context.Context, tx Tx, r stepRun, n pl.Node, attempt int, now time.Time) (nodeStart, error) {
	res := nodeStart{node: n.Name}
	st, err := scanState(tx.QueryRow(ctx, stateQuery, n.JobName), n.Team, n.JobName)
	if job.KindOf(err) == job.KindNotFound {
		return endNode(ctx, tx, r, n, attempt, now, fmt.Sprintf("not started: job %q of team %q no longer exists", n.JobName, n.Team))
	}
	if err != nil {
		return res, err
	}
	if n.Team != r.team {
		var granted bool
		err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM job_grant WHERE job_uid = $1::uuid AND grantee_team = $2)`, st.Job.UID, r.team).Scan(&granted)
		if err != nil {
			return res, fmt.Errorf("read grant of %s: %w", n.JobName, err)
		}
		if !granted {
			return endNode(ctx, tx, r, n, attempt, now, fmt.Sprintf("not started: team %q no longer grants job %q to team %q", n.Team, n.JobName, r.team))
		}
	}
	switch {
	case st.Desired == nil:
		return endNode(ctx, tx, r, n, attempt, now, fmt.Sprintf("not started: job %q has no deployment", n.JobName))
	case st.Actual == nil:
		res.message = fmt.Sprintf("waiting for the deployment of job %q to be applied", n.JobName)
		return res, nil
	}
	if err := admitStart(ctx, tx, st); job.KindOf(err) == job.KindConflict {
		res.message = fmt.Sprintf("waiting for the execution of job %q under way to end (its concurrency policy)", n.JobName)
		return res, nil
	} else if err != nil {
		return res, err
	}
	args, err := job.RunArgs("node arguments", r.logical, r.args, n.Arguments)
	if err != nil {
		return res, err
	}
	logical := r.logical
	id, err := insertExecution(ctx, tx, st.Job, job.NewExecution{
		OpID: fmt.Sprintf("pipeline-%d-%s-%d", r.id, n.Name, attempt), StartedBy: pl.StartedBy(r.team, r.name, r.id),
		Args: args, Snapshot: st.Actual.Snapshot(), Start: now, Type: job.ExecManual, LogicalTime: &logical,
		Image: r.images[n.Name],
	})
	if err != nil {
		return res, err
	}
	var p pipeline
	p.notify(ExecutionsChannel, id)
	p.exec(wrapped("start node "+n.Name), `UPDATE pipeline_node_run SET status = 'running', execution_id = $4, start_time = $5, message = ''
WHERE run_id = $1 AND node = $2 AND attempt = $3`, r.id, n.Name, attempt, id, now)
	res.execution = id
	return res, p.send(ctx, tx)
}

// endNode ends node n of run r cancelled with msg, without starting it.
func endNode(ctx context.Context, tx Tx, r stepRun, n pl.Node, attempt int, now time.Time, msg string) (nodeStart, error) {
	_, err := tx.Exec(ctx, `UPDATE pipeline_node_run SET status = 'cancelled', message = $4, end_time = $5
WHERE run_id = $1 AND node = $2 AND attempt = $3`, r.id, n.Name, attempt, msg, now)
	return nodeStart{node: n.Name, ended: true, message: msg}, wrote("end node "+n.Name, err)
}
