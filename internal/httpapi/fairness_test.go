package httpapi_test

import (
	"archive/zip"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/httpapi"
	"github.com/datajobs/datajobs/internal/job"
	"github.com/datajobs/datajobs/internal/slots"
)

// shortWait makes a request past a bound wait little for a slot before its 429.
var shortWait = slots.Queue{Wait: 100 * time.Millisecond}

// clientFrom is an HTTP client whose connections come from the loopback address local
// (127.0.0.2, ...): another caller, for the per-caller bounds of auth mode none, which
// tell callers apart by address.
func clientFrom(local string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}}
	return &http.Client{Transport: &http.Transport{DialContext: d.DialContext, ExpectContinueTimeout: time.Minute}}
}

// holdUpload starts an upload that holds its slot: the server asks for the body from
// inside the handler (100 Continue) and gets it only when the returned func is called.
func holdUpload(t *testing.T, client *http.Client, url, archive string) (finish func() int) {
	t.Helper()
	body, send := io.Pipe()
	inHandler := make(chan struct{})
	trace := &httptrace.ClientTrace{Got100Continue: func() { close(inHandler) }}
	req, err := http.NewRequestWithContext(httptrace.WithClientTrace(t.Context(), trace), "POST", url, body)
	require.NoError(t, err)
	req.ContentLength = int64(len(archive))
	req.Header.Set("Expect", "100-continue")
	req.Header.Set("Content-Type", "application/octet-stream")
	done := make(chan int, 1)
	go func() {
		resp, err := client.Do(req)
		if err != nil {
			done <- 0
			return
		}
		resp.Body.Close()
		done <- resp.StatusCode
	}()
	<-inHandler
	return func() int {
		_, _ = send.Write([]byte(archive))
		_ = send.Close()
		return <-done
	}
}

// Issue 22: the upload slots were global only, so one caller opening as many uploads as
// there are slots kept everyone else out. One caller now holds at most its share; the
// next of theirs waits for that share, then is a 429 naming the per-caller flag, while
// another caller still gets in.
func TestOneCallerCannotHoldEveryUploadSlot(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withAPI(httpapi.Config{Limits: httpapi.Limits{MaxConcurrentUploads: 4, MaxUploadsPerCaller: 1}, Admission: shortWait}))
	path := e.createJob("team-a", "my-job")
	archive := sampleJob(t, time.Now(), zip.Deflate)
	hog := clientFrom("127.0.0.1")
	defer hog.CloseIdleConnections()
	finish := holdUpload(t, hog, e.url+path+"/sources", archive)

	r := e.upload(path, archive) // also from 127.0.0.1
	require.Equal(t, http.StatusTooManyRequests, r.status, "%s", r.body)
	require.Equal(t, "5", r.header.Get("Retry-After"))
	require.Contains(t, r.vdkError(t)["why"], "--max-concurrent-uploads-per-caller")

	other := clientFrom("127.0.0.2")
	defer other.CloseIdleConnections()
	req, err := http.NewRequestWithContext(t.Context(), "POST", e.url+path+"/sources", strings.NewReader(archive))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/octet-stream")
	resp, err := other.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, "another caller gets a slot")
	require.Equal(t, http.StatusOK, finish())
}

// Issue 22: a client that sends its upload a few bytes at a time held its slot for the
// whole --transfer-timeout (5 minutes), so a few of them kept every upload out. Below
// --min-transfer-rate (after a short grace) the upload is refused, 408 with a VDK body
// that says so (it was a 400), and its slot is free again for the next caller.
func TestAnUploadSlowerThanTheMinimumRateLosesItsSlot(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withAPI(httpapi.Config{Limits: httpapi.Limits{MaxConcurrentUploads: 1, MinTransferRate: 64 << 10}, MinTransferGrace: 500 * time.Millisecond}))
	path := e.createJob("team-a", "my-job")
	archive := sampleJob(t, time.Now(), zip.Deflate)

	body, send := io.Pipe()
	var trickle sync.WaitGroup
	ctx, stop := context.WithCancel(t.Context())
	defer stop()
	trickle.Go(func() { // ten bytes every 100 ms: 100 B/s
		for i := 0; i < len(archive) && ctx.Err() == nil; i += 10 {
			if _, err := send.Write([]byte(archive[i:min(i+10, len(archive))])); err != nil {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
	req, err := http.NewRequestWithContext(t.Context(), "POST", e.url+path+"/sources", body)
	require.NoError(t, err)
	req.ContentLength = int64(len(archive))
	req.Header.Set("Content-Type", "application/octet-stream")
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	resp, err := client.Do(req)
	stop()
	_ = send.CloseWithError(io.ErrClosedPipe)
	trickle.Wait()
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	// It was a 400, as if the archive were bad: the client's bytes were fine, it was slow.
	require.Equal(t, http.StatusRequestTimeout, resp.StatusCode, "%s", b)
	var vdk map[string]string
	require.NoError(t, json.Unmarshal(b, &vdk), "%s", b)
	for _, k := range []string{"what", "why", "consequences", "countermeasures"} {
		require.NotEmpty(t, vdk[k], "error body lacks %s: %s", k, b)
	}
	require.Equal(t, "The upload was too slow.", vdk["what"])
	require.Contains(t, vdk["why"], "--min-transfer-rate")
	require.Equal(t, 0, e.sourceRows("my-job"), "the slow upload stored nothing")

	e.version(path, archive) // the slot is free again
}

// A download whose client stops reading ends once it falls below the minimum rate, long
// before --transfer-timeout (here the default 5 minutes), so it frees its slot.
func TestADownloadThatFallsBelowTheMinimumRateEnds(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withAPI(httpapi.Config{Limits: httpapi.Limits{MinTransferRate: 1 << 20}, MinTransferGrace: time.Second}))
	resp := e.startUnreadDownload(t)
	// The handler returns (and frees its slot) although the client has not read: the
	// request is logged then, long before the 5 minute transfer timeout.
	require.Eventually(t, e.downloadLogged(t), time.Minute, 20*time.Millisecond, "the download is cut for its rate, not at the transfer timeout")
	n, err := io.Copy(io.Discard, resp.Body)
	require.Error(t, err, "the body is cut short")
	require.Less(t, n, int64(32<<20))
}

// blockingLogs is a cluster whose kubelet streams a running execution's log slowly: each
// read returns when released. The real kubelet cannot be made that slow on purpose.
type blockingLogs struct {
	started chan struct{}
	release chan struct{}
	tails   chan int
}

func (b *blockingLogs) ExecutionLog(ctx context.Context, _ job.Target, _ string, tail int) (string, bool, error) {
	b.tails <- tail
	b.started <- struct{}{}
	select {
	case <-b.release:
	case <-ctx.Done():
	}
	return "last line\n", true, nil
}

// Issue 22: live log reads had no bound, each streaming up to 64 MiB from the kubelet, and
// a read without tail_lines asked for the whole log. Now a read without tail_lines asks
// the cluster for --log-tail-lines lines, and reads in progress are bounded like
// downloads: one caller's extra read is a 429 naming the flag.
func TestLiveLogReadsTakeASlotAndADefaultTail(t *testing.T) {
	t.Parallel()
	logs := &blockingLogs{started: make(chan struct{}, 4), release: make(chan struct{}), tails: make(chan int, 4)}
	e := newEnv(t, withAPI(httpapi.Config{Limits: httpapi.Limits{LogTailLines: 250, MaxConcurrentLogReads: 4, MaxLogReadsPerCaller: 1}, Admission: shortWait}),
		func(o *options) { o.logs = logs })
	path := e.createJob("team-a", "my-job")
	e.sql(`INSERT INTO data_job_execution (id, job_name, type, status, op_id) VALUES ('my-job-1', 'my-job', 'manual', 'running', 'o')`)

	first := make(chan response, 1)
	go func() { first <- e.do("GET", path+"/executions/my-job-1/logs", "") }()
	<-logs.started
	require.Equal(t, 250, <-logs.tails, "no tail_lines: the default tail is asked of the cluster")
	r := e.do("GET", path+"/executions/my-job-1/logs?tail_lines=10", "")
	require.Equal(t, http.StatusTooManyRequests, r.status, "%s", r.body)
	require.Contains(t, r.vdkError(t)["why"], "--max-concurrent-log-reads-per-caller")
	close(logs.release)
	require.Equal(t, http.StatusOK, (<-first).status)

	r = e.do("GET", path+"/executions/my-job-1/logs?tail_lines=0", "")
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	<-logs.started
	require.Equal(t, 0, <-logs.tails, "tail_lines=0 asks for all that is kept")
}
