package notify_test

import (
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/notify"
	pl "github.com/datajobs/datajobs/internal/pipeline"
)

// A pipeline run's end is one notification, not one per node (issue 40, item 5): a run
// whose node failed mails the failure contacts of its spec (the PUT's contacts) once, naming the node and why;
// writing the same end again mails nobody; repaired and ended again, it is a new event,
// to the success contacts. The console link is the run's page.
func TestAPipelineRunsEndIsOneNotificationPerEnd(t *testing.T) {
	t.Parallel()
	f := newFixture(t, notify.RateLimit{}, "", job.Contacts{})
	ctx := t.Context()
	spec, err := pl.Parse("team-a", "nightly", []byte(`{
		"contacts":{"notified_on_run_failure":["oncall@example.com"],"notified_on_run_success":["team@example.com"]},
		"nodes":[{"name":"load-sales","job_name":"nightly-load"},
		{"name":"report","job_name":"nightly-load","depends_on":["load-sales"]}]}`))
	require.NoError(t, err)
	_, err = f.db.PutPipeline(ctx, "team-a", "nightly", spec, "alice", "op")
	require.NoError(t, err)
	id, err := f.db.StartPipelineRun(ctx, "team-a", "nightly", pl.NewRun{StartedBy: "alice"})
	require.NoError(t, err)
	end := func(status string) {
		f.sql(`WITH u AS (UPDATE pipeline_run SET status = $2, end_time = clock_timestamp() WHERE id = $1 RETURNING 1) SELECT count(*) FROM u`, id, status)
	}
	f.sql(`WITH u AS (UPDATE pipeline_node_run SET status = 'user_error', message = 'exit code 1' WHERE run_id = $1 AND node = 'load-sales' RETURNING 1) SELECT count(*) FROM u`, id)
	f.sql(`WITH u AS (UPDATE pipeline_node_run SET status = 'upstream_failed' WHERE run_id = $1 AND node = 'report' RETURNING 1) SELECT count(*) FROM u`, id)
	require.Zero(t, f.sql(`SELECT count(*) FROM notification_event WHERE kind = 'pipeline_run_finished'`), "a node's end is no run event")
	end("failed")
	end("failed") // the same status again: no event
	f.pass()
	mails := f.mails()
	require.Len(t, mails, 1, "one mail for the run, none per node")
	m := mails[0]
	assert.Equal(t, "oncall@example.com", m.To[0].Address)
	assert.Equal(t, "[datajobs] pipeline nightly: run "+strconv.FormatInt(id, 10)+" failed", m.Subject)
	assert.Contains(t, m.Text, "- load-sales: user error (exit code 1)")
	assert.Contains(t, m.Text, "- report: upstream failed")
	assert.Contains(t, m.Text, "https://datajobs.example.com/ui/teams/team-a/pipelines/nightly/runs/"+strconv.FormatInt(id, 10))
	assert.NotContains(t, m.Text, "Job:", "a pipeline's event names no job")

	// Repaired (running again) and succeeded: a second event, to the success contacts.
	f.sql(`WITH u AS (UPDATE pipeline_run SET status = 'running', end_time = NULL WHERE id = $1 RETURNING 1) SELECT count(*) FROM u`, id)
	f.sql(`WITH u AS (UPDATE pipeline_node_run SET status = 'succeeded', message = '' WHERE run_id = $1 RETURNING 1) SELECT count(*) FROM u`, id)
	end("succeeded")
	f.pass()
	mails = f.mails()
	require.Len(t, mails, 2)
	assert.Equal(t, "team@example.com", mails[0].To[0].Address)
	assert.Equal(t, "[datajobs] pipeline nightly: run "+strconv.FormatInt(id, 10)+" succeeded", mails[0].Subject)
	assert.NotContains(t, mails[0].Text, "did not succeed")
	assert.Equal(t, 2, f.sql(`SELECT count(*) FROM notification_event WHERE kind = 'pipeline_run_finished' AND job_name = 'pipeline:nightly'`))
	assert.Equal(t, "pipeline_run_failed", job.WebhookEventOf("pipeline_run_finished", "failed"))
}
