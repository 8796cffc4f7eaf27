package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/datajobs/datajobs/internal/job"
	pl "github.com/datajobs/datajobs/internal/pipeline"
)

// Pipelines (issue 40): the API stores a pipeline's spec, its nodes and edges, a revision
// per change; it starts, cancels and repairs runs by writing rows and notifying the leader,
// whose stepper (pipelines_step.go) starts the nodes' executions.

// PipelineRunsChannel is the NOTIFY channel that wakes the stepper: the payload is a run
// id. The API sends it when a run starts, is cancelled or repaired; a trigger (migration
// 0035) sends it in the transaction that records a node's execution's final status.
const PipelineRunsChannel = "datajobs_pipeline_runs"

// MsgRunCancelled is the cancel message of the executions of a cancelled run.
const MsgRunCancelled = "its pipeline run was cancelled"

// MsgPipelineDeleted is the cancel message of the executions of a deleted pipeline's runs.
const MsgPipelineDeleted = "its pipeline was deleted"

// PutPipeline creates or replaces the pipeline name of team with spec, in one transaction:
// the rows of the jobs its nodes run are locked first (key share, in name order: a job's
// delete waits for the PUT, then sees the pipeline), each node's job must exist in its
// team, and a job of another team must be granted to team. It records the next revision
// (actor, opID) and reports whether the pipeline was created.
func (s *Store) PutPipeline(ctx context.Context, team, name string, spec pl.Spec, actor, opID string) (bool, error) {
	raw, err := json.Marshal(spec)
	if err != nil {
		return false, fmt.Errorf("encode pipeline %s: %w", name, err)
	}
	var created bool
	err = s.InTx(ctx, func(tx Tx) (err error) {
		created, err = putPipeline(ctx, tx, team, name, spec, raw, actor, opID)
		return err
	})
	return created, err
}

// putPipeline is PutPipeline in tx, spec encoded as raw. A pipeline a file owns is
// changed only by an apply of that file (job.CheckOwner).
func putPipeline(ctx context.Context, tx Tx, team, name string, spec pl.Spec, raw []byte, actor, opID string) (bool, error) {
	var owner string
	err := tx.QueryRow(ctx, `SELECT coalesce(managed_by, '') FROM pipeline WHERE team = $1 AND name = $2 FOR UPDATE`, team, name).Scan(&owner)
	if err := rowError(err, nil, "lock pipeline "+name); err != nil {
		return false, err
	}
	if err := job.CheckOwner(ctx, "pipeline", name, owner); err != nil {
		return false, err
	}
	if err := checkNodeJobs(ctx, tx, team, spec); err != nil {
		return false, err
	}
	var cron, tz string
	if spec.Schedule != nil {
		cron, tz = spec.Schedule.Cron, spec.Schedule.TimeZone
	}
	var id int64
	var rev int
	var created bool
	err = tx.QueryRow(ctx, `INSERT INTO pipeline AS p (team, name, description, schedule_cron, time_zone, enabled, max_active_runs, spec, created_by, updated_by)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $9)
ON CONFLICT (team, name) DO UPDATE SET description = EXCLUDED.description, schedule_cron = EXCLUDED.schedule_cron,
	time_zone = EXCLUDED.time_zone, enabled = EXCLUDED.enabled, max_active_runs = EXCLUDED.max_active_runs, spec = EXCLUDED.spec,
	revision = p.revision + 1, updated_by = EXCLUDED.updated_by, updated_at = now(),
	checked_until = CASE WHEN p.schedule_cron = EXCLUDED.schedule_cron AND p.time_zone = EXCLUDED.time_zone
		AND (p.enabled OR NOT EXCLUDED.enabled) THEN p.checked_until END
RETURNING id, revision, xmax = 0`, team, name, spec.Description, cron, tz, spec.Enabled, spec.MaxActiveRuns, raw, actor).Scan(&id, &rev, &created)
	if err != nil {
		return false, writeError("store pipeline "+name, err)
	}
	return created, writePipelineGraph(ctx, tx, id, rev, spec, raw, actor, opID)
}

// checkNodeJobs locks the jobs spec's nodes run (key share, in name order) and checks each
// is a job of its node's team, granted to team when that is another team.
func checkNodeJobs(ctx context.Context, tx Tx, team string, spec pl.Spec) error {
	refs := spec.Jobs()
	names := make([]string, len(refs))
	for i, r := range refs {
		names[i] = r.Name
	}
	rows, _ := tx.Query(ctx, `SELECT j.name, j.team, g.grantee_team IS NOT NULL FROM data_job j
LEFT JOIN job_grant g ON g.job_uid = j.uid AND g.grantee_team = $2
WHERE j.name = ANY($1::text[]) ORDER BY j.name FOR KEY SHARE OF j`, names, team)
	type found struct {
		team    string
		granted bool
	}
	jobs := map[string]found{}
	var jn string
	var f found
	_, err := pgx.ForEachRow(rows, []any{&jn, &f.team, &f.granted}, func() error { jobs[jn] = f; return nil })
	if err != nil {
		return fmt.Errorf("lock jobs of pipeline: %w", err)
	}
	for _, n := range spec.Nodes {
		j, ok := jobs[n.JobName]
		switch {
		case n.Team != team && (!ok || j.team != n.Team || !j.granted):
			// The same answer whether the job exists or not: no probing other teams.
			return pl.NotGranted(team, n.Name, n.Team, n.JobName)
		case !ok || j.team != n.Team:
			return pl.UnknownJob(n.Name, n.Team, n.JobName)
		}
	}
	return nil
}

// writePipelineGraph replaces the nodes and edges of the pipeline id and records its
// revision rev.
func writePipelineGraph(ctx context.Context, tx Tx, id int64, rev int, spec pl.Spec, raw []byte, actor, opID string) error {
	var p pipeline
	p.exec(wrapped("clear pipeline nodes"), `DELETE FROM pipeline_node WHERE pipeline_id = $1`, id)
	var names, teams, jobs, rules, fails, from, to []string
	var pos []int32
	for i, n := range spec.Nodes {
		names, teams, jobs = append(names, n.Name), append(teams, n.Team), append(jobs, n.JobName)
		rules, fails, pos = append(rules, string(n.TriggerRule)), append(fails, string(n.OnFailure)), append(pos, int32(i))
		for _, d := range n.DependsOn {
			from, to = append(from, n.Name), append(to, d)
		}
	}
	p.exec(wrapped("insert pipeline nodes"), `INSERT INTO pipeline_node (pipeline_id, name, job_team, job_name, trigger_rule, on_failure, position)
SELECT $1, * FROM unnest($2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::int[])`, id, names, teams, jobs, rules, fails, pos)
	p.exec(wrapped("insert pipeline edges"), `INSERT INTO pipeline_edge (pipeline_id, node, depends_on)
SELECT $1, * FROM unnest($2::text[], $3::text[])`, id, from, to)
	p.exec(wrapped("insert pipeline revision"), `INSERT INTO pipeline_revision (pipeline_id, revision, actor, op_id, spec, source) VALUES ($1, $2, $3, $4, $5, $6)`,
		id, rev, actor, opID, raw, job.ActorFrom(ctx).Source)
	return p.send(ctx, tx)
}

// pipelineColumns are read by scanPipeline, from pipeline p and its newest run r.
const pipelineColumns = `p.team, p.name, p.spec, p.revision, p.checked_until, p.created_at, coalesce(p.managed_by, ''),
	r.id, r.status, r.logical_time, r.start_time, r.end_time`

const pipelineFrom = ` FROM pipeline p
LEFT JOIN LATERAL (SELECT * FROM pipeline_run r WHERE r.pipeline_id = p.id ORDER BY r.id DESC LIMIT 1) r ON true`

func scanPipeline(row pgx.CollectableRow) (pl.Pipeline, error) {
	var p pl.Pipeline
	var raw []byte
	var id *int64
	var last pl.RunSummary
	var status *string
	var logical, start *time.Time
	err := row.Scan(&p.Team, &p.Name, &raw, &p.Revision, &p.CheckedUntil, &p.CreatedAt, &p.ManagedBy, &id, &status, &logical, &start, &last.EndTime)
	if err != nil {
		return p, err
	}
	if id != nil {
		last.ID, last.Status, last.LogicalTime, last.StartTime = *id, pl.RunStatus(*status), *logical, *start
		p.LastRun = &last
	}
	return p, json.Unmarshal(raw, &p.Spec)
}

// GetPipeline reads the pipeline name of team with its newest run.
func (s *Store) GetPipeline(ctx context.Context, team, name string) (pl.Pipeline, error) {
	rows, _ := s.pool.Query(ctx, `SELECT `+pipelineColumns+pipelineFrom+` WHERE p.team = $1 AND p.name = $2`, team, name)
	p, err := pgx.CollectExactlyOneRow(rows, scanPipeline)
	return p, rowError(err, pl.NotFound(team, name), "read pipeline "+name)
}

// ListPipelines reads page (from 1) of size of team's pipelines, by name.
func (s *Store) ListPipelines(ctx context.Context, team string, page, size int) (pl.Page[pl.Pipeline], error) {
	var out pl.Page[pl.Pipeline]
	rows, _ := s.pool.Query(ctx, `SELECT `+pipelineColumns+pipelineFrom+` WHERE p.team = $1 ORDER BY p.name LIMIT $2 OFFSET $3`,
		team, size, (page-1)*size)
	items, err := pgx.CollectRows(rows, scanPipeline)
	if err != nil {
		return out, translate(fmt.Errorf("list pipelines of %s: %w", team, err))
	}
	out.Items = items
	err = s.pool.QueryRow(ctx, `SELECT count(*) FROM pipeline WHERE team = $1`, team).Scan(&out.TotalItems)
	return out, rowError(err, nil, "count pipelines of "+team)
}

// DeletePipeline deletes the pipeline name of team with its runs, asking for the cancel of
// every execution its runs have under way.
func (s *Store) DeletePipeline(ctx context.Context, team, name string) error {
	return s.InTx(ctx, func(tx Tx) error { return deletePipeline(ctx, tx, team, name) })
}

// deletePipeline is DeletePipeline in tx. A pipeline a file owns is deleted only by an
// apply of that file (job.CheckOwner).
func deletePipeline(ctx context.Context, tx Tx, team, name string) error {
	id, err := lockPipeline(ctx, tx, team, name)
	if err != nil {
		return err
	}
	var owner string
	if err := tx.QueryRow(ctx, `SELECT coalesce(managed_by, '') FROM pipeline WHERE id = $1`, id).Scan(&owner); err != nil {
		return fmt.Errorf("read owner of pipeline %s: %w", name, err)
	}
	if err := job.CheckOwner(ctx, "pipeline", name, owner); err != nil {
		return err
	}
	if err := cancelExecutions(ctx, tx, `id IN (SELECT nr.execution_id FROM pipeline_node_run nr
	JOIN pipeline_run r ON r.id = nr.run_id WHERE r.pipeline_id = $1 AND nr.execution_id IS NOT NULL)`, id, MsgPipelineDeleted); err != nil {
		return err
	}
	_, err = tx.Exec(ctx, `DELETE FROM pipeline WHERE id = $1`, id)
	return wrote("delete pipeline "+name, err)
}

// lockPipeline locks the pipeline name of team and returns its id.
func lockPipeline(ctx context.Context, tx Tx, team, name string) (int64, error) {
	var id int64
	err := tx.QueryRow(ctx, `SELECT id FROM pipeline WHERE team = $1 AND name = $2 FOR UPDATE`, team, name).Scan(&id)
	return id, rowError(err, pl.NotFound(team, name), "lock pipeline "+name)
}

// inLockedPipeline is InTx with the pipeline name of team locked (lockPipeline): fn runs
// on its id and returns the id of the row it inserts.
func (s *Store) inLockedPipeline(ctx context.Context, team, name string, fn func(tx Tx, pid int64) (int64, error)) (int64, error) {
	var id int64
	err := s.InTx(ctx, func(tx Tx) error {
		pid, err := lockPipeline(ctx, tx, team, name)
		if err != nil {
			return err
		}
		id, err = fn(tx, pid)
		return err
	})
	return id, err
}

// pipelineUsing names a pipeline whose node runs the job name, if any: a job's delete
// refuses while one does.
func pipelineUsing(ctx context.Context, tx Tx, name string) error {
	var team, p string
	err := tx.QueryRow(ctx, `SELECT p.team, p.name FROM pipeline_node n JOIN pipeline p ON p.id = n.pipeline_id
WHERE n.job_name = $1 ORDER BY p.team, p.name LIMIT 1`, name).Scan(&team, &p)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil
	case err != nil:
		return fmt.Errorf("read pipelines of job %s: %w", name, err)
	}
	return pl.UsedByPipeline(name, team, p)
}

// GrantJob grants the job name of team to the pipelines of grantee (again: nothing).
func (s *Store) GrantJob(ctx context.Context, team, name, grantee, by string) error {
	return s.inLockedTx(ctx, team, name, func(tx Tx, st job.JobState) error {
		_, err := tx.Exec(ctx, `INSERT INTO job_grant (job_uid, job_team, job_name, grantee_team, granted_by)
VALUES ($1::uuid, $2, $3, $4, $5) ON CONFLICT DO NOTHING`, st.Job.UID, team, name, grantee, by)
		return wrote("grant job "+name, err)
	})
}

// RevokeGrant revokes the grant of the job name of team to grantee: the grantee's
// pipelines can no longer be stored with it, and their runs start it no more.
func (s *Store) RevokeGrant(ctx context.Context, team, name, grantee string) error {
	return s.inLockedTx(ctx, team, name, func(tx Tx, st job.JobState) error {
		_, err := tx.Exec(ctx, `DELETE FROM job_grant WHERE job_uid = $1::uuid AND grantee_team = $2`, st.Job.UID, grantee)
		return wrote("revoke grant of "+name, err)
	})
}

// StartPipelineRun starts a run of the pipeline name of team: under the pipeline's row
// lock it refuses a start while max_active_runs runs are running, inserts the run with the
// pipeline's spec and revision and its nodes pending, and wakes the stepper.
func (s *Store) StartPipelineRun(ctx context.Context, team, name string, r pl.NewRun) (int64, error) {
	return s.inLockedPipeline(ctx, team, name, func(tx Tx, pid int64) (int64, error) {
		var active, max int
		err := tx.QueryRow(ctx, `SELECT (SELECT count(*) FROM pipeline_run WHERE pipeline_id = $1 AND status = 'running'), max_active_runs
FROM pipeline WHERE id = $1`, pid).Scan(&active, &max)
		if err != nil {
			return 0, fmt.Errorf("count runs of pipeline %s: %w", name, err)
		}
		if active >= max {
			return 0, pl.TooManyRuns(name, max)
		}
		return insertRun(ctx, tx, pid, r, nil, 0, nil)
	})
}

// insertRun inserts a run of the pipeline pid (its spec, restricted to nodes when any are
// given) with every node pending, and notifies the stepper. A scheduled run (at not nil)
// that another leader inserted already is not inserted again: the id is then 0.
func insertRun(ctx context.Context, tx Tx, pid int64, r pl.NewRun, at any, backfill int64, nodes []string) (int64, error) {
	var id int64
	err := tx.QueryRow(ctx, `INSERT INTO pipeline_run (pipeline_id, team, pipeline_name, revision, spec, logical_time, schedule_time, backfill_id, arguments, started_by)
SELECT id, team, name, revision, spec, $2, $3, NULLIF($4::bigint, 0), $5, $6 FROM pipeline WHERE id = $1
ON CONFLICT (pipeline_id, schedule_time) DO NOTHING RETURNING id`, pid, r.LogicalTime, at, backfill, r.Arguments, r.StartedBy).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, writeError("insert pipeline run", err)
	}
	var raw []byte
	if err := tx.QueryRow(ctx, `SELECT spec FROM pipeline_run WHERE id = $1`, id).Scan(&raw); err != nil {
		return 0, fmt.Errorf("read run %d: %w", id, err)
	}
	var spec pl.Spec
	if err := json.Unmarshal(raw, &spec); err != nil {
		return 0, fmt.Errorf("decode spec of run %d: %w", id, err)
	}
	if len(nodes) > 0 {
		if spec, err = spec.Subset(nodes); err != nil {
			return 0, err
		}
		raw, _ = json.Marshal(spec)
		if _, err := tx.Exec(ctx, `UPDATE pipeline_run SET spec = $2 WHERE id = $1`, id, raw); err != nil {
			return 0, writeError("restrict run", err)
		}
	}
	var p pipeline
	for _, n := range spec.Nodes {
		// The image its job is deployed with now: every attempt of the node runs it.
		p.exec(wrapped("insert node run "+n.Name), `INSERT INTO pipeline_node_run (run_id, node, attempt, job_team, job_name, image)
VALUES ($1, $2, 1, $3, $4, COALESCE((SELECT a.image FROM actual_data_job_deployment a JOIN data_job j ON j.uid = a.job_uid
	WHERE a.data_job_name = $4 AND j.team = $3), ''))`, id, n.Name, n.Team, n.JobName)
	}
	p.notify(PipelineRunsChannel, strconv.FormatInt(id, 10))
	return id, p.send(ctx, tx)
}

// wrote is writeError for a write that may have succeeded: nil stays nil.
func wrote(op string, err error) error {
	if err == nil {
		return nil
	}
	return writeError(op, err)
}
