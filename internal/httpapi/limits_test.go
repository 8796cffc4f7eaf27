package httpapi_test

import (
	"archive/zip"
	"bytes"
	"crypto/rand"
	"io"
	"net/http"
	"net/http/httptrace"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/datajobs/datajobs/internal/httpapi"
	"github.com/datajobs/datajobs/internal/slots"
	"github.com/datajobs/datajobs/internal/testzip"
)

func withAPI(c httpapi.Config) func(*options) {
	return func(o *options) { o.api = c }
}

// Past the cap an upload waits for a slot (--admission-wait, short here); when none came
// it is refused with 429, Retry-After and a VDK body naming the cap, and stores nothing.
func TestUploadsBeyondTheCapAnswer429WithRetryAfter(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withAPI(httpapi.Config{Limits: httpapi.Limits{MaxConcurrentUploads: 1}, Admission: slots.Queue{Wait: 100 * time.Millisecond, WaitFlag: "--admission-wait"}}))
	path := e.createJob("team-a", "my-job")
	archive := sampleJob(t, time.Now(), zip.Deflate)

	// The first upload holds the only slot: the server asks for its body (100 Continue)
	// from inside the handler, and the test sends it only later.
	body, sendBody := io.Pipe()
	inHandler := make(chan struct{})
	trace := &httptrace.ClientTrace{Got100Continue: func() { close(inHandler) }}
	req, err := http.NewRequestWithContext(httptrace.WithClientTrace(t.Context(), trace), "POST", e.url+path+"/sources", body)
	require.NoError(t, err)
	req.ContentLength = int64(len(archive))
	req.Header.Set("Expect", "100-continue")
	req.Header.Set("Content-Type", "application/octet-stream")
	client := &http.Client{Transport: &http.Transport{ExpectContinueTimeout: time.Minute}}
	defer client.CloseIdleConnections()
	first := make(chan *http.Response, 1)
	go func() {
		resp, err := client.Do(req)
		if err != nil {
			t.Errorf("first upload: %v", err)
			close(first)
			return
		}
		first <- resp
	}()
	<-inHandler

	r := e.upload(path, archive)
	require.Equal(t, http.StatusTooManyRequests, r.status, "%s", r.body)
	require.Equal(t, "5", r.header.Get("Retry-After"))
	vdk := r.vdkError(t)
	require.Contains(t, vdk["what"], "Too many sources uploads")
	require.Contains(t, vdk["why"], "--max-concurrent-uploads")
	require.Contains(t, vdk["why"], "It waited 100ms for one to end (--admission-wait).")
	require.Equal(t, 0, e.sourceRows("my-job"), "the refused upload stored nothing")

	_, err = sendBody.Write([]byte(archive))
	require.NoError(t, err)
	require.NoError(t, sendBody.Close())
	resp := <-first
	require.NotNil(t, resp)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	// The slot is free again.
	e.version(path, archive)
}

// bigArchive is a zip of one stored file of n random bytes: it does not compress.
func bigArchive(t *testing.T, n int) string {
	t.Helper()
	data := make([]byte, n)
	_, _ = rand.Read(data)
	return makeZip(t, time.Now(), zip.Store, testzip.File{Name: "my-job/config.ini", Body: "[job]\n"}, testzip.File{Name: "my-job/data.bin", Body: string(data)})
}

func TestADownloadOfManyChunksIsTheArchive(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	path := e.createJob("team-a", "my-job")
	archive := bigArchive(t, 3<<20+12345) // four chunks of 1 MiB, the last partial
	v := e.version(path, archive)
	r := e.do("GET", path+"/sources", "")
	require.Equal(t, http.StatusOK, r.status)
	require.Equal(t, strconv.Itoa(len(archive)), r.header.Get("Content-Length"))
	require.Equal(t, `"`+v+`"`, r.header.Get("ETag"))
	require.True(t, bytes.Equal([]byte(archive), r.body), "the same bytes")
}

func TestADownloadThatTheClientDoesNotReadEndsAtItsDeadline(t *testing.T) {
	t.Parallel()
	// Long enough for the response to start on a loaded machine (the deadline covers the
	// database read before the headers too), far shorter than the test's patience.
	e := newEnv(t, withAPI(httpapi.Config{Limits: httpapi.Limits{TransferTimeout: 2 * time.Second}}))
	resp := e.startUnreadDownload(t)
	// The handler returns once its write deadline has passed, although the client has not
	// read: the request is logged then.
	require.Eventually(t, e.downloadLogged(t), time.Minute, 20*time.Millisecond)
	n, err := io.Copy(io.Discard, resp.Body)
	require.Error(t, err, "the body is cut short")
	require.Less(t, n, int64(32<<20))
}

// A statement that runs past the database's statement timeout (here an update waiting for
// a row another transaction holds) is a 503 saying the request did not complete in time,
// not an internal error, and it changes nothing; once the row is free the same request
// succeeds.
func TestAStatementPastTheDatabaseTimeoutIsA503ThatChangesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(o *options) { o.statementTimeout = 300 * time.Millisecond })
	path := e.createJob("team-a", "my-job")
	_, release := e.lockJob("my-job")

	update := `{"job_name":"my-job","description":"changed","config":{"schedule":{"schedule_cron":"15 10 * * *"}}}`
	r := e.do(http.MethodPut, path, update)
	require.Equal(t, http.StatusServiceUnavailable, r.status, "%s", r.body)
	body := r.vdkError(t)
	require.Equal(t, "The request did not complete in time.", body["what"])
	require.Contains(t, body["why"], "--db-statement-timeout")

	release()
	r = e.do(http.MethodGet, path, "")
	require.Equal(t, http.StatusOK, r.status)
	var got struct{ Description string }
	r.json(t, &got)
	require.Equal(t, "d", got.Description, "the timed-out update changed nothing")
	r = e.do(http.MethodPut, path, update)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
}

// startUnreadDownload starts the download of a sources archive larger than the socket
// buffers hold (stored directly, so no upload shares its deadline) and does not read it.
func (e *env) startUnreadDownload(t *testing.T) *http.Response {
	t.Helper()
	path := e.createJob("team-a", "my-job")
	e.sql(`INSERT INTO data_job_source (job_name, version_sha, archive, size_bytes) VALUES ('my-job', 'v1', $1, $2)`,
		make([]byte, 32<<20), 32<<20)
	resp, err := e.client.Get(e.url + path + "/sources")
	require.NoError(t, err)
	t.Cleanup(func() { resp.Body.Close() })
	require.Equal(t, http.StatusOK, resp.StatusCode)
	return resp
}

// downloadLogged reports whether a sources download's request has been logged: its
// handler has returned.
func (e *env) downloadLogged(t *testing.T) func() bool {
	return func() bool {
		for _, l := range e.logs.lines(t) {
			if l["msg"] == "http_request" && l["pattern"] == "GET /data-jobs/for-team/{team}/jobs/{job}/sources" {
				return true
			}
		}
		return false
	}
}
