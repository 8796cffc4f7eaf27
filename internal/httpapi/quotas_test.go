package httpapi_test

import (
	"archive/zip"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/store"
	"github.com/datajobs/datajobs/internal/testzip"
)

func withQuotas(q store.TeamQuotas) func(*options) {
	return func(o *options) { o.quotas = q }
}

func TestConcurrentCreatesStopAtTheJobsQuota(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withQuotas(store.TeamQuotas{MaxJobs: 3}))
	statuses := make([]int, 10)
	bodies := make([]response, 10)
	var wg sync.WaitGroup
	for i := range statuses {
		wg.Go(func() {
			r := e.do("POST", "/data-jobs/for-team/team-a/jobs", fmt.Sprintf(`{"job_name":"quota-job-%d"}`, i))
			statuses[i], bodies[i] = r.status, r
		})
	}
	wg.Wait()
	created := 0
	for i, s := range statuses {
		switch s {
		case http.StatusCreated:
			created++
		case http.StatusConflict:
			body := bodies[i].vdkError(t)
			require.Contains(t, body["what"], `"team-a" has reached its limit of 3 data jobs`)
			require.Contains(t, body["why"], "max-jobs-per-team")
		default:
			t.Fatalf("unexpected status %d: %s", s, bodies[i].body)
		}
	}
	require.Equal(t, 3, created, "exactly the quota, however the creates interleave")

	// Other teams have their own quota; moving a job into a full team is refused too.
	other := e.createJob("team-b", "other-job")
	r := e.do("PUT", other+"/team/team-a", "")
	require.Equal(t, http.StatusConflict, r.status, "%s", r.body)
	require.Contains(t, r.vdkError(t)["why"], "max-jobs-per-team")
	require.Equal(t, http.StatusOK, e.do("GET", other, "").status, "the job stayed in its team")

	// Deleting a job makes room.
	for i, s := range statuses {
		if s == http.StatusCreated {
			require.Equal(t, http.StatusOK, e.do("DELETE", fmt.Sprintf("/data-jobs/for-team/team-a/jobs/quota-job-%d", i), "").status)
			break
		}
	}
	e.createJob("team-a", "after-delete")
}

func TestUploadsStopAtTheSourceBytesQuota(t *testing.T) {
	t.Parallel()
	now := time.Now()
	first := sampleJob(t, now, zip.Store)
	e := newEnv(t, withQuotas(store.TeamQuotas{MaxSourceBytes: int64(len(first)) * 3 / 2}))
	a := e.createJob("team-a", "job-one")
	b := e.createJob("team-a", "job-two")
	c := e.createJob("team-b", "job-three")
	e.version(a, first)

	r := e.upload(b, sampleJob(t, now, zip.Store, testzip.File{Name: "my-job/x.py", Body: "pass"}))
	require.Equal(t, http.StatusConflict, r.status, "%s", r.body)
	body := r.vdkError(t)
	require.Contains(t, body["what"], `team "team-a" would exceed`)
	require.Contains(t, body["why"], "max-source-bytes-per-team")
	require.Equal(t, 0, e.sourceRows("job-two"), "the refused upload left nothing")

	// The same files again add no byte; another team has its own quota.
	e.version(a, sampleJob(t, now.Add(time.Hour), zip.Store))
	e.version(c, first)
}
