package tracker

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/service"
	"github.com/datajobs/datajobs/internal/store"
	"github.com/datajobs/datajobs/internal/testenv"
)

// Issue 41, L1: one status PostgreSQL refuses (here a message cut inside a character,
// as the termination message's cut made them) failed the statement of the whole batch,
// other teams' runs included, again at every retry. The others are recorded now.
func TestABatchWithOneRowPostgreSQLRefusesRecordsTheOthers(t *testing.T) {
	db, err := store.Open(t.Context(), store.Config{URL: testenv.DatabaseURL(t)})
	require.NoError(t, err)
	t.Cleanup(db.Close)
	svc, err := service.New(service.Config{SupportedPythonVersions: []string{"3.11"}}, db)
	require.NoError(t, err)
	var jobs [3]job.Job
	for i, name := range []string{"good-job-a", "bad-job", "good-job-b"} {
		jobs[i], err = svc.CreateJob(t.Context(), "team-a", job.Job{Name: name, Team: "team-a", Schedule: "*/5 * * * *"})
		require.NoError(t, err)
	}
	term := &execTerm{x: &Tracker{db: db, cfg: Config{}.withDefaults()}, fence: job.Fence{Epoch: testenv.SyncEpoch(t, db)}}

	reqs := make([]writeRequest, len(jobs))
	for i, j := range jobs {
		msg := "running"
		if j.Name == "bad-job" {
			msg = "half a character: \xc3"
		}
		reqs[i] = writeRequest{u: job.ExecutionUpdate{
			ID: j.Name + "-1", JobName: j.Name, JobUID: j.UID, Type: job.ExecScheduled, Status: job.ExecRunning, Message: msg,
		}, done: make(chan writeResult, 1)}
	}
	term.writeBatch(t.Context(), reqs)

	for _, r := range reqs {
		res := <-r.done
		_, found, err := db.LoadExecution(t.Context(), r.u.ID)
		require.NoError(t, err)
		if r.u.JobName == "bad-job" {
			require.Error(t, res.err, "the refused row fails its own write")
			require.False(t, found)
			continue
		}
		require.NoError(t, res.err, r.u.ID)
		require.True(t, res.wrote, r.u.ID)
		require.True(t, found, "%s is recorded beside the refused row", r.u.ID)
	}
}
