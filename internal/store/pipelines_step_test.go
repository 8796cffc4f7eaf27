package store_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/job"
	pl "github.com/datajobs/datajobs/internal/pipeline"
	"github.com/datajobs/datajobs/internal/store"
)

// statements records the SQL of every statement a store sends, alone or in a batch.
type statements struct {
	mu  sync.Mutex
	sql []string
}

func (s *statements) add(sql string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sql = append(s.sql, strings.Join(strings.Fields(sql), " "))
}

func (s *statements) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	s.add(d.SQL)
	return ctx
}
func (s *statements) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (s *statements) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}

func (s *statements) TraceBatchQuery(_ context.Context, _ *pgx.Conn, d pgx.TraceBatchQueryData) {
	s.add(d.SQL)
}
func (s *statements) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// since returns the statements sent from the mark on that start with prefix.
func (s *statements) since(mark int, prefix string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, q := range s.sql[mark:] {
		if strings.HasPrefix(q, prefix) {
			out = append(out, q)
		}
	}
	return out
}

func (s *statements) mark() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.sql)
}

// versions are the row versions (xmin) of run id's row and its nodes' rows: a row written
// has a new one.
func (w *pipeWorld) versions(id int64) map[string]string {
	w.t.Helper()
	conn, err := pgx.Connect(w.t.Context(), w.url)
	require.NoError(w.t, err)
	defer conn.Close(context.WithoutCancel(w.t.Context()))
	out := map[string]string{}
	rows, _ := conn.Query(w.t.Context(), `SELECT 'run', xmin::text FROM pipeline_run WHERE id = $1
UNION ALL SELECT node || '/' || attempt, xmin::text FROM pipeline_node_run WHERE run_id = $1`, id)
	var key, xmin string
	_, err = pgx.ForEachRow(rows, []any{&key, &xmin}, func() error { out[key] = xmin; return nil })
	require.NoError(w.t, err)
	return out
}

const threeSteps = `{"nodes":[{"name":"first-step","job_name":"extract-job"},
	{"name":"second-step","job_name":"left-job","depends_on":["first-step"]},
	{"name":"third-step","job_name":"join-job","depends_on":["second-step"]}]}`

// Every step sent an UPDATE of pipeline_node_run per ended node, and one of each waiting
// node's message, whether or not anything had changed (40,000 statements in a run of
// bench/pipelines, where 1,000 nodes started). A step writes only the rows whose state
// changed: a step that changes nothing sends no UPDATE and leaves every row's version as
// it was, and a step after a node's end writes that end and the next node's start, not
// the ends recorded before.
func TestAStepThatChangesNothingSendsNoUpdateAndWritesNoRow(t *testing.T) {
	t.Parallel()
	w := newPipeWorld(t, map[string]string{"extract-job": "team-a", "left-job": "team-a", "join-job": "team-a"})
	var sent statements
	st, err := store.Open(t.Context(), store.Config{URL: w.url, Tracer: &sent})
	require.NoError(t, err)
	t.Cleanup(st.Close)
	ctx := t.Context()
	spec, err := pl.Parse("team-a", "three-steps", []byte(threeSteps))
	require.NoError(t, err)
	_, err = st.PutPipeline(ctx, "team-a", "three-steps", spec, "alice", "op")
	require.NoError(t, err)
	id, err := st.StartPipelineRun(ctx, "team-a", "three-steps", pl.NewRun{LogicalTime: time.Now(), StartedBy: "alice"})
	require.NoError(t, err)
	step := func() store.PipelineStep {
		t.Helper()
		s, err := st.StepPipelineRun(ctx, w.fence, id, time.Now())
		require.NoError(t, err)
		return s
	}
	first := step().Started
	require.Len(t, first, 1)
	w.finish("extract-job", first[0], job.ExecSucceeded)
	second := step().Started
	require.Len(t, second, 1)

	before, mark := w.versions(id), sent.mark()
	require.Empty(t, step().Started)
	require.Empty(t, sent.since(mark, "UPDATE"), "a step that changes nothing sends no UPDATE")
	require.Equal(t, before, w.versions(id), "and writes no row")

	w.finish("left-job", second[0], job.ExecSucceeded)
	mark = sent.mark()
	require.Len(t, step().Started, 1)
	updates := sent.since(mark, "UPDATE pipeline_node_run")
	require.Len(t, updates, 2, "the second node's end and the third's start, not the first's end again: %q", updates)
	require.Equal(t, map[string]pl.NodeStatus{"run": "running", "first-step": pl.Succeeded, "second-step": pl.Succeeded, "third-step": pl.Running},
		w.statuses("team-a", "three-steps", id))
}

// The resync queues only the runs a step would change: a run just started (its first
// node to start), a run whose node ended (its end not yet recorded), and a run whose node
// waits for something no NOTIFY reports (its job's execution of another run under way,
// concurrency policy Forbid); not a run whose node runs, nor one whose node waits for its
// upstream node.
func TestOnlyTheRunsAStepWouldChangeAreOverdue(t *testing.T) {
	t.Parallel()
	w := newPipeWorld(t, map[string]string{"extract-job": "team-a", "left-job": "team-a"})
	ctx := t.Context()
	spec, err := pl.Parse("team-a", "two-steps", []byte(`{"max_active_runs":2,"nodes":[{"name":"first-step","job_name":"extract-job"},{"name":"second-step","job_name":"left-job","depends_on":["first-step"]}]}`))
	require.NoError(t, err)
	_, err = w.st.PutPipeline(ctx, "team-a", "two-steps", spec, "alice", "op")
	require.NoError(t, err)
	overdue := func() []int64 {
		t.Helper()
		ids, err := w.st.OverduePipelineRuns(ctx)
		require.NoError(t, err)
		return ids
	}
	start := func() int64 {
		t.Helper()
		id, err := w.st.StartPipelineRun(ctx, "team-a", "two-steps", pl.NewRun{LogicalTime: time.Now(), StartedBy: "alice"})
		require.NoError(t, err)
		return id
	}
	a := start()
	require.Equal(t, []int64{a}, overdue(), "its first node is to start")
	started := w.step(a).Started
	require.Len(t, started, 1)
	require.Empty(t, overdue(), "its first node runs, its second waits for it")

	b := start()
	w.step(b)
	r, err := w.st.GetPipelineRun(ctx, "team-a", "two-steps", b)
	require.NoError(t, err)
	require.Contains(t, r.Nodes[0].Message, "under way to end")
	require.Equal(t, []int64{b}, overdue(), "its first node waits for extract-job's execution of run a")

	w.finish("extract-job", started[0], job.ExecSucceeded)
	require.Equal(t, []int64{a, b}, overdue(), "run a's first node ended")
	w.step(a)
	w.step(b)
	require.Empty(t, overdue(), "each has a node running")
}
